"""Hugging Face dataset exports (scoring.hfexport): the folder loads with `datasets` without
code, every judgment comes back, the preference pairs follow the votes, no companion is named
unless asked, the card's α equals the agreement page's, releases export too, and only the
campaign's researchers and admins may download."""

import io
import random
import re
import zipfile
from collections import defaultdict
from pathlib import Path

import datasets  # a test dependency (pyproject: dev)
import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation import exclusions, queue
from annotation.models import Judgment
from annotation.study.models import Participant, StudyLink
from scoring.hfexport import export
from scoring.hfexport.pairs import outcome
from scoring.models import Release
from scoring.releases import service as releases
from tests.annotation import factories
from tests.conftest import make_user

REASONS = [{"key": "more_empathetic", "label": "more empathetic"}]


@pytest.fixture
def rated(researcher, django_user_model):
    """4 raters on 6 scenarios × 3 companions (k = 3) with ties, "both unacceptable",
    reasons, confidence and ratings; one rater excluded; a response that names its companion."""
    raters = factories.annotators(django_user_model, 4, prefix="hfrater")
    campaign = factories.campaign(
        researcher,
        raters,
        n_scenarios=6,
        overlap=3,
        reason_choices=REASONS,
        ask_confidence=True,
    )
    first = campaign.comparisons.order_by("pk").first()
    first.response_a.text = f"Hi, I am {first.response_a.companion.name}, here for you."
    first.response_a.save(update_fields=["text"])
    rng = random.Random(3)
    active = list(raters)
    while active:
        for rater in list(active):
            item = queue.next_assignment(rater, campaign)
            if item is None:
                active.remove(rater)
                continue
            roll = rng.random()
            if roll < 0.1:
                submission = queue.Submission(None, both_unacceptable=True)
            else:
                choice = 0 if roll < 0.25 else rng.choice([-2, -1, 1, 2])
                submission = queue.Submission(
                    choice,
                    reasons=["more_empathetic"] if choice and rng.random() < 0.5 else None,
                    confidence=rng.choice([1, 2, 3]),
                    ratings={"left": {"empathy": rng.randint(1, 5)}},
                    rationale="felt warmer",
                )
            queue.submit(rater, item.key, submission)
    exclusions.exclude(campaign, [raters[3]], "rushed through the items", by=researcher)
    return campaign


def load(folder, config=None, tmp=None):
    cache = Path(tmp or folder).parent / "hf-cache"
    return datasets.load_dataset(str(folder), config, cache_dir=str(cache))


def names_of(campaign) -> list[str]:
    companions = list(campaign.companions.all())
    return (
        [c.name for c in companions]
        + [c.model_id for c in companions if c.model_id]
        + [run.name for run in campaign.runs.all()]
    )


def test_campaign_folder_loads_and_every_judgment_comes_back(rated, tmp_path):
    folder = tmp_path / "campaign"
    facts = export.export_campaign(rated, folder)
    loaded = load(folder)
    assert list(loaded) == ["train"]
    table = loaded["train"]
    stored = {j.pk: j for j in Judgment.objects.filter(comparison__campaign=rated)}
    assert len(table) == len(stored) == facts["judgments"] > 0
    assert sorted(table["judgment_id"]) == sorted(stored)
    excluded_ids = set(exclusions.excluded_annotator_ids(rated))
    usernames = {j.annotator.username for j in stored.values()}
    seen = defaultdict(set)
    for row in table:
        judgment = stored[row["judgment_id"]]
        assert row["preference"] == judgment.preference
        assert row["both_unacceptable"] == judgment.both_unacceptable
        assert row["reasons"] == judgment.reasons
        assert row["confidence"] == judgment.confidence
        assert row["ratings"]["a"]["empathy"] == (judgment.ratings.get("a") or {}).get("empathy")
        assert row["shown_left"] == ("a" if judgment.assignment.left_is_a else "b")
        assert row["scenario"]["id"] == judgment.comparison.scenario_id
        assert row["scenario_revision"] == judgment.scenario_revision
        assert row["excluded"] == (judgment.annotator_id in excluded_ids)
        assert row["exclusion_reason"] == ("rushed through the items" if row["excluded"] else "")
        assert row["prompt"][-1]["role"] == "user" and row["prompt"][0]["role"] == "system"
        assert row["annotator"] not in usernames and row["annotator"].startswith("annotator-")
        seen[judgment.annotator_id].add(row["annotator"])
    assert all(len(p) == 1 for p in seen.values())  # one pseudonym per annotator
    assert len({next(iter(p)) for p in seen.values()}) == len(seen)
    assert any(row["both_unacceptable"] for row in table)
    assert any(row["preference"] == 0 and not row["both_unacceptable"] for row in table)
    assert any(row["reasons"] for row in table)


