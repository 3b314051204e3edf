"""What each statistic on the agreement and calibration pages means, in one line.

Pages mark a shown statistic with ``data-stat="<key>"`` and list its meaning with the
``{% meanings "<key>" … %}`` tag (h2htalk/templatetags/display.py), which renders
``data-meaning="<key>"``; a test checks that every statistic a page shows has its line.
"""

from django.utils.translation import gettext_lazy as _

# key -> (name as the page shows it, what it means), in the page's language
MEANINGS = {
    # Human–human agreement (agreement page, calibration page).
    "level": (
        _("Level"),
        _(
            "How α compares two values: nominal = only equal or not, ordinal = their order "
            "counts, interval = their distance counts."
        ),
    ),
    "alpha": (
        _("α (Krippendorff's alpha)"),
        _(
            "How far annotators agree beyond chance: 1 = always, 0 = no better than chance, below "
            "0 = systematically apart; 0.8 is the usual bar for firm conclusions, 0.667 for tentative."
        ),
    ),
    "alpha_ci": (
        # xgettext:no-python-format
        _("95% CI"),
        _(
            # xgettext:no-python-format
            "The range α plausibly lies in: 95% of resampled sets of comparisons give a value "
            "inside it. Narrow = well measured."
        ),
    ),
    "units": (
        _("Comparisons (units)"),
        _("Comparisons with at least two votes on this label: only these can show agreement."),
    ),
    "pairable": (
        _("Pairable values"),
        _(
            "Votes in those comparisons; each can be paired with another vote on the same comparison."
        ),
    ),
    "percent_agreement": (
        # xgettext:no-python-format
        _("% agreement"),
        _(
            "Share of pairs of votes on the same comparison that are equal; not corrected for the "
            "agreement chance alone would give."
        ),
    ),
    "fleiss_kappa": (
        _("Fleiss' κ"),
        _(
            "Agreement beyond chance treating every value as a separate category (no order): "
            "1 = always, 0 = chance."
        ),
    ),
    "disagreement": (
        _("Majority vs Dawid–Skene"),
        _(
            "Share of comparisons whose winner differs between the plain majority and Dawid–Skene "
            "(which weights each annotator by their estimated reliability): high = the labels "
            "depend on whom one trusts."
        ),
    ),
    # Per annotator (agreement page).
    "judgments": (_("Judgments"), _("Votes this annotator submitted in the campaign.")),
    "consensus": (
        _("Agreement with others' consensus"),
        _(
            "Share of this annotator's A / tie / B votes equal to the plurality of the other "
            "annotators on the same comparison (comparisons with at least two others)."
        ),
    ),
    "gold_accuracy": (
        _("Gold accuracy"),
        _(
            "Share of their votes on gold items (comparisons with a known answer) that pick the "
            "known winner, or tie where the answer is a tie."
        ),
    ),
    "left_rate": (
        _("Left-preference rate"),
        _(
            # xgettext:no-python-format
            "Share of their non-tie votes for the response shown on the left: 50% = no position "
            "bias; p is the exact binomial test against 50%."
        ),
    ),
    "median_time": (
        _("Median time"),
        _(
            "Half of their items took less time than this: visible time in the browser, or the "
            "server's hand-out to submission where the browser reported none."
        ),
    ),
    "pairwise_agreement": (
        _("Pairwise agreement"),
        _(
            # xgettext:no-python-format
            "For two annotators, the share of the comparisons both rated where they chose the same "
            "winner (A / tie / B); 33% is chance."
        ),
    ),
    # Calibration: held-out comparison of the judges.
    "accuracy_without_ties": (
        _("Accuracy, ties left out"),
        _(
            "Share of comparisons with an A or B human majority where the judge picks the same side "
            "(a p of exactly ½ counts half); 0.5 = coin toss."
        ),
    ),
    "accuracy_with_ties": (
        _("Accuracy with ties"),
        _(
            "The same over every comparison, the judge saying “tie” inside its tie band δ around ½: "
            "comparable to one annotator's agreement with the others' consensus."
        ),
    ),
    "kappa": (
        _("Cohen's κ"),
        _(
            "Agreement of the judge's A / tie / B with the human majority beyond chance: "
            "1 = always, 0 = chance."
        ),
    ),
    "log_loss": (
        _("Log-loss"),
        _(
            "How surprised the judge's probabilities are by the human votes: lower is better; "
            "0.693 is a constant 50–50 guess."
        ),
    ),
    "brier": (
        _("Brier score"),
        _(
            "Mean squared gap between the predicted probability and each vote (A 1, B 0, tie ½): "
            "lower is better; 0.25 is a constant 50–50 guess."
        ),
    ),
    "ece": (
        _("Expected calibration error"),
        _(
            "Gap between predicted probabilities and the observed share of votes for A, averaged "
            "over 10 bins by their size: 0 = its probabilities can be taken at face value."
        ),
    ),
    "spearman": (
        _("Spearman ρ (system level)"),
        _(
            "How alike the judge's order of the companions is to the humans' order: 1 = the same, "
            "0 = unrelated, −1 = reversed."
        ),
    ),
    "kendall": (
        _("Kendall τ (system level)"),
        _(
            "The same by pairs of companions: the share of pairs in the humans' order minus the "
            "share reversed."
        ),
    ),
    "log_loss_difference": (
        _("Calibrated − raw log-loss"),
        _(
            "Below 0 = the calibration improved on the judge's own probabilities; an interval "
            "wholly below 0 = improved beyond chance."
        ),
    ),
    "reliability": (
        _("Reliability diagram"),
        _(
            "Per bin of predicted p (10 equal-width bins), the observed share of votes for A "
            "against the mean p: points on the diagonal = probabilities that can be taken at "
            "face value."
        ),
    ),
    "elo": (
        _("Elo"),
        _(
            # xgettext:no-python-format
            "Strength fitted to the votes (Bradley–Terry) on a chess-like scale: 100 points more "
            "wins about 64% of head-to-head votes."
        ),
    ),
    "weight": (
        _("Weight (standardised)"),
        _(
            "How much a typical difference in this feature moves the odds that humans prefer A; "
            "positive = more of it is preferred."
        ),
    ),
    "per_unit": (
        _("Per unit of Δ"),
        _(
            "The same weight per unit of the feature itself (weight ÷ scale), for applying it to "
            "raw feature differences."
        ),
    ),
    "scale": (
        _("Scale"),
        _(
            "Root mean square of the feature's difference between the two responses in the "
            "training data."
        ),
    ),
    "fold_sizes": (
        _("Train, test, test scenarios"),
        _(
            "Comparisons the fold's model was fitted on, comparisons it was scored on, and the "
            "scenarios of those (a scenario is never on both sides)."
        ),
    ),
    "regularisation_c": (
        _("C"),
        _(
            "Inverse strength of the L2 penalty chosen inside the fold: smaller = weights pulled "
            "harder towards 0."
        ),
    ),
    "composite_slope": (
        _("Composite slope"),
        _(
            "s in σ(s·Δcomposite), fitted on the training folds: how steeply the composite's "
            "difference turns into a probability."
        ),
    ),
    "fold_accuracy": (
        _("Accuracy raw / composite / calibrated"),
        _("Accuracy, ties left out, of the three judges on this fold's held-out comparisons."),
    ),
}


def meaning_rows(keys) -> list[dict]:
    """The rows of a meanings table, in the order given (KeyError on an unknown key: a page
    must not show a statistic nobody explained)."""
    return [{"key": key, "name": MEANINGS[key][0], "text": MEANINGS[key][1]} for key in keys]
