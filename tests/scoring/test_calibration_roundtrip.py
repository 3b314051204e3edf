"""Export → import of calibrated judges (commands, page, API) scores new responses identically."""

import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from scipy.special import expit

from scenarios.models import GenerationRun, Response
from scoring.calibration.document import export_json
from scoring.calibration.fitting import fit
from scoring.calibration.prediction import response_features, score, score_pairs
from scoring.metrics import features
from scoring.models import CalibratedJudge, JudgeVerdict, MetricScore
from tests.annotation import factories as campaign_factories
from tests.scenarios import factories
from tests.scoring import test_calibration_support as support


@pytest.fixture(autouse=True)
def code_version(monkeypatch):
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "test-version")


@pytest.fixture
def fitted(researcher, roles, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 3)
    campaign, judge = support.rated_campaign(researcher, raters, n_scenarios=20, seed=21)
    return campaign, judge, fit(campaign, judge=judge, user=researcher, name="rt")


def new_pairs(campaign, judge, n_scenarios=4):
    """Responses made after the fit (new scenarios), with metrics and rubric verdicts."""
    rng = np.random.default_rng(99)
    run = GenerationRun.objects.create(name="after the fit", kind="import")
    scenarios = [factories.scenario(None, state="approved") for _ in range(n_scenarios)]
    made = support.add_responses(
        run, scenarios, list(campaign.companions.order_by("pk")), rng, judge.runs.first()
    )
    by_scenario = {}
    for response in made:
        by_scenario.setdefault(response.scenario_id, []).append(response.pk)
    return [(a, b) for ids in by_scenario.values() for a in ids for b in ids if a < b]


def by_hand(document, pairs, sides):
    """The README formula, evaluated independently of scoring.calibration.services."""
    out = []
    for i in range(len(pairs)):
        z = document["intercept"]
        for k, name in enumerate(document["features"]):
            delta = sides.a.loc[i, name] - sides.b.loc[i, name]
            delta = 0.0 if np.isnan(delta) else delta
            z += (
                document["weights"][k]
                * (delta - document["scaling"]["mean"][k])
                / (document["scaling"]["scale"][k])
            )
        out.append(expit(z))
    return np.array(out)


def test_export_import_round_trip_scores_new_responses_identically(fitted, tmp_path):
    campaign, judge, original = fitted
    path = tmp_path / "judge.json"
    call_command("export_judge_weights", "rt", "--output", str(path), stderr=io.StringIO())
    exported = json.loads(path.read_text(encoding="utf-8"))
    assert exported == original.document
    out = io.StringIO()
    call_command("import_judge_weights", str(path), "--name", "rt copy", stdout=out)
    copy = CalibratedJudge.objects.get(name="rt copy")
    assert "imported rt copy v1" in out.getvalue()
    assert copy.document["imported_from"] == {"name": "rt", "version": 1}

    pairs = new_pairs(campaign, judge)
    assert len(pairs) == 12
    p_original, sides = score_pairs(original.document, pairs)
    p_copy, _ = score_pairs(copy.document, pairs)
    p_file, _ = score_pairs(exported, pairs)
    assert not np.isnan(p_original).any()
    assert np.max(np.abs(p_original - p_copy)) <= 1e-12
    assert np.max(np.abs(p_original - p_file)) <= 1e-12
    assert np.max(np.abs(p_original - by_hand(exported, pairs, sides))) <= 1e-12
    # One pair at a time through score() with plain dicts: the same numbers.
    for i, _ in enumerate(pairs):
        one = score(copy.document, sides.a.loc[i].to_dict(), sides.b.loc[i].to_dict())
        assert abs(one - p_original[i]) <= 1e-12
    # Antisymmetric: B over A is 1 − p.
    flipped, _ = score_pairs(copy.document, [(b, a) for a, b in pairs])
    assert np.max(np.abs(flipped + p_original - 1)) <= 1e-12