def test_preference_pairs_follow_the_counted_votes(rated, tmp_path):
    folder = tmp_path / "campaign"
    facts = export.export_campaign(rated, folder)
    pairs = load(folder, "preference_pairs")["train"]
    excluded_ids = set(exclusions.excluded_annotator_ids(rated))
    votes = defaultdict(list)
    for j in Judgment.objects.filter(comparison__campaign=rated).exclude(
        annotator_id__in=excluded_ids
    ):
        votes[j.comparison_id].append((j.preference, j.both_unacceptable))
    expected_left_out = defaultdict(int)
    for comparison_votes in votes.values():
        reason = outcome(comparison_votes)
        if reason:
            expected_left_out[reason] += 1
    assert len(pairs) == len(votes) - sum(expected_left_out.values()) == facts["pairs"]
    assert facts["ties"] == expected_left_out["tie"]
    assert facts["both_unacceptable"] == expected_left_out["both_unacceptable"]
    assert facts["ties"] + facts["both_unacceptable"] > 0  # the fixture has both kinds
    for pair in pairs:
        comparison_votes = votes[pair["comparison_id"]]
        mean = sum(p for p, _ in comparison_votes) / len(comparison_votes)
        assert mean != 0
        assert pair["chosen_response"] == ("b" if mean > 0 else "a")
        assert pair["margin"] == pytest.approx(abs(mean))
        assert pair["n_votes"] == len(comparison_votes)
        toward = [p if mean > 0 else -p for p, _ in comparison_votes]
        assert sorted(pair["votes"]) == sorted(toward)
        assert pair["agreement"] == pytest.approx(sum(v > 0 for v in toward) / len(toward))
        assert pair["chosen"][0]["role"] == "assistant"
        assert pair["chosen"][0]["content"] != pair["rejected"][0]["content"]
        assert pair["prompt"][0]["role"] == "system"


def test_no_companion_is_named_unless_asked(rated, tmp_path):
    plain, named = tmp_path / "plain", tmp_path / "named"
    export.export_campaign(rated, plain)
    export.export_campaign(rated, named, include_companions=True)
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(plain.iterdir())).lower()
    for name in names_of(rated):
        assert name.lower() not in text, name
    for user in rated.annotators.all():
        assert f'"{user.username}"' not in text
    assert "[name hidden]" in text  # the response that names its companion
    assert "companion_a" not in text and "chosen_companion" not in text
    loaded = load(named)["train"]
    companion_names = {c.name for c in rated.companions.all()}
    assert set(loaded["companion_a"]) | set(loaded["companion_b"]) == companion_names
    pairs = load(named, "preference_pairs")["train"]
    assert set(pairs["chosen_companion"]) <= companion_names


def test_card_states_the_collection_and_the_agreement_page_figures(rated, tmp_path, client):
    folder = tmp_path / "campaign"
    export.export_campaign(rated, folder)
    card = (folder / "README.md").read_text(encoding="utf-8")
    header = card.split("---\n")[1]
    for line in ("license: other", "size_categories:", "task_categories:", "- dpo"):
        assert line in header
    languages = sorted({j.comparison.scenario.language for j in Judgment.objects.all()})
    assert "language:\n" + "".join(f"- {code}\n" for code in languages) in header
    assert "config_name: preference_pairs" in header and "path: judgments.jsonl" in header
    assert f"k = {rated.overlap}" in card
    at_k = rated.comparisons.filter(is_gold=False, judgment_count__gte=rated.overlap).count()
    total = rated.comparisons.filter(is_gold=False).count()
    assert f"({at_k} of {total} comparisons had reached k when this was exported)" in card
    assert "- expert-generated" in header  # nobody joined through a study link
    assert "rushed through the items" in card
    assert "Qualification**: not required" in card

    client.force_login(rated.owner)
    page = client.get(reverse("scoring:agreement", args=[rated.pk])).content.decode()
    overall = page.split("Overall", 1)[1].split("<h2>", 1)[0]
    on_page = re.findall(
        r"<strong>(-?[\d.]+)</strong></td>\s*<td>\[(-?[\d.]+), (-?[\d.]+)\]", overall
    )
    in_card = re.findall(r"\| (-?[\d.]+) \| \[(-?[\d.]+), (-?[\d.]+)\] \|", card)
    assert len(in_card) >= 2  # 5-point and A / tie / B (and the 4-way outcome)
    assert set(in_card) <= set(on_page)


