"""Issue 15, point 5: the leaderboard of the demo release, measured in Chromium.

At 1440×900 the main table fits its box (every column in sight); at 390×844 it scrolls inside a
labelled box that takes keyboard focus, with a hint above it that says so. The charts scale with
the window (a viewBox, never wider than their box, the proportions kept), their text is at least
12 px at 1440, and every chart that codes numbers in colour has a key to the colours.
"""

from django.urls import reverse
from playwright.sync_api import expect

from scoring.models import Release
from tests.browser.test_layout import DESKTOP, PHONE

# The table, its scrolling box and the hint, in viewport pixels.
TABLE = """() => {
  const box = (el) => el.getBoundingClientRect().toJSON();
  const region = document.getElementById("leaderboard-scroll");
  const hint = region.previousElementSibling;
  return {
    table: box(document.getElementById("leaderboard")),
    region: box(region),
    scroll: [region.scrollWidth, region.clientWidth],
    headers: [...document.querySelectorAll("#leaderboard th")].map((th) => [th.textContent.trim(), box(th)]),
    hint: { display: getComputedStyle(hint).display, box: box(hint), text: hint.textContent },
    page: document.documentElement.scrollWidth,
  };
}"""

# Every chart of the page: its rendered box, its box's width, its viewBox and the smallest text
# in CSS pixels (font size times the chart's scale).
CHARTS = """() => [...document.querySelectorAll(".plot svg")].map((svg) => {
  const box = svg.getBoundingClientRect();
  const view = svg.viewBox.baseVal;
  const scale = box.width / view.width;
  const sizes = [...svg.querySelectorAll("text")].map((t) => parseFloat(getComputedStyle(t).fontSize) * scale);
  return {
    label: svg.getAttribute("aria-label"),
    width: box.width, height: box.height, right: box.right,
    room: svg.parentElement.getBoundingClientRect().width,
    view: [view.width, view.height],
    smallest: Math.min(...sizes),
  };
})"""

# A colour-coded chart's key: the words that say what the colour means, the swatches' labels,
# and the numbers written in its cells.
KEY = """(svg) => {
  const texts = [...svg.querySelectorAll("text")];
  const title = texts.findIndex((t) => t.textContent.startsWith("Colour:"));
  const cells = texts.filter((t) => t.getAttribute("pointer-events") === "none");
  const after = title < 0 ? [] : texts.slice(title).filter((t) => !t.textContent.includes(" ") || /^[\\d.−-]+$/.test(t.textContent));
  return {
    title: title < 0 ? null : texts.slice(title).map((t) => t.textContent).join(" "),
    swatches: after.map((t) => t.textContent),
    cells: cells.map((t) => t.textContent),
  };
}"""


def open_leaderboard(page, log_in, demo, size):
    users, _ = demo
    page.set_viewport_size(size)
    log_in(users["researcher"])
    release = Release.objects.get(campaign__name__contains="demo data")
    page.goto(reverse("releases:detail", args=[release.pk]))
    expect(page.locator("#leaderboard")).to_be_visible()
    return page


def test_the_table_fits_at_1440_and_scrolls_in_a_box_that_says_so_on_a_phone(page, log_in, demo):
    open_leaderboard(page, log_in, demo, DESKTOP)
    region = page.get_by_role("region", name="Leaderboard table")
    expect(region).to_have_attribute("tabindex", "0")
    measured = page.evaluate(TABLE)
    scroll_width, client_width = measured["scroll"]
    assert scroll_width <= client_width, f"the table is {scroll_width} px in {client_width}"
    assert measured["table"]["right"] <= measured["region"]["right"] + 0.5, measured
    assert measured["region"]["right"] <= DESKTOP["width"], measured
    for name, box in measured["headers"]:  # "Humans only" and "Paper composite" included
        assert box["right"] <= measured["region"]["right"] + 0.5, (name, box, measured["region"])
    assert [name.split()[0] for name, _ in measured["headers"]][-2:] == ["Humans", "Paper"]
    assert measured["hint"]["display"] == "none", "a scroll hint where nothing scrolls"
    expect(region).not_to_have_attribute("data-overflowing", "")

    page.set_viewport_size(PHONE)  # no reload: the box notices the narrower window itself
    expect(region).to_have_attribute("data-overflowing", "")
    measured = page.evaluate(TABLE)
    scroll_width, client_width = measured["scroll"]
    assert scroll_width > client_width, measured
    assert measured["region"]["right"] <= PHONE["width"] and measured["page"] <= PHONE["width"]
    hint = measured["hint"]
    assert hint["display"] != "none" and "scroll" in hint["text"], hint
    assert hint["box"]["left"] >= 0 and hint["box"]["right"] <= PHONE["width"], hint
    assert hint["box"]["bottom"] <= measured["region"]["top"] + 0.5, "the hint is not above"
    region.focus()  # from the keyboard: the arrow keys scroll the box, not the page
    expect(region).to_be_focused()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    # Chromium animates keyboard scrolling: wait for the box to move (a loaded machine is slow).
    page.wait_for_function("() => document.getElementById('leaderboard-scroll').scrollLeft > 0")
    assert page.evaluate("window.scrollX") == 0
    region.evaluate("(el) => { el.scrollLeft = el.scrollWidth; }")
    last = page.locator("#leaderboard th").last.bounding_box()
    assert last["x"] + last["width"] <= measured["region"]["right"] + 0.5, last


