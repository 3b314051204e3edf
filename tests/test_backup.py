"""dump_study / restore_study: a whole study restores into an empty database, equal in every
count and in the content that numbers rest on."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Judgment
from h2htalk import backup
from scenarios.models import Response, Scenario
from scoring.models import Release
from scoring.releases import service as releases
from scoring.releases import verifying
from tests.conftest import as_in_a_test

pytestmark = pytest.mark.django_db(transaction=True)


def content() -> dict:
    return {
        "scenarios": sorted(Scenario.objects.values_list("pk", "content_hash", "state")),
        "responses": sorted(
            Response.objects.values_list("pk", "scenario_id", "companion_id", "text")
        ),
        "judgments": sorted(
            Judgment.objects.values_list("pk", "comparison_id", "annotator__username", "preference")
        ),
        "tags": sorted(Scenario.tags.through.objects.values_list("scenario_id", "tag__name")),
        "releases": sorted(Release.objects.values_list("pk", "fingerprint", "result__data_sha256")),
    }


@pytest.fixture(scope="module")
def demo_dump(django_db_setup, django_db_blocker, tmp_path_factory):
    """The demo study (`load_demo`) dumped once for the module: the dump's path, and the counts
    and content of the database it came from, emptied again (`flush`: an empty, migrated
    database) before the tests."""
    folder = tmp_path_factory.mktemp("backup")
    path = folder / "study.jsonl"
    with as_in_a_test(django_db_blocker, folder / "media"):
        call_command("load_demo", stdout=io.StringIO())
        try:
            before = backup.counts(), content()
            call_command("dump_study", output=str(path), stderr=io.StringIO())
        finally:
            call_command("flush", interactive=False, verbosity=0)
    return path, *before


def test_dump_restore_round_trip_keeps_counts_and_content(demo_dump):
    path, before_counts, before_content = demo_dump
    assert before_counts["annotation.Judgment"] == 243
    assert before_content["releases"][0][1]  # the demo release, frozen and computed
    assert backup.counts()["scenarios.Scenario"] == 0

    out = io.StringIO()
    call_command("restore_study", str(path), stdout=out)
    assert backup.counts() == before_counts
    assert content() == before_content
    assert "243 annotation.Judgment" in out.getvalue()

    # Every release still matches its inputs in the restored database, and its numbers
    # recompute bit for bit from them.
    release = Release.objects.get()
    assert release.fingerprint and verifying.verify(release) == []
    outcome = releases.check(release)
    assert outcome.ok, outcome.message

    # New rows after a restore get fresh ids (sequences were reset), not clashes.
    scenario = Scenario.objects.first()
    scenario.pk = None
    scenario.external_id = "after-restore"
    scenario.save()


def test_restore_refuses_a_database_that_is_not_empty(demo_dump):
    path = demo_dump[0]
    call_command("restore_study", str(path), stdout=io.StringIO())  # the study is there now
    study = backup.counts()
    with pytest.raises(CommandError, match="needs an empty study database"):
        call_command("restore_study", str(path))
    assert backup.counts() == study


def test_a_broken_dump_writes_nothing(demo_dump, tmp_path):
    lines = demo_dump[0].read_text(encoding="utf-8").splitlines()
    lines[len(lines) // 2] = '{"model": "scenarios.scenario", "pk": 1, "fields": {"subtask": '
    path = tmp_path / "study.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert backup.counts()["scenarios.Scenario"] == 0
    with pytest.raises(Exception):  # noqa: B017 - loaddata's own error names the line
        call_command("restore_study", str(path))
    assert sum(backup.counts().values()) == 0
