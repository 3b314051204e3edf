"""Issue 23 point 3: bulk review actions say what each state allows, a change of nothing is a
warning that says why and what works, and an admin may approve drafts with the review skipped
(recorded in each revision)."""

from django.contrib.messages import constants
from django.urls import reverse

from scenarios.models import Scenario
from tests.scenarios import factories


def bulk(client, action, **fields):
    response = client.post(
        reverse("scenarios:bulk"),
        {"action": action, "scope": "all", "query": "", **fields},
        follow=True,
    )
    return [(m.level, m.message) for m in response.context["messages"]]


def test_approving_drafts_changes_nothing_and_says_why_in_a_warning(researcher_client, researcher):
    made = [factories.scenario(researcher) for _ in range(4)]
    said = bulk(researcher_client, "approve")
    assert Scenario.objects.filter(state="draft").count() == len(made)
    assert [level for level, _ in said] == [constants.WARNING]
    text = said[0][1]
    assert text.startswith("Nothing changed. Approve skipped 4 scenarios (Draft 4)")
    assert "it applies only to: In review." in text
    assert "choose “Submit for review” first, then “Approve”" in text
    assert "skipping review" not in text  # a researcher is not offered the admin's shortcut


def test_submit_then_approve_is_the_path_that_works(researcher_client, researcher):
    [factories.scenario(researcher) for _ in range(3)]
    assert bulk(researcher_client, "submit") == [
        (constants.SUCCESS, "Submit for review: 3 scenarios changed.")
    ]
    assert bulk(researcher_client, "approve") == [
        (constants.SUCCESS, "Approve: 3 scenarios changed.")
    ]
    assert Scenario.objects.filter(state="approved").count() == 3


def test_an_admin_approves_drafts_with_the_review_skipped_and_recorded(
    client, admin_user, researcher
):
    drafts = [factories.scenario(researcher) for _ in range(2)]
    in_review = factories.scenario(researcher, state="in_review")
    retired = factories.scenario(researcher, state="retired")
    client.force_login(admin_user)
    page = client.get(reverse("scenarios:list")).content.decode()
    assert 'value="approve_skipping_review"' in page
    said = bulk(client, "approve_skipping_review")
    assert said[0] == (constants.SUCCESS, "Approve, skipping review (admin): 3 scenarios changed.")
    assert said[1][0] == constants.WARNING and "(Retired 1)" in said[1][1]
    for scenario in [*drafts, in_review]:
        scenario.refresh_from_db()
        assert scenario.state == "approved" and scenario.reviewer == admin_user
        note = scenario.revisions.order_by("-number").first().note
        assert note.startswith("approved with the review skipped (admin) by admin1, from ")
    assert drafts[0].revisions.order_by("-number").first().note.endswith("from draft: ")
    retired.refresh_from_db()
    assert retired.state == "retired"


def test_a_researcher_cannot_skip_review(researcher_client, researcher):
    draft = factories.scenario(researcher)
    page = researcher_client.get(reverse("scenarios:list")).content.decode()
    assert "approve_skipping_review" not in page
    said = bulk(researcher_client, "approve_skipping_review")
    assert said == [(constants.ERROR, "Choose an action.")]
    review = reverse("scenarios:review", args=[draft.pk])
    researcher_client.post(review, {"action": "approve_skipping_review"})
    draft.refresh_from_db()
    assert draft.state == "draft"


def test_the_list_says_what_each_action_allows(researcher_client, researcher):
    factories.scenario(researcher)
    page = researcher_client.get(reverse("scenarios:list")).content.decode()
    assert "draft → in review → approved; only approved scenarios are rated" in page
    assert "Drafts must be submitted for review first." in page


def test_request_changes_in_bulk_needs_a_comment(researcher_client, researcher):
    factories.scenario(researcher, state="in_review")
    said = bulk(researcher_client, "request_changes")
    assert said == [(constants.ERROR, "Request changes needs a comment: say what should change.")]
    assert Scenario.objects.get().state == "in_review"
