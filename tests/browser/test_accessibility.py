"""Issue 15, point 5: WCAG AA contrast on every page, checked by axe-core in Chromium.

Every page the layout test visits (tests/browser/test_layout.py, the `demo` fixture), as each
role, at 1440×900: no axe violation of colour contrast (4.5:1 for text, 3:1 for large text)
and none of impact serious or critical (a scroll box without keyboard access, a select
without a label, …). axe leaves the text inside SVG charts out, so the charts' text is
measured here too: its colour against the shape under its middle (a heat-map cell) or the
page behind the chart.
"""

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.browser.test_layout import DESKTOP

pytestmark = pytest.mark.slow  # every page: `make test-slow` (CI runs it)

BLOCKING = {"serious", "critical"}

# Each SVG text whose contrast with what lies under its middle is below 4.5:1: the last shape
# drawn before it in the same chart that covers that point, else the first opaque background
# of the chart's ancestors.
SVG_TEXT_CONTRAST = """() => {
  const channels = (colour) => (colour.match(/[\\d.]+/g) || []).map(Number);
  const opaque = (colour) => {
    const c = channels(colour);
    return c.length === 3 || (c.length === 4 && c[3] > 0) ? c.slice(0, 3) : null;
  };
  const luminance = (rgb) => {
    const [r, g, b] = rgb.map((c) => {
      c /= 255;
      return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (light + 0.05) / (dark + 0.05);
  };
  const behind = (svg) => {
    for (let el = svg; el; el = el.parentElement) {
      const colour = opaque(getComputedStyle(el).backgroundColor);
      if (colour) return colour;
    }
    return [255, 255, 255];
  };
  const failures = [];
  for (const svg of document.querySelectorAll("svg")) {
    const shapes = [...svg.querySelectorAll("rect, circle, polygon, path")];
    for (const text of svg.querySelectorAll("text")) {
      const box = text.getBoundingClientRect();
      if (!box.width) continue;
      const x = box.left + box.width / 2, y = box.top + box.height / 2;
      let under = behind(svg);
      for (const shape of shapes) {
        if (!(shape.compareDocumentPosition(text) & Node.DOCUMENT_POSITION_FOLLOWING)) continue;
        const s = shape.getBoundingClientRect();
        const fill = opaque(getComputedStyle(shape).fill);
        if (fill && x >= s.left && x <= s.right && y >= s.top && y <= s.bottom) under = fill;
      }
      const ink = opaque(getComputedStyle(text).fill) || [0, 0, 0];
      const contrast = ratio(ink, under);
      if (contrast < 4.5) {
        failures.push(`${svg.getAttribute("aria-label")}: "${text.textContent}" ` +
          `${contrast.toFixed(2)}:1 (rgb ${ink} on rgb ${under})`);
      }
    }
  }
  return failures;
}"""


def axe_problems(page, axe: Axe) -> list[str]:
    """The page's blocking axe violations, one line per rule with a few of its elements."""
    problems = []
    for violation in axe.run(page).response["violations"]:
        if violation["id"] != "color-contrast" and violation["impact"] not in BLOCKING:
            continue
        nodes = violation["nodes"]
        where = "; ".join(
            f"{' '.join(node['target'])}: {node.get('failureSummary', '').splitlines()[-1].strip()}"
            for node in nodes[:3]
        )
        problems.append(f"{violation['id']} ({violation['impact']}, {len(nodes)}×): {where}")
    return problems


def test_every_page_passes_axe_and_its_charts_text_contrast(page, log_in, demo):
    users, pages = demo
    page.set_viewport_size(DESKTOP)
    axe = Axe()
    problems = []
    for role, paths in pages.items():  # one demo for the three roles: it takes seconds to load
        page.context.clear_cookies()
        log_in(users[role])
        for path in paths:
            answer = page.goto(path)
            assert answer.status == 200, (role, path, answer.status)
            found = axe_problems(page, axe) + [
                f"SVG text {text}" for text in page.evaluate(SVG_TEXT_CONTRAST)
            ]
            problems += [f"{role} {path}: {problem}" for problem in found]
    assert problems == []
