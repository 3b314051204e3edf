"""Stored metrics and verdicts read once (scoring.stored_columns): the digests and the feature,
rubric and composite tables equal those computed row by row from the stored JSON, with a
release's verification and computation reading each table from the database once."""

import contextlib
import hashlib
import math

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from h2htalk.provenance import canonical
from scenarios.models import GenerationRun
from scoring import stored_columns
from scoring.frames import finite_number
from scoring.metrics import features
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict, MetricScore
from scoring.releases import data as release_data
from scoring.releases import freezing
from tests.annotation import factories as campaign_factories
from tests.scenarios import factories
from tests.scoring import test_calibration_support as support

pytestmark = pytest.mark.django_db

DIMENSIONS = support.DIMENSIONS


@pytest.fixture
def world():
    """Responses with metrics and verdicts, and the awkward cases: a response without metrics,
    one with two verdicts (a score out of range, a dimension missing), a failed verdict, a
    verdict with no scores and a pairwise verdict of the same config."""
    rng = np.random.default_rng(3)
    config = JudgeConfig.objects.create(name="rubric", mode=JudgeConfig.Mode.SINGLE, rubric="x")
    run = JudgeRun.objects.create(name="rubric run", judge=config)
    companions = campaign_factories.companions(names=("A", "B", "C"), start_id=910_000)
    generation = GenerationRun.objects.create(name="g", kind="import")
    scenarios = [factories.scenario(None, state="approved") for _ in range(4)]
    made = support.add_responses(generation, scenarios, companions, rng, run)
    ids = [r.pk for r in made]
    MetricScore.objects.filter(response_id=ids[1]).delete()
    MetricScore.objects.filter(response_id=ids[2]).update(
        values={"embedding_score": 0.7, "rouge1": "n/a", "bertscore": 0.4, "length_chars": 0}
    )
    extra = [
        {"empathy": 11, "fluency": 3, "safety": None},
        {"empathy": 7, "fluency": 4.5, "planning": "high"},
    ]
    for sample, scores in enumerate(extra, start=1):
        JudgeVerdict.objects.create(
            run=run, response_id=ids[3], sample=sample, parse="fallback", scores=scores
        )
    JudgeVerdict.objects.create(
        run=run, response_id=ids[4], sample=1, parse="failed", scores={"empathy": 1}
    )
    JudgeVerdict.objects.filter(run=run, response_id=ids[5]).update(scores={})
    JudgeVerdict.objects.create(
        run=run, first_id=ids[6], second_id=ids[7], parse="strict", winner="first", scores={}
    )
    return config, ids


def _metrics_digest_row_by_row(ids):
    values = dict(MetricScore.objects.values_list("response_id", "values"))
    lines = "".join(
        f"{pk}\t{canonical(values[pk]) if pk in values else '-'}\n" for pk in sorted(ids)
    )
    return hashlib.sha256(lines.encode()).hexdigest()


def _verdicts_digest_row_by_row(config, ids):
    digest = hashlib.sha256()
    for v in JudgeVerdict.objects.filter(run__judge=config).order_by("pk"):
        if v.response_id in ids or (v.first_id in ids and v.second_id in ids):
            digest.update(
                f"{v.pk}\t{v.response_id}\t{v.first_id}\t{v.second_id}\t{v.sample}\t{v.parse}\t"
                f"{v.winner}\t{canonical(v.scores or {})}\n".encode()
            )
    return digest.hexdigest()


def _rubric_row_by_row(config, ids):
    out = {}
    for pk in sorted(ids):
        verdicts = JudgeVerdict.objects.filter(
            run__judge=config, response_id=pk, parse__in=("strict", "fallback")
        ).order_by("pk")
        record = []
        for d in DIMENSIONS:
            values = [finite_number((v.scores or {}).get(d)) for v in verdicts]
            values = [x for x in values if 1 <= x <= 10]
            record.append(sum(values) / len(values) if values else math.nan)
        present = [x for x in record if not math.isnan(x)]
        if present:
            out[pk] = [*record, sum(present) / len(present)]
    return out


def _same(x, y) -> bool:
    return (math.isnan(x) and math.isnan(y)) or x == y


@pytest.mark.parametrize("once", [False, True])
def test_tables_and_digests_equal_the_row_by_row_computation(world, once):
    config, ids = world
    document = {"features": ["judge_empathy"], "judge": {"config": config.name}}
    with stored_columns.reading_once() if once else contextlib.nullcontext():
        assert freezing.metrics_digest(ids) == _metrics_digest_row_by_row(ids)
        assert freezing.verdicts_digest(document, ids) == _verdicts_digest_row_by_row(config, ids)
        metrics = features.metric_table(ids[::-1])
        rubric = features.rubric_table(config, ids)
        found, paper, encoders = release_data._paper_terms(ids[2:])
    stored = dict(MetricScore.objects.values_list("response_id", "values"))
    assert metrics.index.tolist() == sorted(stored)
    for pk, values in stored.items():
        assert _same(metrics.loc[pk, "rouge1"], finite_number(values.get("rouge1")))
        chars = finite_number(values.get("length_chars"))
        assert _same(metrics.loc[pk, "log_length"], math.log1p(chars))
        assert math.isnan(metrics.loc[pk, "embedding_cosine"])  # only under its own key
    expected = _rubric_row_by_row(config, ids)
    assert rubric.index.tolist() == sorted(expected)
    for pk, record in expected.items():
        assert all(_same(x, y) for x, y in zip(rubric.loc[pk].tolist(), record, strict=True))
    assert JudgeVerdict.objects.filter(response_id=ids[3]).count() == 3  # averaged in order
    assert ids[5] not in rubric.index and ids[4] in rubric.index
    assert sorted(found) == sorted(pk for pk in ids[2:] if pk in stored)
    terms = stored_columns.paper_term_keys()
    embedding = [t for t, _ in terms].index("embedding_cosine")
    assert paper[found[ids[2]], embedding] == 0.7  # stored under the released evaluator's key
    assert all(len(names) == len(found) for names in encoders.values())


def _reads(queries, table: str) -> int:
    return sum(f'"{table}"' in q["sql"] and "SELECT" in q["sql"] for q in queries)


def test_reading_once_reads_each_table_once(world):
    config, ids = world
    document = {"features": ["judge_empathy"], "judge": {"config": config.name}}
    with CaptureQueriesContext(connection) as without:
        freezing.metrics_digest(ids)
        freezing.verdicts_digest(document, ids)
        features.metric_table(ids)
        features.rubric_table(config, ids)
        release_data._paper_terms(ids)
    with CaptureQueriesContext(connection) as within, stored_columns.reading_once():
        digest = freezing.metrics_digest(ids)
        freezing.verdicts_digest(document, ids)
        features.metric_table(ids)
        features.rubric_table(config, ids[:5])
        release_data._paper_terms(ids[3:])
    assert _reads(without, "scoring_metricscore") == 3
    assert _reads(within, "scoring_metricscore") == 1
    assert _reads(without, "scoring_judgeverdict") == 2
    assert _reads(within, "scoring_judgeverdict") == 1
    assert digest == _metrics_digest_row_by_row(ids)
    with stored_columns.reading_once():  # a digest of other ids than those read: read again
        features.metric_table(ids)
        assert freezing.metrics_digest(ids[:4]) == _metrics_digest_row_by_row(ids[:4])
