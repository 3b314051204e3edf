import json
import re

import pytest
from django.urls import reverse

from scenarios.models import Scenario
from tests.scenarios import factories


@pytest.fixture
def bank(researcher):
    lin = factories.persona("Lin")
    made = [
        factories.scenario(researcher, tags=["work"], persona=lin),
        factories.scenario(
            researcher,
            subtask="itinerary_basic",
            language="zh",
            user_message="明天去杭州",
            tags=["travel"],
        ),
        factories.scenario(
            researcher,
            subtask="recollection_refine",
            implicit_need=True,
            user_message="I keep forgetting my sister's birthday",
        ),
        factories.scenario(researcher, risk_level="high", user_message="I can't go on like this"),
    ]
    return made


def test_list_filters_and_search(researcher_client, bank):
    url = reverse("scenarios:list")

    def ids(query):
        page = researcher_client.get(url, query).context["page"]
        return sorted(s.pk for s in page.object_list)

    assert ids({}) == sorted(s.pk for s in bank)
    assert ids({"dimension": "itinerary"}) == [bank[1].pk]
    assert ids({"subtask": ["recollection_refine", "itinerary_basic"]}) == [bank[1].pk, bank[2].pk]
    assert ids({"language": "zh"}) == [bank[1].pk]
    assert ids({"tags": "travel"}) == [bank[1].pk]
    assert ids({"flags": "implicit_need"}) == [bank[2].pk]
    assert ids({"flags": "risk"}) == [bank[3].pk]
    assert ids({"q": "杭州"}) == [bank[1].pk]
    assert ids({"q": "SISTER birthday"}) == [bank[2].pk]
    assert ids({"q": "sister hangzhou"}) == []
    assert ids({"state": "approved"}) == []


def test_list_partial_for_htmx_and_constant_query_count(
    researcher_client, researcher, django_assert_max_num_queries
):
    for i in range(60):
        factories.scenario(researcher, tags=[f"t{i % 3}", "bulk"], persona=factories.persona())
    url = reverse("scenarios:list")
    with django_assert_max_num_queries(10):
        response = researcher_client.get(url, {"tags": "bulk"})
    assert response.status_code == 200
    assert len(response.context["page"].object_list) == 50
    partial = researcher_client.get(
        url, {"page": 2}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="results"
    )
    assert b"<html" not in partial.content and b"page 2 of 2" in partial.content


def test_create_with_validation_messages(researcher_client):
    url = reverse("scenarios:create")
    bad = {
        "subtask": "dialogue_base",
        "language": "en",
        "risk_level": "none",
        "history": json.dumps([{"role": "robot", "content": "x"}]),
        "schedule": "not json",
        "memory": "[]",
    }
    response = researcher_client.post(url, bad)
    assert response.status_code == 200
    form = response.context["form"]
    assert "history[0].role" in form.errors["history"][0]
    assert "schedule" in form.errors
    assert Scenario.objects.count() == 0

    good = {**bad, "history": "[]", "schedule": "[]", "user_message": "Hello", "tags_text": "a, b"}
    response = researcher_client.post(url, good)
    scenario = Scenario.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/{scenario.pk}/")
    assert sorted(t.name for t in scenario.tags.all()) == ["a", "b"]
    assert scenario.revisions.get().action == "created"


def test_edit_records_revision_with_viewable_diff(researcher_client, researcher):
    scenario = factories.scenario(researcher, user_message="old words here")
    form = researcher_client.get(reverse("scenarios:edit", args=[scenario.pk])).context["form"]
    data = {k: v for k, v in form.initial.items() if v is not None}
    for name in ("history", "memory", "schedule"):
        data[name] = json.dumps(data[name])
    data.update(user_message="new words here", tags_text="")
    data.pop("persona", None)
    response = researcher_client.post(reverse("scenarios:edit", args=[scenario.pk]), data)
    assert response.status_code == 302
    revision = scenario.revisions.first()
    assert revision.number == 2 and revision.author == researcher
    assert revision.changes["user_message"] == ["old words here", "new words here"]

    diff = researcher_client.get(reverse("scenarios:revision", args=[scenario.pk, 2]))
    text = diff.content.decode()
    assert "-old words here" in text and "+new words here" in text
    history = researcher_client.get(reverse("scenarios:history", args=[scenario.pk]))
    assert "user_message" in history.content.decode()


