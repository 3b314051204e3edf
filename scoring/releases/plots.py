"""The SVG plots of a release's leaderboard (drawn with scoring.charts): strengths with their
intervals, the significance and win-rate matrices, and companion × subtask heat maps."""

from html import escape

from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from h2htalk.display import group_label
from scoring.charts import (
    TEXT,
    diverging,
    grid_svg,
    heatmap_svg,
    shorten,
    svg_document,
    text_width,
    ticks,
)

SMALL_MATRIX = 16  # more companions: matrix cells without numbers (hover for them)
KEY_STOPS = (0, 0.25, 0.5, 0.75, 1)  # where a colour key shows a diverging scale
HUMAN_COLOUR = "#2c5d8f"
JUDGE_COLOUR = "#c2571a"
SERIES = (
    ("human", gettext_lazy("Humans (Bradley–Terry)"), HUMAN_COLOUR),
    ("judge", gettext_lazy("Calibrated judge (Bradley–Terry)"), JUDGE_COLOUR),
)
SUBTASK_SHORT = {
    "dialogue_base": pgettext_lazy("short subtask", "dial. base"),
    "dialogue_emotion": pgettext_lazy("short subtask", "dial. emotion"),
    "dialogue_schedule": pgettext_lazy("short subtask", "dial. schedule"),
    "recollection_synthesize": pgettext_lazy("short subtask", "rec. synthesize"),
    "recollection_refine": pgettext_lazy("short subtask", "rec. refine"),
    "recollection_initialize": pgettext_lazy("short subtask", "rec. initialize"),
    "itinerary_basic": pgettext_lazy("short subtask", "itin. basic"),
    "itinerary_middle": pgettext_lazy("short subtask", "itin. middle"),
    "itinerary_advanced": pgettext_lazy("short subtask", "itin. advanced"),
    "itinerary_feedback": pgettext_lazy("short subtask", "itin. feedback"),
    "itinerary_initialize": pgettext_lazy("short subtask", "itin. initialize"),
}


# ---------------------------------------------------------------- strengths with whiskers


def _whisker(x, lo: float, hi: float, y: float, colour: str) -> str:
    return (
        f'<line x1="{x(lo):.1f}" y1="{y:.1f}" x2="{x(hi):.1f}" y2="{y:.1f}" '
        f'stroke="{colour}" stroke-width="2"/>'
        f'<line x1="{x(lo):.1f}" y1="{y - 4:.1f}" x2="{x(lo):.1f}" y2="{y + 4:.1f}" '
        f'stroke="{colour}" stroke-width="2"/>'
        f'<line x1="{x(hi):.1f}" y1="{y - 4:.1f}" x2="{x(hi):.1f}" y2="{y + 4:.1f}" '
        f'stroke="{colour}" stroke-width="2"/>'
    )


def _strength_points(row: dict, series, x, y: float, level: float) -> list[str]:
    """One companion's Elo points with whiskers, one per series, side by side."""
    parts = []
    for k, (key, label, colour) in enumerate(series):
        point = row.get(key)
        if not point or point[0] is None:
            continue
        elo, lo, hi = point[:3]
        yy = y + (k - (len(series) - 1) / 2) * 8
        title = escape(
            f"{row['name']} · {label}: Elo {elo:.0f}"
            + (f", {level:.0%} CI {lo:.0f} to {hi:.0f}" if lo is not None else "")
        )
        if lo is not None and hi is not None:
            parts.append(_whisker(x, lo, hi, yy, colour))
        parts.append(
            f'<circle cx="{x(elo):.1f}" cy="{yy:.1f}" r="4.5" fill="{colour}">'
            f"<title>{title}</title></circle>"
        )
    return parts


