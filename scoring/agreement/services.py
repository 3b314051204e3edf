"""Agreement reports for a campaign: the database side (judgments → DataFrame, caching);
the statistics themselves are in h2htalk.stats.agreement.

The pages import this module for the cached report; pandas and the statistics are imported by
the functions that compute one, so a page (and every command) starts without them.
"""

from typing import TYPE_CHECKING

from django.contrib import messages
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q

from annotation import exclusions
from annotation.models import Campaign, Judgment
from h2htalk.models import Job
from scenarios.taxonomy import Dimension, Subtask
from scoring.models import AgreementReport

if TYPE_CHECKING:
    import pandas as pd

MIN_UNITS_FOR_ALPHA = 5
# α with its 95% interval and units, in the order h2htalk.stats.agreement.label_agreement reports
# them; the agreement CSV and the calibration document show the same columns.
ALPHA_FIELDS = ("level", "alpha", "low", "high", "ci", "n_units")
EXPORT_TABLES = ("alpha", "annotators")
ITEM_COLUMNS = ("flag_items", "note_items")
ALPHA_COLUMNS = [
    "group",
    "label",
    *ALPHA_FIELDS,
    "n_pairable",
    "percent_agreement",
    "fleiss_kappa",
]
EXCLUSION_ACTIONS = ("exclude", "exclude_flagged", "clear")
INLINE_LIMIT = 5_000  # judgments computed in the request; above this a Celery job does it
NOTE = (
    "α: Krippendorff's alpha on the preference keyed by the model pair (ordinal for the "
    "5-point scale, nominal for A/tie/B, interval for 1–5 ratings of each response). Every "
    "comparison is counted once as its votes and once mirrored (A and B swapped), so α, "
    "Fleiss' κ and percent agreement do not depend on how companions or comparisons are "
    "numbered; 95% percentile bootstrap intervals resample comparisons together with their "
    "mirrors. Gold items are left out. “Both unacceptable” is the tie point of the 5-point "
    "scale and a tie of A/tie/B; the 4-way outcome (shown when some judgment says both are "
    "unacceptable) makes it a nominal category of its own."
)


# In the cache key: reports stored by older code are recomputed (r3: mirrored α; r4: the
# 4-way outcome, reasons and confidence).
REPORT_VERSION = "r4"


def judgment_state(campaign: Campaign) -> str:
    """Judgment count and last id (and the report version): equal for every exclusion state."""
    state = Judgment.objects.filter(comparison__campaign=campaign).aggregate(
        n=Count("pk"), last=Max("pk")
    )
    return f"{state['n']}:{state['last'] or 0}:{REPORT_VERSION}"


def fingerprint(campaign: Campaign) -> str:
    """The cache key of a report: `judgment_state` and, when the campaign has excluded
    annotators, a digest of who is excluded and why, so a change of either is a new report."""
    excluded = exclusions.state(campaign)
    return judgment_state(campaign) + (f":x{excluded}" if excluded else "")


def judgments_frame(campaign: Campaign) -> "pd.DataFrame":
    import pandas as pd

    from h2htalk.stats.agreement.labels import expand_ratings

    rows = Judgment.objects.filter(comparison__campaign=campaign).values_list(
        "comparison_id",
        "annotator__username",
        "preference",
        "screen_preference",
        "assignment__left_is_a",
        "time_on_task_ms",
        "client_time_ms",
        "comparison__is_gold",
        "comparison__gold_preference",
        "comparison__scenario__dimension",
        "comparison__scenario__subtask",
        "ratings",
        "both_unacceptable",
        "reasons",
        "confidence",
        "comparison__response_a__companion__name",
        "comparison__response_b__companion__name",
    )
    frame = pd.DataFrame.from_records(
        list(rows),
        columns=[
            "comparison",
            "annotator",
            "preference",
            "screen_preference",
            "left_is_a",
            "time_on_task_ms",
            "client_time_ms",
            "is_gold",
            "gold_preference",
            "dimension",
            "subtask",
            "ratings",
            "both_unacceptable",
            "reasons",
            "confidence",
            "companion_a",
            "companion_b",
        ],
    )
    if frame.empty:
        return frame
    frame["gold_preference"] = frame["gold_preference"].astype(float)
    frame["client_time_ms"] = frame["client_time_ms"].astype(float)
    frame["confidence"] = frame["confidence"].astype(float)
    # Keyed A = the lower companion id as stored; the statistics mirror every comparison
    # (h2htalk.stats.agreement, "Orientation"), so no re-orientation is needed here.
    return expand_ratings(frame)