def test_charts_scale_with_the_window_keep_12_px_text_and_have_colour_keys(page, log_in, demo):
    open_leaderboard(page, log_in, demo, DESKTOP)
    wide = {chart["label"]: chart for chart in page.evaluate(CHARTS)}
    assert {
        "strengths with confidence intervals",
        "Humans significance matrix",
        "human win-rate matrix",
        "composite heat map",
        "reliability diagram",
    } <= set(wide), sorted(wide)
    for label, chart in wide.items():
        assert chart["width"] <= chart["room"] + 0.5, (label, chart)
        assert chart["smallest"] >= 12, f"{label}: text of {chart['smallest']:.1f} px at 1440"
        assert abs(chart["height"] / chart["width"] - chart["view"][1] / chart["view"][0]) < 0.01

    page.set_viewport_size(PHONE)
    narrow = {chart["label"]: chart for chart in page.evaluate(CHARTS)}
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    for label, chart in narrow.items():
        assert chart["right"] <= PHONE["width"] and chart["width"] <= chart["room"] + 0.5, label
        assert abs(chart["height"] / chart["width"] - chart["view"][1] / chart["view"][0]) < 0.01
        if chart["view"][0] > chart["room"]:  # too wide for a phone: it shrinks to its box
            assert abs(chart["width"] - chart["room"]) < 0.5, (label, chart)
            assert chart["width"] < wide[label]["width"], (label, chart, wide[label])
    # The reliability diagram is no fixed box any more: it follows the window.
    assert narrow["reliability diagram"]["width"] < wide["reliability diagram"]["width"]

    for label in ("Humans significance matrix", "human win-rate matrix", "composite heat map"):
        key = page.locator(f'.plot svg[aria-label="{label}"]').evaluate(KEY)
        assert key["title"], f"{label}: no colour key"
        assert len(key["swatches"]) >= 5, (label, key)
    key = page.locator('.plot svg[aria-label="composite heat map"]').evaluate(KEY)
    assert "white at" in key["title"] and "blue above, orange below" in key["title"], key
    stops, cells = [float(s) for s in key["swatches"]], [float(c) for c in key["cells"]]
    assert min(stops) <= min(cells) and max(stops) >= max(cells), (stops, cells)
    legends = page.locator('.plot svg[aria-label="strengths with confidence intervals"]')
    expect(legends.locator("text", has_text="Humans (Bradley–Terry)")).to_have_count(1)
    reliability = page.locator('.plot svg[aria-label="reliability diagram"]')
    expect(reliability.locator("text", has_text="perfect calibration")).to_have_count(1)


def test_the_page_starts_with_its_plot_and_verdicts_and_folds_the_glossary(page, log_in, demo):
    open_leaderboard(page, log_in, demo, DESKTOP)
    plot = page.locator('.plot svg[aria-label="strengths with confidence intervals"]')
    top = plot.bounding_box()["y"]
    assert top < DESKTOP["height"] - 200, f"the strengths plot starts at {top:.0f} px"
    state = page.locator("#release-state").bounding_box()
    assert state["y"] + state["height"] <= top, "the state and check verdict come first"
    table = page.locator("#leaderboard").bounding_box()
    assert table["y"] > top, "the plot comes before the table"
    glossary = page.locator("details#glossary")
    expect(glossary).not_to_have_attribute("open", "")
    expect(page.locator("#leaderboard-meanings")).to_be_hidden()
    glossary.locator("summary").click()
    expect(page.locator("#leaderboard-meanings")).to_be_visible()
    facts = page.locator(".release-facts").bounding_box()
    assert facts["y"] > table["y"], "the inputs and provenance come after the numbers"