def _strength_axis(x, low: float, high: float, top: int, bottom: float) -> list[str]:
    parts = []
    for tick in ticks(low, high):
        parts.append(
            f'<line x1="{x(tick):.1f}" y1="{top - 6}" x2="{x(tick):.1f}" y2="{bottom}" '
            'stroke="#eef1f5"/>'
            f'<text x="{x(tick):.1f}" y="{bottom + 16}" font-size="{TEXT}" '
            f'text-anchor="middle">{tick:g}</text>'
        )
    if low < 1000 < high:
        parts.append(
            f'<line x1="{x(1000):.1f}" y1="{top - 6}" x2="{x(1000):.1f}" y2="{bottom}" '
            'stroke="#999" stroke-dasharray="3 3"><title>Elo 1000 = average strength</title>'
            "</line>"
        )
    return parts


def _strength_legend(series, left: int, bottom: float, average: bool) -> list[str]:
    """Which colour is which series, and (when drawn) what the dashed line is."""
    parts = []
    legend_x = left
    for _key, label, colour in series:
        parts.append(
            f'<circle cx="{legend_x + 5}" cy="{bottom + 46}" r="4.5" fill="{colour}"/>'
            f'<text x="{legend_x + 14}" y="{bottom + 50}" font-size="{TEXT}">{escape(label)}</text>'
        )
        legend_x += 22 + text_width(str(label))
    if average:
        average_text = escape(_("Elo 1000 = average"))
        parts.append(
            f'<line x1="{legend_x}" y1="{bottom + 46}" x2="{legend_x + 14}" y2="{bottom + 46}" '
            'stroke="#999" stroke-dasharray="3 3"/>'
            f'<text x="{legend_x + 19}" y="{bottom + 50}" font-size="{TEXT}">'
            f"{average_text}</text>"
        )
    return parts


def strengths_svg(rows: list[dict], level: float, width: int = 900, series=SERIES) -> SafeString:
    """Elo with CI whiskers per companion (rows in display order), human and judge side by side
    (or the given series: (key, label, colour) each).

    rows: {"name", "human": (elo, low, high) | None, "judge": (elo, low, high) | None}.
    """
    series = [s for s in series if any(r.get(s[0]) for r in rows)]
    values = [
        v for r in rows for key, *_ in series if r.get(key) for v in r[key][:3] if v is not None
    ]
    if not values or not rows:
        return mark_safe("")
    low, high = min(values), max(values)
    pad = max((high - low) * 0.08, 5)
    low, high = low - pad, high + pad
    left, right, top, row_height = 190, 24, 30, 30
    plot = width - left - right
    bottom = top + row_height * len(rows)

    def x(value):
        return left + (value - low) / (high - low) * plot

    parts = [
        f'<rect x="{left}" y="{top - 6}" width="{plot}" height="{row_height * len(rows) + 6}" '
        'fill="#fff" stroke="#ccd3db"/>',
        *_strength_axis(x, low, high, top, bottom),
    ]
    for i, row in enumerate(rows):
        y = top + row_height * i + row_height / 2 - 3
        parts.append(
            f'<text x="{left - 8}" y="{y + 4:.1f}" font-size="{TEXT}" text-anchor="end">'
            f"{escape(shorten(row['name']))}</text>"
        )
        parts += _strength_points(row, series, x, y, level)
    parts.append(
        f'<text x="{left + plot / 2:.1f}" y="{bottom + 32}" font-size="{TEXT}" '
        f'text-anchor="middle">Elo-like scale, {level:.0%} bootstrap intervals</text>'
    )
    parts += _strength_legend(series, left, bottom, low < 1000 < high)
    return svg_document(width, bottom + 58, _("strengths with confidence intervals"), parts)


# ---------------------------------------------------------------- matrices and heat maps


def _share_key(meaning: str) -> tuple[str, list[tuple[str, str]]]:
    """The colour key of a matrix of shares: white at 0.5, orange below, blue above."""
    return meaning, [(diverging(v, 0.5, 0.5), f"{v:g}") for v in KEY_STOPS]