def _alpha_rows(frame: "pd.DataFrame", group: str | None, n_boot: int, seed: int) -> list[dict]:
    from h2htalk.stats.agreement.labels import rating_dimension_labels
    from h2htalk.stats.agreement.reliability import label_agreement

    regular = frame[~frame["is_gold"]]
    groups = [("overall", regular)] if group is None else list(regular.groupby(group))
    rows = []
    for name, part in groups:
        if part["comparison"].nunique() < MIN_UNITS_FOR_ALPHA:
            continue
        labels = ["preference5", "winner3"] + (
            ["outcome4"] if part["both_unacceptable"].any() else []
        )
        labels += rating_dimension_labels(part) if group is None else []
        table = label_agreement(part, labels=labels, n_boot=n_boot, seed=seed)
        for label, row in table.iterrows():
            rows.append({"group": str(name), "label": label, **row.to_dict()})
    return rows


def compute_report(campaign: Campaign, n_boot: int = 1000, seed: int = 0, progress=None) -> dict:
    """The report. α, the pairwise heatmap and the label aggregation leave out the judgments of
    annotators excluded from the campaign (annotation.exclusions); the annotator table covers
    everyone, so an excluded annotator's flags stay visible (and clearing them is a choice made
    with the evidence in view)."""
    from h2htalk.stats.leaderboard import json_safe

    everyone = judgments_frame(campaign)
    excluded = exclusions.summary(campaign)
    left_out = {row["annotator"] for row in excluded}
    frame = everyone[~everyone["annotator"].isin(left_out)] if len(everyone) else everyone
    report = {
        "campaign": campaign.name,
        "judgments": len(frame),
        "judgments_total": len(everyone),
        "excluded": {
            "judgments": len(everyone) - len(frame),
            "annotators": [
                {key: row[key] for key in ("annotator", "reason", "judgments", "created_by")}
                for row in excluded
            ],
        },
        "ci": 0.95,
        "n_boot": n_boot,
        "note": NOTE,
        "overall": [],
        "by_dimension": [],
        "by_subtask": [],
        "annotators": [],
        "heatmap": {"annotators": [], "share": [], "shared": []},
        "aggregation": None,
        "reasons": {"labels": [], "companions": []},
        "confidence": [],
    }
    if everyone.empty:
        return report
    steps = [
        ("overall", lambda: _alpha_rows(frame, None, n_boot, seed)),
        ("by_dimension", lambda: _alpha_rows(frame, "dimension", n_boot, seed)),
        ("by_subtask", lambda: _alpha_rows(frame, "subtask", n_boot, seed)),
        ("annotators", lambda: _annotators(everyone, left_out)),
        ("heatmap", lambda: _heatmap(frame)),
        ("aggregation", lambda: _aggregation(frame)),
        ("reasons", lambda: _reasons(frame, campaign.reason_choices or [])),
        ("confidence", lambda: _confidence(frame)),
    ]
    for done, (key, step) in enumerate(steps, start=1):
        report[key] = step()
        if progress:
            progress(done, len(steps), key)
    return json_safe(report)


def alpha_tables(data: dict) -> list[tuple[str, list[dict]]]:
    """The page's α tables (overall, per dimension, per subtask), leaving out the rows of a
    label nobody gave twice on one comparison (all dashes: a rating dimension no one used);
    dimensions and subtasks in the benchmark's order."""
    order = {code: i for i, code in enumerate([*Dimension.values, *Subtask.values])}
    sections = [("Overall", "overall"), ("Per dimension", "by_dimension")]
    sections.append(("Per subtask", "by_subtask"))
    return [
        (
            title,
            sorted(
                (r for r in data[key] if r.get("n_units")), key=lambda r: order.get(r["group"], -1)
            ),
        )
        for title, key in sections
    ]


