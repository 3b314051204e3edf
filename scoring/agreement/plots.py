"""The pairwise annotator agreement heat map (drawn by scoring.charts)."""

from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from scoring import charts

CHANCE = 1 / 3  # three labels: the share two random annotators agree on


def agreement_heatmap_svg(labels: list[str], share: list[list], shared: list[list]) -> SafeString:
    """Cell colour = share of shared items with the same label: white at chance, blue at 1;
    grey where two annotators share no item."""

    def title(i, j, value):
        if value is None:
            counted = _("none shared")
        else:
            counted = _("%(share)s of %(n)s shared") % {"share": f"{value:.0%}", "n": shared[i][j]}
        return f"{labels[i]} · {labels[j]}: {counted}"

    return charts.heatmap_svg(
        labels,
        labels,
        share,
        label=_("pairwise annotator agreement"),
        fill=lambda value: charts.sequential(value, CHANCE, 1.0),
        text=lambda value: f"{round(100 * value)}",
        title=title,
        key=(
            # xgettext:no-python-format
            _("Colour: % of the shared comparisons with the same label; white at 33 (chance)."),
            [CHANCE, 0.5, 2 / 3, 5 / 6, 1.0],
        ),
        cell=(34, 34),
    )
