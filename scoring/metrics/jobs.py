"""Reference metrics of responses, stored in MetricScore: the function, what its Celery job
(scoring.tasks.run_metrics_job), `manage.py compute_metrics` and the calibration pages call.

Every successful response is scored against its scenario's reference answer with
scoring.metrics.reference (ROUGE-1/2/L, BLEU-1…4, lengths), plus the embedding term of a chosen backend
(scoring.metrics.composite.EMBEDDING_BACKENDS, default none), and the paper's composite of those
(renormalised over the terms present; MetricScore.composite_note says which). Values that are
not finite (the length ratio of an empty reference) are stored as null.

The metric modules (jieba, numpy) are imported by the functions that score, not with this
module, which the calibration and release pages import for the queries below.
"""

import math

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from annotation.models import Campaign, Comparison
from scenarios.models import Response
from scoring.models import MetricScore

KIND = "compute_metrics"
BATCH = 2_000


def campaign_responses(campaign: Campaign) -> QuerySet:
    """The responses of a campaign's comparisons."""
    pairs = Comparison.objects.filter(campaign=campaign)
    return Response.objects.filter(
        Q(pk__in=pairs.values("response_a")) | Q(pk__in=pairs.values("response_b"))
    )


def scorable(responses: QuerySet) -> QuerySet:
    return responses.filter(status=Response.Status.OK)


def missing(responses: QuerySet) -> QuerySet:
    """Scorable responses without stored metrics."""
    return scorable(responses).filter(metrics__isnull=True)


def _values(scores: dict, text: str, reference: str, embedding: str) -> tuple[dict, str]:
    from scoring.metrics import composite as paper

    values = dict(scores)
    values.update(paper.embedding_features(text, reference, embedding))
    result = paper.composite(values)
    values["composite"] = float(result.score)
    clean = {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in values.items()
    }
    return clean, result.note


def compute(
    responses: QuerySet,
    *,
    recompute: bool = False,
    embedding: str = "none",
    processes: int = 2,
    progress=None,
) -> dict:
    """Score the responses (only those without metrics unless `recompute`); returns counts.

    Batches of BATCH responses, each written in one statement (an upsert on the response).
    """
    from scoring.metrics import composite as paper
    from scoring.metrics import reference as metrics

    if embedding not in paper.EMBEDDING_BACKENDS:
        raise ValueError(f"unknown embedding backend {embedding!r}")
    todo = scorable(responses) if recompute else missing(responses)
    ids = sorted(set(todo.values_list("pk", flat=True)))
    total = len(ids)
    done = 0
    if progress:
        progress(0, total, "computing reference metrics")
    for start in range(0, total, BATCH):
        chunk = ids[start : start + BATCH]
        rows = list(
            Response.objects.filter(pk__in=chunk).values_list(
                "pk", "text", "scenario__reference_response", "scenario__language"
            )
        )
        scored = metrics.score_many(
            [(text, reference, language) for _, text, reference, language in rows],
            processes=processes,
        )
        now = timezone.now()
        objects = []
        for (pk, text, reference, _), scores in zip(rows, scored, strict=True):
            values, note = _values(scores, text, reference, embedding)
            objects.append(
                MetricScore(response_id=pk, values=values, composite_note=note, computed_at=now)
            )
        with transaction.atomic():
            MetricScore.objects.bulk_create(
                objects,
                update_conflicts=True,
                unique_fields=["response"],
                update_fields=["values", "composite_note", "computed_at"],
            )
        done += len(chunk)
        if progress:
            progress(done, total, "computing reference metrics")
    return {"scored": total}


def select(params: dict) -> QuerySet:
    """The responses a job's params name: campaign id, run id, or all."""
    if params.get("campaign"):
        return campaign_responses(Campaign.objects.get(pk=params["campaign"]))
    if params.get("run"):
        return Response.objects.filter(run_id=params["run"])
    return Response.objects.all()