def _annotators(frame: "pd.DataFrame", excluded=frozenset()) -> list[dict]:
    from h2htalk.stats.agreement.annotators import annotator_report

    table = annotator_report(frame)
    return [
        {"annotator": name, **row.to_dict(), "excluded": name in excluded}
        for name, row in table.iterrows()
    ]


def _heatmap(frame: "pd.DataFrame") -> dict:
    from h2htalk.stats.agreement.coefficients import pairwise_agreement
    from h2htalk.stats.agreement.labels import rating_matrix

    if frame.empty:  # every annotator excluded
        return {"annotators": [], "share": [], "shared": []}
    matrix = rating_matrix(frame[~frame["is_gold"]], "winner3")
    share, shared = pairwise_agreement(matrix)
    return {
        "annotators": [str(name) for name in matrix.index],
        "share": share.to_numpy().tolist(),
        "shared": shared.to_numpy().tolist(),
    }


def _aggregation(frame: "pd.DataFrame") -> dict | None:
    from h2htalk.stats.agreement.aggregation import aggregate_labels

    regular = frame[~frame["is_gold"]]
    if regular["comparison"].nunique() < MIN_UNITS_FOR_ALPHA:
        return None
    result = aggregate_labels(regular)
    return {
        "units": len(result.labels),
        "disagreement": result.disagreement,
        "majority_ties": result.n_majority_ties,
    }


def _reasons(frame: "pd.DataFrame", choices: list[dict]) -> dict:
    """Which reasons go with the preferred response, per companion (de-blinded: researchers
    only), on the regular judgments: per companion the votes preferring it, how many of them
    gave a reason, and per reason how many gave it and their share of the votes preferring it."""
    from h2htalk.stats.agreement.details import reasons_by_companion

    regular = frame[~frame["is_gold"]]
    keys = [choice["key"] for choice in choices]
    labels = {choice["key"]: choice["label"] for choice in choices}
    if regular.empty or not (keys or regular["reasons"].map(bool).any()):
        return {"labels": [], "companions": []}
    table = reasons_by_companion(regular, keys)
    reason_keys = [c for c in table.columns if c not in ("preferred", "with_reasons")]
    companions = []
    for name, row in table.iterrows():
        preferred = int(row["preferred"])
        companions.append(
            {
                "companion": name,
                "preferred": preferred,
                "with_reasons": int(row["with_reasons"]),
                "reasons": [
                    {"key": key, "count": int(row[key]), "share": row[key] / preferred}
                    for key in reason_keys
                ],
            }
        )
    return {
        "labels": [{"key": key, "label": labels.get(key, key)} for key in reason_keys],
        "companions": companions,
    }


def _confidence(frame: "pd.DataFrame") -> list[dict]:
    """Per confidence level: votes, and how often they agree with the others' consensus."""
    from h2htalk.stats.agreement.details import agreement_by_confidence

    regular = frame[~frame["is_gold"]]
    if regular.empty or regular["confidence"].isna().all():
        return []
    table = agreement_by_confidence(regular)
    return [{"confidence": int(level), **row.to_dict()} for level, row in table.iterrows()]


def annotator_flags(campaign: Campaign) -> list[dict]:
    """The report's annotator table (with its flags) for the campaign's current judgments. It
    covers every judgment whoever is excluded, so a stored report of the same judgments under
    any exclusion state serves; without one it is computed now (no bootstrap needed)."""
    base = judgment_state(campaign)
    stored = (
        AgreementReport.objects.filter(campaign=campaign)
        .filter(Q(fingerprint=base) | Q(fingerprint__startswith=base + ":x"))
        .order_by("-pk")
        .first()
    )
    if stored is not None:
        return stored.data["annotators"]
    from h2htalk.stats.leaderboard import json_safe

    everyone = judgments_frame(campaign)
    if everyone.empty:
        return []
    excluded = {row["annotator"] for row in exclusions.summary(campaign)}
    return json_safe(_annotators(everyone, excluded))


