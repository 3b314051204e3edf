"""Server-side SVG charts shared by the scoring pages (no JavaScript library, no CDN): the
drawing primitives, the labelled grid and heat map with its colour key, and the one
reliability diagram.

Every text that goes into an SVG passes through html.escape, which is why the result may be
marked safe. A chart has a viewBox and its natural size as width and height; the stylesheet
(svg.chart) lets it shrink with the page. Text is never smaller than TEXT user units (12 px at
the natural size), and text on a coloured cell takes black or white ink, whichever contrasts
more: at least 4.58:1 on any fill (WCAG AA asks 4.5:1)."""

import math
import textwrap
from collections.abc import Callable, Mapping
from html import escape

from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

FONT = 'font-family="system-ui, sans-serif"'
TEXT = 12  # font size of every text in a chart
BLUE = (44, 93, 143)
ORANGE = (194, 87, 26)
NO_VALUE = "#eeeeee"
EMPTY_CELL = "#f4f5f7"


def svg_document(width, height, label, parts) -> SafeString:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" class="chart" role="img" '
        f'aria-label="{escape(label)}" {FONT}>'
    )
    return mark_safe(head + "".join(parts) + "</svg>")  # noqa: S308 - every text escaped


def shorten(name: str, size: int = 24) -> str:
    return name if len(name) <= size else name[: size - 1] + "…"


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round axis ticks (steps of 1, 2 or 5 times a power of ten) in [low, high]."""
    span = max(high - low, 1e-9)
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), default=raw)
    out = []
    value = math.ceil(low / step) * step
    while value <= high + 1e-9:
        out.append(round(value, 10))
        value += step
    return out


def _tint(t: float, target: tuple[int, int, int]) -> str:
    """White (t = 0) to the target colour (t = 1)."""
    red, green, blue = (int(255 - t * (255 - c)) for c in target)
    return f"rgb({red},{green},{blue})"


def diverging(value: float | None, centre: float, spread: float) -> str:
    """White at the centre, blue above, orange below; grey for no value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NO_VALUE
    t = max(-1.0, min(1.0, (value - centre) / spread)) if spread > 0 else 0.0
    return _tint(abs(t), BLUE if t > 0 else ORANGE)


def sequential(value: float | None, low: float, high: float) -> str:
    """White at `low` (and below), blue at `high`; grey for no value."""
    if value is None:
        return NO_VALUE
    return _tint(max(0.0, min(1.0, (value - low) / (high - low))), BLUE)