def test_a_release_exports_its_frozen_judgments(rated, tmp_path, researcher):
    release = releases.create_release(
        name="hf release",
        campaign=rated,
        anchor=rated.companions.order_by("pk").first(),
        user=researcher,
        n_boot=50,
    )
    release.refresh_from_db()
    assert release.inputs, release.message
    folder = tmp_path / "release"
    call_command("export_hf", str(release.pk), str(folder), "--release", verbosity=0)
    table = load(folder)["train"]
    assert sorted(table["judgment_id"]) == sorted(release.inputs["judgments"]["id"])
    assert not any(table["excluded"])  # the release froze only counted judgments
    assert len(load(folder, "preference_pairs")["train"]) > 0
    assert "hf release" in (folder / "README.md").read_text(encoding="utf-8")


def test_command_writes_a_campaign_folder(rated, tmp_path):
    folder = tmp_path / "cmd"
    call_command("export_hf", str(rated.pk), str(folder), verbosity=0)
    assert len(load(folder)["train"]) == Judgment.objects.filter(comparison__campaign=rated).count()


def _zip_names(response) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        return {name: archive.read(name).decode() for name in archive.namelist()}


def test_downloads_page_and_api_with_and_without_companions(rated, client, tmp_path):
    client.force_login(rated.owner)
    page = client.get(reverse("campaigns:detail", args=[rated.pk])).content.decode()
    assert reverse("hfexport:campaign", args=[rated.pk]) in page
    plain = client.get(reverse("hfexport:campaign", args=[rated.pk]))
    assert plain.status_code == 200 and plain["Content-Type"] == "application/zip"
    files = _zip_names(plain)
    stem = f"campaign-{rated.pk}-hf-dataset"
    assert set(files) == {
        f"{stem}/README.md",
        f"{stem}/judgments.jsonl",
        f"{stem}/preference_pairs.jsonl",
    }
    names = [c.name for c in rated.companions.all()]
    assert not any(name in text for name in names for text in files.values())
    named = client.get(reverse("campaign-hf-dataset", args=[rated.pk]) + "?companions=true")
    assert named.status_code == 200
    assert all(name in _zip_names(named)[f"{stem}/judgments.jsonl"] for name in names)
    with zipfile.ZipFile(io.BytesIO(plain.content)) as archive:
        archive.extractall(tmp_path)
    assert (
        len(load(tmp_path / stem)["train"])
        == Judgment.objects.filter(comparison__campaign=rated).count()
    )


def test_only_the_campaigns_researchers_and_admins_download(
    rated, client, django_user_model, admin_user
):
    urls = [
        reverse("hfexport:campaign", args=[rated.pk]),
        reverse("campaign-hf-dataset", args=[rated.pk]),
    ]
    rater = rated.annotators.first()
    stranger = make_user(django_user_model, "hfstranger", "researcher")
    for user, status in ((rater, 403), (stranger, 404), (admin_user, 200)):
        client.force_login(user)
        for url in urls:
            assert client.get(url).status_code == status, (user.username, url)


def test_an_unfrozen_release_is_refused(rated, client, researcher):
    release = Release.objects.create(
        name="not frozen", campaign=rated, anchor=rated.companions.first(), created_by=researcher
    )
    client.force_login(researcher)
    assert client.get(reverse("release-hf-dataset", args=[release.pk])).status_code == 409
    page = client.get(reverse("hfexport:release", args=[release.pk]))
    assert page.status_code == 302


def test_a_study_with_crowd_participants_is_marked_crowdsourced(rated, tmp_path, django_user_model):
    link = StudyLink.objects.create(campaign=rated)
    worker = django_user_model.objects.create_user("p-crowd-1")
    Participant.objects.create(link=link, campaign=rated, user=worker, participant_id="PID-1")
    export.export_campaign(rated, tmp_path / "crowd")
    header = (tmp_path / "crowd" / "README.md").read_text(encoding="utf-8").split("---\n")[1]
    assert "annotations_creators:\n- crowdsourced\n" in header