def test_review_flow_approve_and_request_changes(researcher_client, researcher):
    scenario = factories.scenario(researcher)
    review = reverse("scenarios:review", args=[scenario.pk])
    researcher_client.post(review, {"action": "approve"})
    scenario.refresh_from_db()
    assert scenario.state == "draft"  # approve only applies in review

    researcher_client.post(review, {"action": "submit"})
    response = researcher_client.post(
        review, {"action": "request_changes", "comment": ""}, follow=True
    )
    assert "comment is required" in response.content.decode()
    researcher_client.post(review, {"action": "request_changes", "comment": "Make it warmer."})
    scenario.refresh_from_db()
    assert scenario.state == "draft" and scenario.reviewer == researcher
    assert scenario.comments.get().body == "Make it warmer."

    researcher_client.post(review, {"action": "submit"})
    researcher_client.post(review, {"action": "approve"})
    scenario.refresh_from_db()
    assert scenario.state == "approved"
    assert [r.action for r in scenario.revisions.order_by("number")] == ["created"] + ["state"] * 4


def test_bulk_state_change_on_selection_and_on_all_matching(researcher_client, researcher):
    made = [factories.scenario(researcher, language="en" if i % 2 else "zh") for i in range(6)]
    bulk = reverse("scenarios:bulk")
    researcher_client.post(bulk, {"action": "submit", "ids": [made[0].pk, made[1].pk]})
    assert Scenario.objects.filter(state="in_review").count() == 2

    response = researcher_client.post(
        bulk, {"action": "approve", "scope": "all", "query": "language=en"}, follow=True
    )
    approved = set(Scenario.objects.filter(state="approved").values_list("pk", flat=True))
    assert approved == {made[1].pk}
    page = response.content.decode()
    assert "Approve: 1 scenario changed." in page
    assert "Approve skipped 2 scenarios (Draft 2): it applies only to: In review." in page


def test_scenario_text_is_escaped_everywhere(researcher_client, researcher):
    payload = '<script>window.pwned=1</script><img src=x onerror="alert(1)">'
    scenario = factories.scenario(
        researcher,
        user_message=payload,
        reference_response=payload,
        history=[{"role": "user", "content": payload}],
        tags=[payload[:60]],
    )
    for url in (
        reverse("scenarios:list"),
        reverse("scenarios:detail", args=[scenario.pk]),
        reverse("scenarios:edit", args=[scenario.pk]),
        reverse("scenarios:history", args=[scenario.pk]),
        reverse("scenarios:revision", args=[scenario.pk, 1]),
    ):
        body = researcher_client.get(url).content.decode()
        assert "<script>window.pwned" not in body, url
        assert "<img src=x onerror" not in body, url


def test_export_then_import_into_empty_database_round_trips(researcher_client, bank):
    import io

    from scenarios import services
    from scenarios.importers import import_file

    for fmt in ("jsonl", "csv"):
        response = researcher_client.get(reverse("scenarios:export"), {"format": fmt})
        content = b"".join(response.streaming_content)
        before = {s.external_id: services.snapshot(s) for s in Scenario.objects.all()}
        Scenario.objects.all().delete()
        from scenarios.models import Persona

        Persona.objects.all().delete()
        report = import_file(io.BytesIO(content), f"export.{fmt}")
        assert report.created == len(bank), fmt
        after = {s.external_id: services.snapshot(s) for s in Scenario.objects.all()}
        assert after == before, fmt