def significance_svg(names, block: dict, order: list[int], what: str) -> SafeString:
    """P(row beats column) from the bootstrap; ▲ / ▼ where the difference is significant."""
    level = block["level"]
    small = len(order) <= SMALL_MATRIX
    cells = []
    for i in order:
        row = []
        for j in order:
            p = block["p_better"][i][j]
            if i == j or p is None:
                row.append(None)
                continue
            flag = block["significant"][i][j]
            mark = "▲ " if flag == 1 else "▼ " if flag == -1 else ""
            verdict = (
                "significantly better"
                if flag == 1
                else "significantly worse"
                if flag == -1
                else "not significantly different"
            )
            title = (
                f"{names[i]} vs {names[j]}: P(stronger) {p:.2f}, Elo difference {level:.0%} "
                f"CI {block['diff_low'][i][j]:+.0f} to {block['diff_high'][i][j]:+.0f}: {verdict}"
            )
            row.append(
                {
                    "fill": diverging(p, 0.5, 0.5),
                    "text": f"{mark}{p:.2f}" if small else mark.strip(),
                    "title": title,
                    "bold": flag != 0,
                }
            )
        cells.append(row)
    labels = [names[k] for k in order]
    size = (58, 30) if small else (22, 18)
    key = _share_key(
        _(
            "Colour: P(row stronger than column) over the bootstrap draws. "
            "▲ / ▼: the row is significantly better / worse."
        )
    )
    label = _("%(what)s significance matrix") % {"what": what}
    return grid_svg(labels, labels, cells, label, *size, legend=key)


def win_rate_svg(names, wins, games, order: list[int]) -> SafeString:
    """Human empirical win rate of the row over the column (ties half) with the vote count."""
    cells = []
    for i in order:
        row = []
        for j in order:
            n = games[i][j]
            if i == j or not n:
                row.append(None)
                continue
            rate = wins[i][j] / n
            row.append(
                {
                    "fill": diverging(rate, 0.5, 0.5),
                    "text": f"{rate:.2f}" if len(order) <= SMALL_MATRIX else "",
                    "title": f"{names[i]} over {names[j]}: {wins[i][j]:g} of {n:g} votes "
                    f"(ties half) = {rate:.3f}",
                }
            )
        cells.append(row)
    labels = [names[k] for k in order]
    size = (58, 30) if len(order) <= SMALL_MATRIX else (22, 18)
    key = _share_key(
        _("Colour: share of the human votes the row won against the column (ties half).")
    )
    return grid_svg(labels, labels, cells, _("human win-rate matrix"), *size, legend=key)


def group_heatmap_svg(
    names, order, groups, values, what: str, digits: int, centre=None, extra=None
) -> SafeString:
    """Companion × group heat map; values[g][k] per group and companion position (None: none);
    white at the centre, blue above, orange below. A centre given is the average strength (Elo
    1000); without one, the middle of the values."""
    finite = [v for g in groups for v in values[g] if v is not None]
    if not finite:
        return mark_safe("")
    white = _("the average strength") if centre is not None else _("the middle of its range")
    if centre is None:
        centre = (min(finite) + max(finite)) / 2
    spread = max(max(finite) - centre, centre - min(finite), 1e-9)

    def title(i, j, value):
        if value is None:
            return None
        note = (extra or {}).get((groups[j], order[i]), "")
        return f"{names[order[i]]} · {group_label(groups[j])}: {what} {value:.{digits}f}{note}"

    return heatmap_svg(
        [names[k] for k in order],
        [str(SUBTASK_SHORT.get(g, g)) for g in groups],
        [[values[g][k] for g in groups] for k in order],
        label=_("%(what)s heat map") % {"what": what},
        fill=lambda value: diverging(value, centre, spread),
        text=lambda value: f"{value:.{digits}f}",
        title=title,
        key=(
            _("Colour: %(what)s; white at %(centre)s (%(white)s), blue above, orange below.")
            % {"what": what, "centre": f"{centre:.{digits}f}", "white": white},
            [centre + spread * (2 * t - 1) for t in KEY_STOPS],
        ),
    )
