"""Server-side SVG plots of a release's leaderboard (no JavaScript library, no CDN), and the
table rows the leaderboard page shows. Every text in an SVG goes through html.escape."""

import math
from html import escape

from django.utils.safestring import SafeString, mark_safe

from scenarios.taxonomy import Dimension, Subtask
from scoring.models import Release
from scoring.releases import service as releases

GROUP_LABELS = {**dict(Dimension.choices), **dict(Subtask.choices)}

SMALL_MATRIX = 16  # more companions: matrix cells without numbers (hover for them)
HUMAN_COLOUR = "#2c5d8f"
JUDGE_COLOUR = "#c2571a"
FONT = 'font-family="system-ui, sans-serif"'
SUBTASK_SHORT = {
    "dialogue_base": "dial. base",
    "dialogue_emotion": "dial. emotion",
    "dialogue_schedule": "dial. schedule",
    "recollection_synthesize": "rec. synthesize",
    "recollection_refine": "rec. refine",
    "recollection_initialize": "rec. initialize",
    "itinerary_basic": "itin. basic",
    "itinerary_middle": "itin. middle",
    "itinerary_advanced": "itin. advanced",
    "itinerary_feedback": "itin. feedback",
    "itinerary_initialize": "itin. initialize",
}


def _svg(width, height, label, parts) -> SafeString:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{escape(label)}" '
        f"{FONT}>"
    )
    return mark_safe(head + "".join(parts) + "</svg>")  # noqa: S308 - every text escaped


def _short(name: str, size: int = 24) -> str:
    return name if len(name) <= size else name[: size - 1] + "…"


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    span = max(high - low, 1e-9)
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), default=raw)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


# ---------------------------------------------------------------- strengths with whiskers


def strengths_svg(rows: list[dict], level: float, width: int = 720) -> SafeString:
    """Elo with CI whiskers per companion (rows in display order), human and judge side by side.

    rows: {"name", "human": (elo, low, high) | None, "judge": (elo, low, high) | None}.
    """
    series = [
        ("human", "Humans (Bradley–Terry)", HUMAN_COLOUR),
        ("judge", "Calibrated judge (Bradley–Terry)", JUDGE_COLOUR),
    ]
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
    height = top + row_height * len(rows) + 56

    def x(value):
        return left + (value - low) / (high - low) * plot

    parts = [
        f'<rect x="{left}" y="{top - 6}" width="{plot}" height="{row_height * len(rows) + 6}" '
        'fill="#fff" stroke="#ccd3db"/>'
    ]
    bottom = top + row_height * len(rows)
    for tick in _ticks(low, high):
        parts.append(
            f'<line x1="{x(tick):.1f}" y1="{top - 6}" x2="{x(tick):.1f}" y2="{bottom}" '
            'stroke="#eef1f5"/>'
            f'<text x="{x(tick):.1f}" y="{bottom + 14}" font-size="10" text-anchor="middle">'
            f"{tick:g}</text>"
        )
    if low < 1000 < high:
        parts.append(
            f'<line x1="{x(1000):.1f}" y1="{top - 6}" x2="{x(1000):.1f}" y2="{bottom}" '
            'stroke="#999" stroke-dasharray="3 3"><title>Elo 1000 = average strength</title>'
            "</line>"
        )
    offsets = {key: (k - (len(series) - 1) / 2) * 8 for k, (key, *_) in enumerate(series)}
    for i, row in enumerate(rows):
        y = top + row_height * i + row_height / 2 - 3
        parts.append(
            f'<text x="{left - 8}" y="{y + 4:.1f}" font-size="12" text-anchor="end">'
            f"{escape(_short(row['name']))}</text>"
        )
        for key, label, colour in series:
            point = row.get(key)
            if not point or point[0] is None:
                continue
            elo, lo, hi = point[:3]
            yy = y + offsets[key]
            title = escape(
                f"{row['name']} · {label}: Elo {elo:.0f}"
                + (f", {level:.0%} CI {lo:.0f} to {hi:.0f}" if lo is not None else "")
            )
            if lo is not None and hi is not None:
                parts.append(
                    f'<line x1="{x(lo):.1f}" y1="{yy:.1f}" x2="{x(hi):.1f}" y2="{yy:.1f}" '
                    f'stroke="{colour}" stroke-width="2"/>'
                    f'<line x1="{x(lo):.1f}" y1="{yy - 4:.1f}" x2="{x(lo):.1f}" y2="{yy + 4:.1f}" '
                    f'stroke="{colour}" stroke-width="2"/>'
                    f'<line x1="{x(hi):.1f}" y1="{yy - 4:.1f}" x2="{x(hi):.1f}" y2="{yy + 4:.1f}" '
                    f'stroke="{colour}" stroke-width="2"/>'
                )
            parts.append(
                f'<circle cx="{x(elo):.1f}" cy="{yy:.1f}" r="4.5" fill="{colour}">'
                f"<title>{title}</title></circle>"
            )
    parts.append(
        f'<text x="{left + plot / 2:.1f}" y="{bottom + 30}" font-size="11" '
        f'text-anchor="middle">Elo-like scale, {level:.0%} bootstrap intervals</text>'
    )
    legend_x = left
    for _key, label, colour in series:
        parts.append(
            f'<circle cx="{legend_x + 5}" cy="{bottom + 45}" r="4.5" fill="{colour}"/>'
            f'<text x="{legend_x + 14}" y="{bottom + 49}" font-size="11">{escape(label)}</text>'
        )
        legend_x += 16 + 7 * len(label)
    return _svg(width, height, "strengths with confidence intervals", parts)