def cached_report(campaign: Campaign) -> AgreementReport | None:
    return AgreementReport.objects.filter(
        campaign=campaign, fingerprint=fingerprint(campaign)
    ).first()


def store_report(campaign: Campaign, data: dict, state: str) -> AgreementReport:
    try:
        with transaction.atomic():
            return AgreementReport.objects.create(campaign=campaign, fingerprint=state, data=data)
    except IntegrityError:  # computed twice at once: keep the first
        return AgreementReport.objects.get(campaign=campaign, fingerprint=state)


def report_for(campaign: Campaign) -> AgreementReport:
    """The up-to-date report, computing it now (for small campaigns and the command)."""
    state = fingerprint(campaign)
    existing = AgreementReport.objects.filter(campaign=campaign, fingerprint=state).first()
    return existing or store_report(campaign, compute_report(campaign), state)


def report_or_job(campaign: Campaign, user, task) -> tuple[AgreementReport | None, Job | None]:
    """The report to show, or the job computing it: the cached report; else, for up to
    INLINE_LIMIT judgments, the report computed now; else the campaign's running agreement job
    or a new one running `task` (passed in: scoring.tasks imports this module)."""
    report = cached_report(campaign)
    if report is not None:
        return report, None
    count = int(fingerprint(campaign).split(":")[0])
    if count <= INLINE_LIMIT:
        return report_for(campaign), None
    running = (
        Job.objects.filter(kind="agreement", params__campaign=campaign.pk)
        .exclude(state__in=Job.FINISHED)
        .first()
    )
    if running is not None:
        return None, running
    job = Job.objects.create(kind="agreement", created_by=user, params={"campaign": campaign.pk})
    transaction.on_commit(lambda: task.delay(job.pk))
    return None, job


def export_rows(data: dict, table: str) -> tuple[list[str], list[dict]]:
    """Columns and rows of one CSV table of a report: the annotators, or α of every scope
    (overall, by dimension, by subtask) with a scope column."""
    if table == "annotators":
        rows = data["annotators"]
        columns = [c for c in rows[0] if c not in ITEM_COLUMNS] if rows else ["annotator"]
        return columns, rows  # the flags as English text (the items are for the pages)
    rows = [
        {**row, "scope": scope}
        for scope in ("overall", "by_dimension", "by_subtask")
        for row in data[scope]
    ]
    return ["scope", *ALPHA_COLUMNS], rows


def _names(rows) -> str:
    return ", ".join(sorted(row.annotator.username for row in rows))


def exclusion_action(campaign: Campaign, action: str, chosen: list, reason: str, by):
    """Apply one of the agreement page's exclusion actions: exclude the chosen annotators with
    a reason, exclude every flagged one, or bring the chosen (none: all) back. Returns the
    message level and text that tell the researcher what changed; a refused change is an error
    message, not an exception."""
    try:
        if action == "exclude":
            made = exclusions.exclude(campaign, chosen, reason, by=by)
            return messages.SUCCESS, (
                f"Excluded {_names(made)}: their judgments are left out of agreement, "
                "calibration fits and new releases of this campaign."
            )
        if action == "exclude_flagged":
            made = exclusions.exclude_flagged(campaign, by=by)
            if not made:
                return messages.INFO, "No annotator is flagged: nobody was excluded."
            return messages.SUCCESS, (
                f"Excluded {len(made)} flagged annotator(s): {_names(made)} (each with its "
                "flag as the reason)."
            )
        if action == "clear":
            removed = exclusions.clear(campaign, chosen or None)
            who = ", ".join(sorted(chosen)) if chosen else "every excluded annotator"
            return messages.SUCCESS, f"Brought back {who} ({removed} exclusion(s) removed)."
    except exclusions.ExclusionError as error:
        return messages.ERROR, f"Nothing changed: {error}."
    return messages.ERROR, f"Unknown action {action[:40]!r}: use {', '.join(EXCLUSION_ACTIONS)}."