def test_the_fitted_model_and_its_document_agree(fitted):
    """The document reproduces the in-memory model's predictions on the training table."""
    campaign, judge, stored = fitted
    table = features.comparison_table(campaign, judge, stored.document["features"])
    pairs = list(zip(table.frame["response_a"], table.frame["response_b"], strict=True))
    from h2htalk.stats.calibration.data import design_matrix, votes_of
    from h2htalk.stats.calibration.model import fit_model

    X = design_matrix(table.frame, table.features)
    model, _ = fit_model(
        X, votes_of(table.frame), table.frame["scenario"].to_numpy(), table.features
    )
    p, _ = score_pairs(stored.document, pairs)
    assert np.max(np.abs(p - model.predict(X))) <= 1e-12


def test_importing_the_same_document_again_changes_nothing(fitted, tmp_path):
    _, _, original = fitted
    path = tmp_path / "judge.json"
    path.write_text(export_json(original), encoding="utf-8")
    out = io.StringIO()
    call_command("import_judge_weights", str(path), stdout=out)
    assert "already here with the same document" in out.getvalue()
    assert CalibratedJudge.objects.count() == 1
    changed = dict(original.document, weights=[w + 1 for w in original.document["weights"]])
    path.write_text(json.dumps(changed), encoding="utf-8")
    with pytest.raises(CommandError, match="already exists with different weights"):
        call_command("import_judge_weights", str(path), stdout=io.StringIO())


def test_import_into_an_empty_database_keeps_name_and_version(fitted, tmp_path):
    _, _, original = fitted
    text = export_json(original)
    pairs = list(Response.objects.order_by("pk").values_list("pk", flat=True)[:2])
    before, _ = score_pairs(original.document, [tuple(pairs)])
    CalibratedJudge.objects.all().delete()
    path = tmp_path / "judge.json"
    path.write_text(text, encoding="utf-8")
    call_command("import_judge_weights", str(path), stdout=io.StringIO())
    loaded = CalibratedJudge.objects.get()
    assert (loaded.name, loaded.version, loaded.campaign) == ("rt", 1, None)
    after, _ = score_pairs(loaded.document, [tuple(pairs)])
    assert after[0] == before[0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": "other/1"}, "schema must be"),
        ({"features": ["rouge1", "nope"]}, "unknown feature"),
        ({"weights": [1.0]}, "weights must be a list of"),
        (
            {"scaling": {"mean": [0.0], "scale": [0.0]}, "features": ["rouge1"], "weights": [1.0]},
            "scale must be positive",
        ),
        ({"intercept": "x"}, "intercept"),
        (
            {
                "judge": None,
                "features": ["judge_empathy"],
                "weights": [1.0],
                "scaling": {"mean": [0.0], "scale": [1.0]},
            },
            "do(es) not fit the judge",
        ),
        ({"version": 0}, "version must be a positive integer"),
    ],
)
def test_invalid_documents_are_refused(researcher, tmp_path, change, message):
    original = support.stored_judge(None, researcher)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**original.document, **change}), encoding="utf-8")
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("import_judge_weights", str(path), "--name", "x", stdout=io.StringIO())
    assert CalibratedJudge.objects.count() == 1


def test_export_by_id_name_and_version(fitted, researcher):
    _, _, original = fitted
    second = support.stored_judge(None, researcher, name="rt")
    out = io.StringIO()
    call_command("export_judge_weights", "rt", stdout=out)
    assert json.loads(out.getvalue())["version"] == second.version == 2
    out = io.StringIO()
    call_command("export_judge_weights", "rt", "--judge-version", "1", stdout=out)
    assert json.loads(out.getvalue()) == original.document
    out = io.StringIO()
    call_command("export_judge_weights", str(original.pk), stdout=out)
    assert json.loads(out.getvalue())["version"] == 1
    with pytest.raises(CommandError):
        call_command("export_judge_weights", "missing", stdout=io.StringIO())