# ---------------------------------------------------------------- matrices and heat maps


def diverging(value: float | None, centre: float, spread: float) -> str:
    """White at the centre, blue above, orange below; grey for no value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "#eeeeee"
    t = max(-1.0, min(1.0, (value - centre) / spread)) if spread > 0 else 0.0
    target = (44, 93, 143) if t > 0 else (194, 87, 26)
    t = abs(t)
    red, green, blue = (int(255 - t * (255 - c)) for c in target)
    return f"rgb({red},{green},{blue})"


def grid_svg(
    row_labels: list[str],
    col_labels: list[str],
    cells: list[list[dict | None]],
    label: str,
    cell_width: int = 58,
    cell_height: int = 30,
) -> SafeString:
    """A labelled grid. Each cell: {"fill", "text", "title", "bold"} or None (grey, no value)."""
    left = 12 + 7 * max((len(_short(r)) for r in row_labels), default=4)
    top = 14 + 6 * max((len(_short(c, 20)) for c in col_labels), default=4)
    overhang = 0.8 * 6.2 * max((len(_short(c, 20)) for c in col_labels), default=4)
    width = left + cell_width * len(col_labels) + max(10, overhang - cell_width / 2 + 10)
    height = top + cell_height * len(row_labels) + 10
    parts = []
    for j, name in enumerate(col_labels):
        cx = left + j * cell_width + cell_width / 2
        parts.append(
            f'<text x="{cx:.1f}" y="{top - 6}" font-size="11" text-anchor="start" '
            f'transform="rotate(-40 {cx:.1f} {top - 6})">{escape(_short(name, 20))}</text>'
        )
    for i, name in enumerate(row_labels):
        cy = top + i * cell_height + cell_height / 2
        parts.append(
            f'<text x="{left - 6}" y="{cy + 4:.1f}" font-size="11" text-anchor="end">'
            f"{escape(_short(name))}</text>"
        )
        for j in range(len(col_labels)):
            cell = cells[i][j]
            x0, y0 = left + j * cell_width, top + i * cell_height
            if cell is None:
                parts.append(
                    f'<rect x="{x0}" y="{y0}" width="{cell_width - 1}" height="{cell_height - 1}" '
                    'fill="#f4f5f7"/>'
                )
                continue
            parts.append(
                f'<rect x="{x0}" y="{y0}" width="{cell_width - 1}" height="{cell_height - 1}" '
                f'fill="{cell["fill"]}"><title>{escape(cell["title"])}</title></rect>'
            )
            if cell.get("text"):
                weight = ' font-weight="700"' if cell.get("bold") else ""
                font = 11 if cell_height >= 24 else 9
                parts.append(
                    f'<text x="{x0 + cell_width / 2:.1f}" y="{y0 + cell_height / 2 + 4:.1f}" '
                    f'font-size="{font}" text-anchor="middle"{weight} pointer-events="none">'
                    f"{escape(cell['text'])}</text>"
                )
    return _svg(width, height, label, parts)


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
    return grid_svg(labels, labels, cells, f"{what} significance matrix", *size)


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
    return grid_svg(labels, labels, cells, "human win-rate matrix", *size)


def heatmap_svg(
    names, order, groups, values, what: str, digits: int, centre=None, extra=None
) -> SafeString:
    """Companion × group heat map; values[g][k] per group and companion position (None: none)."""
    finite = [v for g in groups for v in values[g] if v is not None]
    if not finite:
        return mark_safe("")
    if centre is None:
        centre = (min(finite) + max(finite)) / 2
    spread = max(max(finite) - centre, centre - min(finite), 1e-9)
    cells = []
    for k in order:
        row = []
        for g in groups:
            value = values[g][k]
            if value is None:
                row.append(None)
                continue
            note = (extra or {}).get((g, k), "")
            row.append(
                {
                    "fill": diverging(value, centre, spread),
                    "text": f"{value:.{digits}f}",
                    "title": f"{names[k]} · {g}: {what} {value:.{digits}f}{note}",
                }
            )
        cells.append(row)
    columns = [SUBTASK_SHORT.get(g, g) for g in groups]
    return grid_svg([names[k] for k in order], columns, cells, f"{what} heat map", 64, 28)


# ---------------------------------------------------------------- reliability


RELIABILITY_LABELS = {
    "calibrated": ("Calibrated judge", "#2c5d8f"),
    "composite": ("Paper composite (slope fitted)", "#6b7785"),
    "raw": ("Raw LLM judge", "#c2571a"),
}


def reliability_svg(tables: dict, size: int = 340) -> SafeString:
    """Observed share of human votes for A against the mean predicted P per bin (held out, from
    the calibrated judge's document); the diagonal is perfect calibration."""
    margin = 44
    plot = size - margin - 14

    def x(value):
        return margin + value * plot

    def y(value):
        return 10 + (1 - value) * plot

    parts = [
        f'<rect x="{x(0)}" y="{y(1)}" width="{plot}" height="{plot}" fill="#fff" '
        'stroke="#ccd3db"/>',
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}" stroke="#bbb" '
        'stroke-dasharray="4 3"><title>perfect calibration</title></line>',
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<text x="{x(tick)}" y="{y(0) + 14}" font-size="10" text-anchor="middle">'
            f"{tick:g}</text>"
            f'<text x="{x(0) - 5}" y="{y(tick) + 3}" font-size="10" text-anchor="end">'
            f"{tick:g}</text>"
        )
    parts.append(
        f'<text x="{x(0.5)}" y="{y(0) + 28}" font-size="11" text-anchor="middle">'
        "predicted P(A preferred), held out</text>"
        f'<text x="12" y="{y(0.5)}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {y(0.5)})">observed share of votes for A</text>'
    )
    legend_y = size + 12
    legend_x = margin
    drawn = 0
    for name in ("calibrated", "composite", "raw"):
        table = (tables or {}).get(name)
        if not table:
            continue
        label, colour = RELIABILITY_LABELS[name]
        points = [
            row
            for row in table.get("reliability") or []
            if isinstance(row, dict)
            and isinstance(row.get("mean_p"), int | float)
            and isinstance(row.get("observed"), int | float)
        ]
        if not points:
            continue
        drawn += 1
        path = " ".join(f"{x(r['mean_p']):.1f},{y(r['observed']):.1f}" for r in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for row in points:
            title = escape(
                f"{label}: mean predicted {row['mean_p']:.3f}, observed {row['observed']:.3f}"
                + (f", {row['comparisons']} comparisons" if "comparisons" in row else "")
            )
            parts.append(
                f'<circle cx="{x(row["mean_p"]):.1f}" cy="{y(row["observed"]):.1f}" r="3.5" '
                f'fill="{colour}"><title>{title}</title></circle>'
            )
        ece = table.get("ece")
        text = label + (f" (ECE {ece:.3f})" if isinstance(ece, int | float) else "")
        parts.append(
            f'<rect x="{legend_x}" y="{legend_y + 18 * (drawn - 1)}" width="10" height="10" '
            f'fill="{colour}"/><text x="{legend_x + 14}" y="{legend_y + 9 + 18 * (drawn - 1)}" '
            f'font-size="11">{escape(text)}</text>'
        )
    if not drawn:
        return mark_safe("")
    return _svg(size, size + 18 + 18 * drawn, "reliability diagram", parts)


# ---------------------------------------------------------------- the page's context


def _estimate(entry):
    if not entry:
        return None
    low, high = entry["low"], entry["high"]
    return {
        "value": entry["estimate"],
        "text": f"{entry['estimate']:.3f}",
        "ci": f"[{low:.3f}, {high:.3f}]" if low is not None and high is not None else "",
        "low": low,
        "high": high,
        "significant": entry.get("significant", 0),
        "lam": entry.get("lam"),
        "n_labelled": entry.get("n_labelled"),
        "n_unlabelled": entry.get("n_unlabelled"),
    }


def _triple(block, k):
    """(elo, low, high, "elo", "[low, high]") of companion k, or None."""
    if not block or not block.get("elo") or block["elo"][k] is None:
        return None
    elo, low, high = block["elo"][k], block["low"][k], block["high"][k]
    return (elo, low, high, f"{elo:.0f}", f"[{low:.0f}, {high:.0f}]")


def _mean(composite: dict) -> dict:
    """A composite entry with its numbers formatted for the page."""
    mean, low, high = composite.get("mean"), composite.get("low"), composite.get("high")
    text = f"{mean:.3f}" if mean is not None else ""
    ci = f"[{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return {**composite, "text": text, "ci": ci}


def leaderboard_context(release: Release, data: dict) -> dict:
    """Rows of the leaderboard table and every plot of the page."""
    names = [c["name"] for c in data["companions"]]
    ids = [c["id"] for c in data["companions"]]
    n = len(ids)
    order = releases.ordered(data)
    human = data["human"]["overall"]
    judge = (data["judge"] or {}).get("overall")
    anchor_rows = {row["companion"]: row for row in data["anchor_win_rate"]["rows"]}
    rows = []
    for k in order:
        win = anchor_rows.get(ids[k]) or {}
        better = [
            names[j] for j in range(n) if (human.get("significant") or [[0] * n] * n)[k][j] == 1
        ]
        worse = [
            names[j] for j in range(n) if (human.get("significant") or [[0] * n] * n)[k][j] == -1
        ]
        composite = _mean(data["composite"]["overall"][k])
        rows.append(
            {
                "id": ids[k],
                "name": names[k],
                "is_anchor": ids[k] == data["anchor"],
                "human": _triple(human, k),
                "human_rank": (human.get("rank") or [None] * n)[k],
                "votes": (human.get("games") or [0] * n)[k],
                "judge": _triple(judge, k),
                "judge_rank": ((judge or {}).get("rank") or [None] * n)[k],
                "ppi": _estimate(win.get("ppi")),
                "judge_only": _estimate(win.get("judge")),
                "humans_only": _estimate(win.get("humans")),
                "ppi_reason": win.get("ppi_reason", ""),
                "win_note": win.get("note", ""),
                "composite": composite,
                "better_than": better,
                "worse_than": worse,
            }
        )
    level = data["level"]
    context = {
        "data": data,
        "rows": rows,
        "level_percent": f"{level:.0%}",
        "strengths_plot": strengths_svg(
            [{"name": r["name"], "human": r["human"], "judge": r["judge"]} for r in rows], level
        ),
        "anchor_name": names[ids.index(data["anchor"])],
        "win_note": next((r["win_note"] for r in rows if r["win_note"]), ""),
    }
    if human.get("p_better"):
        context["human_significance"] = significance_svg(names, human, order, "Humans")
    if judge and judge.get("p_better"):
        context["judge_significance"] = significance_svg(names, judge, order, "Judge")
    if any(any(row) for row in data["win_matrix"]["games"]):
        context["win_rate_plot"] = win_rate_svg(
            names, data["win_matrix"]["wins"], data["win_matrix"]["games"], order
        )
    subtasks = data["subtasks"]
    composite_values = data["composite"].get("by_subtask") or {}
    if composite_values:
        context["composite_heatmap"] = heatmap_svg(
            names,
            order,
            [g for g in subtasks if g in composite_values],
            composite_values,
            "composite",
            3,
        )
    human_values, extra = {}, {}
    for group in subtasks:
        block = data["human"]["by_subtask"].get(group) or {}
        human_values[group] = block.get("elo") or [None] * n
        for k in range(n):
            if block.get("low") and block["low"][k] is not None:
                extra[(group, k)] = (
                    f" ({level:.0%} CI {block['low'][k]:.0f} to {block['high'][k]:.0f}, "
                    f"{block['games'][k]:.0f} votes)"
                )
    context["human_heatmap"] = heatmap_svg(
        names, order, subtasks, human_values, "human Elo", 0, centre=1000, extra=extra
    )
    if data["judge"]:
        judge_values, extra = {}, {}
        for group in subtasks:
            block = data["judge"]["by_subtask"].get(group) or {}
            judge_values[group] = block.get("elo") or [None] * n
            for k in range(n):
                if block.get("low") and block["low"][k] is not None:
                    extra[(group, k)] = (
                        f" ({level:.0%} CI {block['low'][k]:.0f} to {block['high'][k]:.0f})"
                    )
        context["judge_heatmap"] = heatmap_svg(
            names, order, subtasks, judge_values, "judge Elo", 0, centre=1000, extra=extra
        )
    if data.get("reliability"):
        context["reliability_plot"] = reliability_svg(data["reliability"])
    context["groups"] = _group_tables(data, order, names)
    methods = [human.get("method") or f"Humans: {human.get('skipped', 'no votes')}."]
    if judge:
        methods.append(judge.get("method") or f"Judge: {judge.get('skipped')}.")
    context["methods"] = methods
    return context


def _group_tables(data: dict, order, names) -> list[dict]:
    """Per dimension and per subtask: human (and judge) Elo with CI and rank per companion."""
    tables = []
    for key, title, groups in (
        ("by_dimension", "dimension", data["dimensions"]),
        ("by_subtask", "subtask", data["subtasks"]),
    ):
        for group in groups:
            block = data["human"][key].get(group) or {}
            judge_block = ((data["judge"] or {}).get(key) or {}).get(group)
            composite = (data["composite"].get(key) or {}).get(group) or [None] * len(names)
            rows = []
            for k in order:
                rows.append(
                    {
                        "name": names[k],
                        "human": _triple(block, k),
                        "human_rank": (block.get("rank") or [None] * len(names))[k],
                        "votes": (block.get("games") or [None] * len(names))[k],
                        "judge": _triple(judge_block, k),
                        "judge_rank": ((judge_block or {}).get("rank") or [None] * len(names))[k],
                        "composite": composite[k],
                        "composite_text": f"{composite[k]:.3f}" if composite[k] is not None else "",
                    }
                )
            tables.append(
                {
                    "kind": title,
                    "group": group,
                    "label": GROUP_LABELS.get(group, group),
                    "votes": block.get("votes", 0),
                    "skipped": block.get("skipped", ""),
                    "judge_skipped": (judge_block or {}).get("skipped", ""),
                    "rows": rows,
                }
            )
    return tables