def _luminance(colour: str) -> float:
    """WCAG relative luminance of "#rrggbb" or "rgb(r,g,b)"."""
    if colour.startswith("#"):
        channels = [int(colour[k : k + 2], 16) for k in (1, 3, 5)]
    else:
        channels = [int(c) for c in colour[colour.index("(") + 1 : -1].split(",")]
    linear = [c / 3294.6 if c <= 10 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(first: str, second: str) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""
    light, dark = sorted((_luminance(first), _luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def ink(fill: str) -> str:
    """Black or white text on `fill`, whichever contrasts more."""
    black, white = "#000000", "#ffffff"
    return black if contrast(fill, black) >= contrast(fill, white) else white


def _glyphs_per_char(text: str) -> float:
    """1 for Latin text, up to 2 where wide (CJK) characters fill it."""
    wide = sum(ord(char) >= 0x2E80 for char in text)
    return 1 + wide / max(len(text), 1)


def text_width(text: str) -> int:
    """About how wide `text` is at the charts' font size (a CJK character counts twice)."""
    return int(7 * len(text) * _glyphs_per_char(text))


def _key(
    legend: tuple[str, list[tuple[str, str]]], top: float, width: float
) -> tuple[list[str], float]:
    """A colour key under a chart: its title (wrapped to the width), then a swatch and label
    per colour, wrapped too. Returns the parts and the key's bottom."""
    title, swatches = legend
    parts, y = [], top
    for line in textwrap.wrap(title, max(int((width - 12) / 6.6 / _glyphs_per_char(title)), 20)):
        y += 16
        parts.append(f'<text x="6" y="{y}" font-size="{TEXT}">{escape(line)}</text>')
    x, y = 6, y + 8
    for fill, label in swatches:
        size = 26 + text_width(label)
        if x + size > width and x > 6:
            x, y = 6, y + 20
        parts.append(
            f'<rect x="{x}" y="{y}" width="14" height="14" fill="{fill}" stroke="#8a939c"/>'
            f'<text x="{x + 19}" y="{y + 12}" font-size="{TEXT}">{escape(label)}</text>'
        )
        x += size
    return parts, y + 20


# ---------------------------------------------------------------- grids and heat maps


def _grid_cell(cell: dict | None, x0: float, y0: float, width: int, height: int) -> str:
    if cell is None:
        return (
            f'<rect x="{x0}" y="{y0}" width="{width - 1}" height="{height - 1}" '
            f'fill="{EMPTY_CELL}"/>'
        )
    out = (
        f'<rect x="{x0}" y="{y0}" width="{width - 1}" height="{height - 1}" '
        f'fill="{cell["fill"]}"><title>{escape(cell["title"])}</title></rect>'
    )
    if cell.get("text"):
        weight = ' font-weight="700"' if cell.get("bold") else ""
        out += (
            f'<text x="{x0 + width / 2:.1f}" y="{y0 + height / 2 + 4:.1f}" '
            f'font-size="{TEXT}" text-anchor="middle"{weight} fill="{ink(cell["fill"])}" '
            f'pointer-events="none">{escape(cell["text"])}</text>'
        )
    return out


def grid_svg(
    row_labels: list[str],
    col_labels: list[str],
    cells: list[list[dict | None]],
    label: str,
    cell_width: int = 58,
    cell_height: int = 30,
    legend: tuple[str, list[tuple[str, str]]] | None = None,
) -> SafeString:
    """A labelled grid. Each cell: {"fill", "title", and optionally "text", "bold"} or None
    (light grey: the diagonal of a matrix). `legend`: (title, [(fill, label), …]), the colour
    key drawn under the grid."""
    left = 12 + 7.2 * max((len(shorten(r)) for r in row_labels), default=4)
    longest = max((len(shorten(c, 20)) for c in col_labels), default=4)
    top = 14 + 4.8 * longest
    overhang = 5.6 * longest  # the last rotated label reaches this far right of its column
    width = left + cell_width * len(col_labels) + max(10, overhang - cell_width / 2 + 10)
    width = max(width, 300) if legend else width
    parts = []
    for j, name in enumerate(col_labels):
        cx = left + j * cell_width + cell_width / 2
        parts.append(
            f'<text x="{cx:.1f}" y="{top - 6:.1f}" font-size="{TEXT}" text-anchor="start" '
            f'transform="rotate(-40 {cx:.1f} {top - 6:.1f})">{escape(shorten(name, 20))}</text>'
        )
    for i, name in enumerate(row_labels):
        cy = top + i * cell_height + cell_height / 2
        parts.append(
            f'<text x="{left - 6:.1f}" y="{cy + 4:.1f}" font-size="{TEXT}" text-anchor="end">'
            f"{escape(shorten(name))}</text>"
        )
        for j in range(len(col_labels)):
            x0, y0 = left + j * cell_width, top + i * cell_height
            parts.append(_grid_cell(cells[i][j], x0, y0, cell_width, cell_height))
    height = top + cell_height * len(row_labels) + 10
    if legend:
        key, height = _key(legend, height, width)
        parts += key
    return svg_document(width, height, label, parts)


def heatmap_svg(
    row_labels: list[str],
    col_labels: list[str],
    values: list[list[float | None]],
    *,
    label: str,
    fill: Callable[[float | None], str],
    text: Callable[[float], str],
    title: Callable[[int, int, float | None], str | None],
    key: tuple[str, list[float]],
    cell: tuple[int, int] = (64, 28),
) -> SafeString:
    """A heat map of values[i][j] (row i, column j; None: no value, a grey cell), empty when no
    cell has a value. `title(i, j, value)` is the hover text (for a cell without value: why,
    or None). `key`: (what the colour means, the values its swatches show); a swatch for "no
    value" joins it when some cell has none."""
    if all(value is None for row in values for value in row):
        return mark_safe("")
    cells = []
    for i, row in enumerate(values):
        cells.append([])
        for j, value in enumerate(row):
            note = title(i, j, value)
            if value is None:
                cells[i].append({"fill": NO_VALUE, "title": note or _("no value")})
                continue
            cells[i].append({"fill": fill(value), "text": text(value), "title": note or ""})
    meaning, stops = key
    swatches = [(fill(v), text(v)) for v in stops]
    if any(value is None for row in values for value in row):
        swatches.append((NO_VALUE, "no value"))
    return grid_svg(row_labels, col_labels, cells, label, *cell, legend=(meaning, swatches))


# ---------------------------------------------------------------- reliability


RELIABILITY_SERIES = {  # judge name in a calibrated judge's document → legend label, colour
    "calibrated": (gettext_lazy("Calibrated judge"), "#2c5d8f"),
    "composite": (gettext_lazy("Paper composite (slope fitted)"), "#6b7785"),
    "raw": (gettext_lazy("Raw LLM judge"), "#c2571a"),
}


def _reliability_points(table: Mapping) -> list[dict]:
    """The bins of a reliability table that have both a mean prediction and an observation."""
    return [
        row
        for row in table.get("reliability") or []
        if isinstance(row, dict)
        and isinstance(row.get("mean_p"), int | float)
        and isinstance(row.get("observed"), int | float)
    ]


def _point_title(label: str, row: dict) -> str:
    where = (
        _("bin %(lo).1f–%(hi).1f, ") % {"lo": row["lo"], "hi": row["hi"]}
        if "lo" in row and "hi" in row
        else ""
    )
    count = _(", %(n)s comparisons") % {"n": row["comparisons"]} if "comparisons" in row else ""
    numbers = {"predicted": row["mean_p"], "observed": row["observed"]}
    said = _("mean predicted %(predicted).3f, observed %(observed).3f") % numbers
    return f"{label}: {where}{said}{count}"


def _reliability_axes(x, y, plot: float) -> list[str]:
    perfect = escape(_("perfect calibration"))
    predicted = escape(_("predicted P(A preferred), held out"))
    observed = escape(_("observed share of votes for A"))
    parts = [
        f'<rect x="{x(0)}" y="{y(1)}" width="{plot}" height="{plot}" fill="#fff" '
        'stroke="#ccd3db"/>',
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}" stroke="#bbb" '
        f'stroke-dasharray="4 3"><title>{perfect}</title></line>',
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<text x="{x(tick)}" y="{y(0) + 16}" font-size="{TEXT}" text-anchor="middle">'
            f"{tick:g}</text>"
            f'<text x="{x(0) - 5}" y="{y(tick) + 4}" font-size="{TEXT}" text-anchor="end">'
            f"{tick:g}</text>"
        )
    parts.append(
        f'<text x="{x(0.5)}" y="{y(0) + 34}" font-size="{TEXT}" text-anchor="middle">'
        f"{predicted}</text>"
        f'<text x="14" y="{y(0.5)}" font-size="{TEXT}" text-anchor="middle" '
        f'transform="rotate(-90 14 {y(0.5)})">{observed}</text>'
    )
    return parts


def _reliability_legend(entries: list[tuple[str, str]], left: float, top: float) -> list[str]:
    """One line per judge (colour, label), then the dashed diagonal."""
    parts, perfect = [], escape(_("perfect calibration"))
    for k, (colour, label) in enumerate(entries):
        parts.append(
            f'<rect x="{left}" y="{top + 20 * k}" width="12" height="12" fill="{colour}"/>'
            f'<text x="{left + 17}" y="{top + 20 * k + 11}" font-size="{TEXT}">'
            f"{escape(label)}</text>"
        )
    y = top + 20 * len(entries) + 6
    parts.append(
        f'<line x1="{left}" y1="{y}" x2="{left + 12}" y2="{y}" stroke="#bbb" '
        'stroke-dasharray="4 3"/>'
        f'<text x="{left + 17}" y="{y + 5}" font-size="{TEXT}">{perfect}</text>'
    )
    return parts


def reliability_svg(tables: Mapping[str, Mapping | None] | None, size: int = 420) -> SafeString:
    """Reliability diagram of a calibrated judge's held-out predictions: the observed share of
    human votes for A against the mean predicted P per bin, one line per judge (the document's
    "heldout" → "judges" tables); the diagonal is perfect calibration. Empty when no table has
    a point. Used by the calibration report and the release leaderboard."""
    margin = 52
    plot = size - margin - 14

    def x(value):
        return margin + value * plot

    def y(value):
        return 10 + (1 - value) * plot

    parts = _reliability_axes(x, y, plot)
    legend = []
    for name, table in (tables or {}).items():
        points = _reliability_points(table) if table else []
        if not points:
            continue
        label, colour = RELIABILITY_SERIES.get(name, (name, "#000"))
        path = " ".join(f"{x(r['mean_p']):.1f},{y(r['observed']):.1f}" for r in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for row in points:
            parts.append(
                f'<circle cx="{x(row["mean_p"]):.1f}" cy="{y(row["observed"]):.1f}" r="3.5" '
                f'fill="{colour}"><title>{escape(_point_title(label, row))}</title></circle>'
            )
        ece = table.get("ece")
        legend.append(
            (colour, label + (f" (ECE {ece:.3f})" if isinstance(ece, int | float) else ""))
        )
    if not legend:
        return mark_safe("")
    parts += _reliability_legend(legend, margin, y(0) + 48)
    return svg_document(size, y(0) + 70 + 20 * len(legend), _("reliability diagram"), parts)