def test_download_page_api_and_page_import(fitted, researcher_client):
    _, _, original = fitted
    response = researcher_client.get(reverse("calibration:download", args=[original.pk]))
    assert response["Content-Type"] == "application/json"
    assert 'filename="calibrated-judge-rt-v1.json"' in response["Content-Disposition"]
    assert json.loads(response.content) == original.document
    api = researcher_client.get(reverse("calibration-judge-detail", args=[original.pk]))
    assert api.json() == original.document
    upload = io.BytesIO(response.content)
    upload.name = "judge.json"
    page = researcher_client.post(
        reverse("calibration:import"), {"document": upload, "name": "from page"}
    )
    copy = CalibratedJudge.objects.get(name="from page")
    assert page.status_code == 302 and page["Location"] == reverse(
        "calibration:detail", args=[copy.pk]
    )
    assert copy.document["weights"] == original.document["weights"]
    bad = io.BytesIO(b"{not json")
    bad.name = "bad.json"
    page = researcher_client.post(reverse("calibration:import"), {"document": bad})
    assert page.status_code == 200 and "Not JSON" in str(page.context["form"].errors)


def test_a_minimal_hand_written_document_imports_scores_and_renders(researcher_client, tmp_path):
    document = {
        "schema": "h2htalk.calibrated-judge/1",
        "name": "hand made",
        "version": 3,
        "features": ["rouge1", "log_length"],
        "scaling": {"mean": [0.0, 0.0], "scale": [0.1, 0.5]},
        "weights": [1.0, -0.5],
        "intercept": 0.25,
        "judge": None,
    }
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    call_command("import_judge_weights", str(path), stdout=io.StringIO())
    stored = CalibratedJudge.objects.get(name="hand made", version=3)
    p = score(
        stored.document, {"rouge1": 0.5, "log_length": 4.0}, {"rouge1": 0.3, "log_length": None}
    )
    assert p == pytest.approx(expit(0.25 + 1.0 * 0.2 / 0.1))
    page = researcher_client.get(reverse("calibration:detail", args=[stored.pk]))
    assert page.status_code == 200 and "No held-out numbers" in page.content.decode()
    assert researcher_client.get(reverse("calibration:list")).status_code == 200
    api = researcher_client.get(reverse("calibration-judge-list")).json()
    assert api[0]["verdict"] == "" and api[0]["heldout"] == {}


def test_scoring_from_features_read_once_equals_score_pairs(fitted):
    """Releases score every pair from each response's features read once
    (prediction.response_features): the numbers of score_pairs bit for bit, NaN where a side
    has no metrics or no verdict, for a judge with rubric features and a metrics-only one."""
    campaign, judge, original = fitted
    pairs = new_pairs(campaign, judge)
    no_metrics, no_verdict = pairs[0][0], pairs[-1][1]
    MetricScore.objects.filter(response_id=no_metrics).delete()
    JudgeVerdict.objects.filter(response_id=no_verdict).delete()
    metrics_only = {
        **original.document,
        "features": ["rouge1", "log_length"],
        "scaling": {"mean": [0.0, 0.0], "scale": [0.1, 0.5]},
        "weights": [1.5, -0.4],
        "judge": None,
    }
    assert any(f.startswith("judge_") for f in original.document["features"])
    ids = sorted({r for pair in pairs for r in pair})
    for document, missing in (
        (original.document, {no_metrics, no_verdict}),
        (metrics_only, {no_metrics}),
    ):
        read_once = response_features(document, ids)
        got = read_once.score(document, [a for a, _ in pairs], [b for _, b in pairs])
        expected, _ = score_pairs(document, pairs)
        assert got.tobytes() == expected.tobytes()  # NaN where expected, same bits elsewhere
        assert np.isnan(got).sum() == sum(bool(missing & set(pair)) for pair in pairs) > 0
    with pytest.raises(ValueError, match="not read"):
        read_once.score(metrics_only, [max(ids) + 1], [ids[0]])