def test_import_page_previews_then_writes(
    researcher_client, release_file, django_capture_on_commit_callbacks
):
    with release_file.open("rb") as handle, django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            reverse("scenarios:import"),
            {"file": handle, "format": "auto", "initial_state": "draft"},
        )
    response = researcher_client.get(response["Location"])
    page = response.content.decode()
    assert "Preview (nothing written yet)" in page
    assert Scenario.objects.count() == 0
    job = response.context["job"]
    assert job.result["created"] == 1882

    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(reverse("scenarios:import_confirm", args=[job.pk]))
    response = researcher_client.get(response["Location"])
    assert Scenario.objects.count() == 1882
    assert response.context["job"].result["written"] is True


def test_import_page_shows_errors_and_writes_nothing(
    researcher_client, tmp_path, django_capture_on_commit_callbacks
):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"subtask": "dialogue_base"}\n{"subtask": "nope"}\n', encoding="utf-8")
    with bad.open("rb") as handle, django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            reverse("scenarios:import"),
            {"file": handle, "format": "auto", "initial_state": "draft"},
        )
    page = researcher_client.get(response["Location"]).content.decode()
    assert "unknown subtask" in page and "<td>2</td>" in page
    assert "confirm-import" not in page
    assert Scenario.objects.count() == 0


def _preview(client, path, capture):
    with path.open("rb") as handle, capture(execute=True):
        response = client.post(
            reverse("scenarios:import"),
            {"file": handle, "format": "auto", "initial_state": "draft"},
        )
    return client.get(response["Location"])


def test_a_preview_with_errors_says_so_and_lists_every_error(
    researcher_client, tmp_path, django_capture_on_commit_callbacks
):
    good = {"subtask": "dialogue_base", "user_message": "hi"}
    rows = [
        good,
        {**good, "language": "klingon", "risk_level": "extreme", "tags": 7},  # 3 errors
        {**good, "implicit_need": "maybe", "state": "gone"},  # 2 errors
    ]
    upload = tmp_path / "three.jsonl"
    upload.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    response = _preview(researcher_client, upload, django_capture_on_commit_callbacks)
    page = response.content.decode()
    heading = re.search(r'<h1 id="job-heading">(.*?)</h1>', page).group(1)
    assert heading == "Preview: 3 rows, 5 errors — nothing was imported"
    badge = re.search(
        r'<strong class="state state-preview-errors" id="job-badge">(.*?)</strong>', page
    )
    assert badge.group(1) == "Preview · 5 errors"
    assert "Failed" not in page and "scenario_import" not in page
    cells = re.findall(r"<tr><td>(\d+)</td><td><code>([^<]+)</code></td>", page)
    assert cells == [
        ("2", "language"),
        ("2", "risk_level"),
        ("2", "tags"),
        ("3", "implicit_need"),
        ("3", "state"),
    ]
    assert 'id="count-errors">5<' in page and "confirm-import" not in page
    assert Scenario.objects.count() == 0


def test_a_long_error_list_shows_200_and_says_how_many_more(
    researcher_client, tmp_path, django_capture_on_commit_callbacks
):
    upload = tmp_path / "many.jsonl"
    upload.write_text('{"subtask": "nope"}\n' * 250, encoding="utf-8")
    page = _preview(researcher_client, upload, django_capture_on_commit_callbacks)
    text = page.content.decode()
    assert "Preview: 250 rows, 250 errors — nothing was imported" in text
    assert len(re.findall(r"<tr><td>\d+</td><td><code>subtask</code>", text)) == 200
    assert "… and 50 more errors (250 in all" in text


def test_oversized_upload_is_refused_with_a_message(researcher_client, settings, tmp_path):
    settings.MAX_UPLOAD_BYTES = 10
    big = tmp_path / "big.jsonl"
    big.write_text('{"subtask": "dialogue_base"}\n', encoding="utf-8")
    with big.open("rb") as handle:
        response = researcher_client.post(
            reverse("scenarios:import"),
            {"file": handle, "format": "auto", "initial_state": "draft"},
        )
    assert response.status_code == 200
    assert "the limit is 10" in response.content.decode()
