"""Small server-side SVG plots (no JavaScript library, no CDN). All text is escaped."""

from html import escape

from django.utils.safestring import SafeString, mark_safe


def _colour(share: float | None) -> str:
    """White (0.33, chance for 3 labels) → blue (1.0); grey for no shared items."""
    if share is None:
        return "#eeeeee"
    t = max(0.0, min(1.0, (share - 1 / 3) / (2 / 3)))
    red, green, blue = (int(255 - t * (255 - c)) for c in (44, 93, 143))
    return f"rgb({red},{green},{blue})"


def heatmap_svg(
    labels: list[str], share: list[list], shared: list[list], cell: int = 34
) -> SafeString:
    """Pairwise annotator agreement: cell colour = share of shared items with the same label."""
    n = len(labels)
    margin = 120
    size = margin + n * cell + 10
    width = size + 90  # room for the last rotated column label
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {size}" '
        f'width="{width}" height="{size}" role="img" aria-label="pairwise annotator agreement">'
    ]
    for i, label in enumerate(labels):
        y = margin + i * cell + cell / 2
        name = escape(label[:16])
        parts.append(
            f'<text x="{margin - 6}" y="{y + 4}" text-anchor="end" font-size="11">{name}</text>'
        )
        x = margin + i * cell + cell / 2
        parts.append(
            f'<text x="{x}" y="{margin - 6}" font-size="11" text-anchor="start" '
            f'transform="rotate(-50 {x} {margin - 6})">{name}</text>'
        )
    for i in range(n):
        for j in range(n):
            value = share[i][j]
            x, y = margin + j * cell, margin + i * cell
            title = f"{escape(labels[i])} · {escape(labels[j])}: " + (
                f"{value:.0%} of {shared[i][j]} shared" if value is not None else "none shared"
            )
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                f'fill="{_colour(value)}"><title>{title}</title></rect>'
            )
            if value is not None:
                ink = "#fff" if value > 0.75 else "#1d232a"
                parts.append(
                    f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" font-size="10" '
                    f'text-anchor="middle" fill="{ink}">{round(100 * value)}</text>'
                )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every text in it went through escape()
