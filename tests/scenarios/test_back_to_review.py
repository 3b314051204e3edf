"""Editing the content of an approved scenario sends it back to review (issue 11.5), by every
path that edits: the service, the edit page, the REST API and a re-import. The revision says
why; state-only and metadata changes keep it approved."""

import io
import json

import pytest
from django.urls import reverse

from scenarios import services
from scenarios.importers import import_file
from scenarios.models import Revision, Scenario
from tests.scenarios import factories


def approved(author, **fields):
    return factories.scenario(author, state=Scenario.State.APPROVED, **fields)


def edit(scenario, author, tags=None, **changes):
    scenario = Scenario.objects.get(pk=scenario.pk)
    before = services.snapshot(scenario)
    for name, value in changes.items():
        setattr(scenario, name, value)
    return services.update_scenario(scenario, author, before, tags)


@pytest.mark.parametrize(
    "changes",
    [
        {"user_message": "Something else entirely"},
        {"history": [{"role": "user", "content": "Earlier turn"}]},
        {"memory": [{"content": "Has a dog", "category": "pets", "importance": 2}]},
        {"schedule": [{"time": "10:00", "activity": "Dentist"}]},
        {"reference_response": "Another reference"},
        {"subtask": "dialogue_base"},
    ],
    ids=lambda changes: next(iter(changes)),
)
def test_a_content_edit_of_an_approved_scenario_goes_back_to_review(researcher, changes):
    scenario = approved(researcher)
    old_hash = scenario.content_hash
    revision = edit(scenario, researcher, **changes)
    scenario.refresh_from_db()
    assert scenario.state == Scenario.State.IN_REVIEW
    assert scenario.content_hash != old_hash
    assert revision.action == Revision.Action.EDITED
    assert revision.note == services.BACK_TO_REVIEW_NOTE
    assert revision.changes["state"] == ["approved", "in_review"]
    assert revision.snapshot["state"] == "in_review"


def test_metadata_and_state_changes_keep_it_approved(researcher):
    scenario = approved(researcher)
    revision = edit(scenario, researcher, tags=["new-tag"], risk_level="high", source="elsewhere")
    scenario.refresh_from_db()
    assert scenario.state == Scenario.State.APPROVED
    assert revision.note == "" and "state" not in revision.changes


def test_a_draft_edit_stays_a_draft(researcher):
    scenario = factories.scenario(researcher)
    edit(scenario, researcher, user_message="Reworded")
    scenario.refresh_from_db()
    assert scenario.state == Scenario.State.DRAFT


def test_the_edit_page_sends_it_back_and_says_so(researcher_client, researcher):
    scenario = approved(researcher, user_message="old words here")
    url = reverse("scenarios:edit", args=[scenario.pk])
    form = researcher_client.get(url).context["form"]
    data = {k: v for k, v in form.initial.items() if v is not None}
    for name in ("history", "memory", "schedule"):
        data[name] = json.dumps(data[name])
    data.update(user_message="new words here", tags_text="")
    data.pop("persona", None)
    page = researcher_client.post(url, data, follow=True).content.decode()
    scenario.refresh_from_db()
    assert scenario.state == Scenario.State.IN_REVIEW
    assert "back in review" in page
    assert scenario.revisions.first().note == services.BACK_TO_REVIEW_NOTE


def test_the_api_sends_it_back(researcher_client, researcher):
    scenario = approved(researcher)
    answer = researcher_client.patch(
        f"/api/scenarios/{scenario.pk}/",
        {"user_message": "Changed over the API"},
        content_type="application/json",
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "in_review"
    # Tags only: still approved.
    other = approved(researcher)
    answer = researcher_client.patch(
        f"/api/scenarios/{other.pk}/", {"tags": ["x"]}, content_type="application/json"
    )
    assert answer.json()["state"] == "approved"


def jsonl(*rows) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


ROW = {"external_id": "b1", "subtask": "dialogue_base", "user_message": "hi", "language": "en"}


@pytest.mark.django_db
def test_a_reimport_that_changes_an_approved_scenario_sends_it_back():
    import_file(io.BytesIO(jsonl(ROW, {**ROW, "external_id": "b2"})), "a.jsonl")
    Scenario.objects.update(state=Scenario.State.APPROVED)
    # The exported state ("approved") comes back with the changed row: still back to review.
    changed = {**ROW, "user_message": "hello there", "state": "approved"}
    tag_only = {**ROW, "external_id": "b2", "tags": ["x"], "state": "approved"}
    preview = import_file(io.BytesIO(jsonl(changed, tag_only)), "b.jsonl", dry_run=True)
    assert (preview.updated, preview.back_to_review) == (2, 1)
    report = import_file(io.BytesIO(jsonl(changed, tag_only)), "b.jsonl")
    assert report.back_to_review == 1
    first, second = Scenario.objects.get(external_id="b1"), Scenario.objects.get(external_id="b2")
    assert first.state == Scenario.State.IN_REVIEW
    assert second.state == Scenario.State.APPROVED
    note = first.revisions.first().note
    assert note.startswith("updated from b.jsonl line 1") and services.BACK_TO_REVIEW_NOTE in note


@pytest.mark.django_db
def test_last_content_change_ignores_creation_and_state_changes(researcher):
    scenario = approved(researcher)
    services.transition(scenario, researcher, "retire")
    assert services.last_content_change([scenario.pk]) == {}
    edit(scenario, researcher, user_message="Reworded")
    changed = services.last_content_change([scenario.pk])
    assert changed == {scenario.pk: scenario.revisions.first().created_at}
