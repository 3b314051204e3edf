"""The SVG charts of scoring.charts: text on a coloured cell meets WCAG AA contrast whatever the
colour, no text is under 12 px at the natural size, charts scale (viewBox and class "chart"),
and a heat map carries a key to its colours."""

import re

import numpy as np
import pytest

from scoring import charts
from scoring.agreement.plots import agreement_heatmap_svg
from scoring.releases.plots import group_heatmap_svg, significance_svg


@pytest.mark.parametrize(
    "fill",
    [lambda v: charts.diverging(v, 0.5, 0.5), lambda v: charts.sequential(v, 0.0, 1.0)],
    ids=["diverging", "sequential"],
)
def test_text_on_every_cell_colour_has_aa_contrast(fill):
    worst = min(
        charts.contrast(colour, charts.ink(colour))
        for colour in (fill(v) for v in np.linspace(0, 1, 1001))
    )
    assert worst >= 4.5
    # What the issue measured: black 11 px text on the darkest blue, 3.07:1.
    assert charts.contrast("rgb(44,93,143)", "#000000") == pytest.approx(3.07, abs=0.01)
    assert charts.ink("rgb(44,93,143)") == "#ffffff"


def sizes_and_view(svg: str) -> tuple[list[float], str]:
    return [float(s) for s in re.findall(r'font-size="([\d.]+)"', svg)], svg.split(">")[0]


def words(svg: str) -> str:
    """The chart's texts, one after the other (a wrapped key reads as one sentence)."""
    return " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg))


def test_charts_scale_have_readable_text_and_colour_keys():
    names = ["Alpha", "Beta", "Gamma"]
    values = {"dialogue_base": [900.0, 1000.0, None], "itinerary_basic": [1100.0, 950.0, 1010.0]}
    heat = str(
        group_heatmap_svg(
            names, [0, 1, 2], list(values), values, "human Elo", 0, centre=1000, extra={}
        )
    )
    block = {
        "level": 0.95,
        "p_better": [[None, 0.99, 0.6], [0.01, None, 0.3], [0.4, 0.7, None]],
        "significant": [[0, 1, 0], [-1, 0, 0], [0, 0, 0]],
        "diff_low": [[0, 10, -5], [-90, 0, -30], [-40, -10, 0]],
        "diff_high": [[0, 90, 40], [-10, 0, 10], [5, 30, 0]],
    }
    matrix = str(significance_svg(names, block, [0, 1, 2], "Humans"))
    agreement = str(agreement_heatmap_svg(names, [[None, 0.8, 0.4]] * 3, [[0, 5, 5]] * 3))
    for svg in (heat, matrix, agreement):
        sizes, head = sizes_and_view(svg)
        assert min(sizes) >= charts.TEXT == 12
        assert 'class="chart"' in head and "viewBox=" in head
        assert "Colour:" in svg
    assert "white at 1000 (the average strength), blue above, orange below" in words(heat)
    assert ">no value</text>" in heat  # a grey cell: its swatch too
    assert "▲ / ▼: the row is significantly better / worse" in words(matrix)
    assert "white at 33 (chance)" in words(agreement)
