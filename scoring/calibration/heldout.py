"""Validation on held-out humans: the nested cross-validation by scenario of the raw, composite
and calibrated judges as an exported document shows it, and the human–human agreement on the
same comparisons that the judges' numbers are read against."""

import pandas as pd

from h2htalk.stats.agreement.annotators import annotator_report, loo_consensus
from h2htalk.stats.agreement.reliability import label_agreement
from h2htalk.stats.calibration.cross_validation import CVResult, cross_validate, heldout_summary
from h2htalk.stats.leaderboard import json_safe
from scenarios.models import CompanionModel

BOOTSTRAP_BOOKKEEPING = ("n_pairable", "n_boot", "fleiss_units")  # not in a document


def human_agreement(judgments: pd.DataFrame, n_boot: int = 1000) -> dict:
    """Human–human agreement on the calibration's comparisons (agreement module, the same
    `label_agreement` as the agreement report, so the same mirrored definition and the same α
    on the same judgments): α (ordinal 5-point, nominal A/tie/B) with 95% CIs, Fleiss' κ,
    percent agreement, and the agreement of
    an annotator's A/tie/B vote with the leave-one-out consensus of the others (mean over
    annotators, and over votes)."""
    out = {"labels": {}, "annotators": int(judgments["annotator"].nunique())}
    if judgments.empty:
        return out
    table = label_agreement(judgments, labels=["preference5", "winner3"], n_boot=n_boot)
    for label, row in table.iterrows():
        out["labels"][label] = {
            key: row[key] for key in row.index if key not in BOOTSTRAP_BOOKKEEPING
        }
    annotators = annotator_report(judgments)
    with_consensus = annotators[annotators["n_consensus"] > 0]
    out["annotator_consensus_agreement"] = (
        float(with_consensus["consensus_agreement"].mean()) if len(with_consensus) else None
    )
    consensus = loo_consensus(judgments)
    agrees = consensus["agrees"].dropna()
    out["vote_consensus_agreement"] = float(agrees.mean()) if len(agrees) else None
    out["consensus_votes"] = len(agrees)
    out["note"] = (
        "Human–human agreement on the same comparisons, computed as on the agreement page: "
        "Krippendorff's α with 95% bootstrap intervals, every comparison counted once as its "
        "votes and once mirrored (A and B swapped), so it does not depend on companion ids; "
        "consensus agreement = share of an annotator's A/tie/B votes equal to the "
        "plurality of the other annotators (at least two others, no tied plurality), comparable "
        "to the judges' accuracy with ties against the human majority."
    )
    return json_safe(out)


def heldout_validation(
    frame: pd.DataFrame, features: list[str], folds: int, seed: int, progress
) -> tuple[CVResult, dict]:
    """Nested cross-validation of the three judges on the comparison table, and its held-out
    part of the document with every companion named (JSON-safe)."""
    result = cross_validate(frame, features, folds=folds, seed=seed, progress=progress)
    heldout = heldout_summary(result)
    companions = result.system["companions"]
    names = dict(CompanionModel.objects.filter(pk__in=companions).values_list("pk", "name"))
    heldout["system"]["companions"] = [
        {"id": int(c), "name": names.get(int(c), str(c))} for c in companions
    ]
    return result, heldout
