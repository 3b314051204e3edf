"""Care for raters (annotation.care): content notes, "I'd rather not", opt-outs, the daily cap on
high-risk items, the support text, exposure per rater and the short-of-raters warning, through
the queue, the rating API and the pages."""

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation import campaigns, care, queue
from annotation.models import AnnotatorTally, Assignment, Campaign, Comparison, RaterCare
from scenarios.models import Scenario
from tests.annotation import factories
from tests.annotation.test_rating_api import next_url, post, skip_url, submit_url, token_client

CARE_URL = "/api/rate/care/"


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


def with_levels(campaign, levels) -> dict[str, set[int]]:
    """Give the campaign's scenarios these risk levels in turn; the comparison ids by level."""
    scenarios = sorted({c.scenario_id for c in campaign.comparisons.all()})
    for scenario_id, level in zip(scenarios, levels, strict=True):
        Scenario.objects.filter(pk=scenario_id).update(risk_level=level)
    by_level: dict[str, set[int]] = {}
    for pk, level in campaign.comparisons.values_list("pk", "scenario__risk_level"):
        by_level.setdefault(level, set()).add(pk)
    return by_level


@pytest.fixture
def campaign(researcher, raters):
    made = factories.campaign(researcher, raters, n_scenarios=4, overlap=2)  # 12 comparisons
    made.by_level = with_levels(made, ["none", "low", "medium", "high"])
    return made


def drain(user, campaign, answer="submit") -> list[Assignment]:
    """Everything the queue hands the user, answered one by one."""
    handed = []
    while (item := queue.next_assignment(user, Campaign.objects.get(pk=campaign.pk))) is not None:
        handed.append(item)
        if answer == "submit":
            queue.submit(user, item.key, queue.Submission(screen_preference=1))
        else:
            queue.skip(user, item.key, "other")
        assert len(handed) < 100
    return handed


def level_of(item: Assignment) -> str:
    return Comparison.objects.get(pk=item.comparison_id).scenario.risk_level


# ---------------------------------------------------------------- content note and "I'd rather not"


def test_the_api_item_carries_the_content_note_only_for_risk_levels(campaign, raters):
    api = token_client(raters[0])
    notes = {}
    for _ in range(12):
        item = post(api, next_url(campaign.pk))
        if item.status_code == 204:
            break
        body = item.json()
        level = Comparison.objects.get(assignments__key=body["key"]).scenario.risk_level
        notes[level] = body["content_note"]
        post(api, submit_url(body["key"]), {"preference": 0})
    assert set(notes) == {"none", "low", "medium", "high"}
    assert notes["none"] is None
    for level in care.RISK_LEVELS:
        assert notes[level]["level"] == level
        assert notes[level]["text"] == str(care.CONTENT_NOTES[level])


def test_rather_not_passes_a_risk_item_on_without_counting_as_a_skip(campaign, raters, researcher):
    api = token_client(raters[0])
    skipped = None
    while skipped is None:
        body = post(api, next_url(campaign.pk)).json()
        if body["content_note"]:
            answer = post(api, skip_url(body["key"]), {"reason": "rather_not"})
            assert answer.status_code == 200 and answer.json()["reason"] == "rather_not"
            skipped = Assignment.objects.get(key=body["key"])
        else:
            post(api, skip_url(body["key"]), {"reason": "other"})
    assert skipped.state == Assignment.State.SKIPPED
    # The item goes to someone else: the other two raters can still bring it to k = 2.
    for rater in raters[1:]:
        handed = drain(rater, campaign)
        assert skipped.comparison_id in {item.comparison_id for item in handed}
    assert Comparison.objects.get(pk=skipped.comparison_id).judgment_count == 2
    monitoring = campaigns.annotator_monitoring(campaign)
    row = next(r for r in monitoring["rows"] if r["annotator"] == raters[0].username)
    assert "rather_not" not in row["skip_reasons"]  # no skip: nothing against them
    assert (
        row["skips"]
        == Assignment.objects.filter(
            annotator=raters[0], state="skipped", skip_reason="other"
        ).count()
    )
    assert row["exposure"]["rather_not"] == 1


def test_rather_not_is_refused_on_an_item_without_a_content_note(campaign, raters):
    api = token_client(raters[0])
    while True:
        body = post(api, next_url(campaign.pk)).json()
        if body["content_note"] is None:
            break
        post(api, submit_url(body["key"]), {"preference": 0})
    refused = post(api, skip_url(body["key"]), {"reason": "rather_not"})
    assert refused.status_code == 400 and "content note" in refused.json()["detail"]
    assert Assignment.objects.get(key=body["key"]).state == Assignment.State.OPEN


# ---------------------------------------------------------------- opting out


def test_opted_out_levels_are_never_handed_out_and_held_ones_are_passed_on(campaign, raters):
    api = token_client(raters[0])
    assert api.get(CARE_URL).json() == {"opted_out": []}
    held = None
    while held is None:  # hold a high-risk item, then opt out of high and medium
        body = post(api, next_url(campaign.pk)).json()
        if body["content_note"] and body["content_note"]["level"] == "high":
            held = body["key"]
        else:
            post(api, submit_url(body["key"]), {"preference": 0})
    answer = api.put(CARE_URL, json.dumps({"opted_out": ["high", "medium"]}), "application/json")
    assert answer.status_code == 200
    assert answer.json() == {"opted_out": ["medium", "high"], "passed_on": 1}
    assert Assignment.objects.get(key=held).skip_reason.startswith("rather_not")
    assert RaterCare.objects.get(user=raters[0]).opted_out == "medium,high"
    handed = drain(raters[0], campaign)
    seen = {item.comparison_id for item in Assignment.objects.filter(annotator=raters[0])}
    # Nothing may be left to hand out: the loop above answered every none and low item when
    # the first high one came after them all (the handout order is random: about one time in
    # 84).
    assert not {level_of(item) for item in handed} & {"medium", "high"}
    assert campaign.by_level["none"] | campaign.by_level["low"] <= seen  # the rest, all of it
    # Opting back in hands out again the medium and high items this rater has not had (the one
    # passed on stays with others; the loop above may have answered every medium one: one time
    # in 20).
    api.put(CARE_URL, json.dumps({"opted_out": []}), "application/json")
    not_had = (campaign.by_level["medium"] | campaign.by_level["high"]) - seen
    assert len(not_had & campaign.by_level["high"]) == 2
    assert {item.comparison_id for item in drain(raters[0], campaign)} == not_had


def test_opting_out_refuses_unknown_levels_and_fields(campaign, raters):
    api = token_client(raters[0])
    for body, field in (({"opted_out": ["extreme"]}, "opted_out"), ({"levels": []}, "levels")):
        answer = api.put(CARE_URL, json.dumps(body), "application/json")
        assert answer.status_code == 400 and field in answer.json()
    assert not RaterCare.objects.exists()


def test_only_annotators_reach_the_care_settings(client, researcher, campaign):
    assert client.get(CARE_URL).status_code in (401, 403)
    client.force_login(researcher)
    assert client.get(CARE_URL).status_code == 403
    assert client.get(reverse("annotation:care")).status_code == 403


def test_the_settings_page_opts_out_and_goes_back_to_the_rating_page(client, campaign, raters):
    client.force_login(raters[1])
    rate = reverse("annotation:rate", args=[campaign.pk])
    page = client.get(rate).content.decode()
    assert f'href="{reverse("annotation:care")}?next=' in page  # reachable from the rating page
    answer = client.post(reverse("annotation:care"), {"opted_out": ["low"], "next": rate})
    assert answer.status_code == 302 and answer["Location"] == rate
    assert care.opted_out(raters[1]) == ("low",)
    outside = client.post(reverse("annotation:care"), {"next": "https://elsewhere.example/"})
    assert outside["Location"] == reverse("annotation:care")  # no open redirect
    assert care.opted_out(raters[1]) == ()
    for odd in ("²", "annotation:care", "rate"):  # not a path: not read as a view name either
        answer = client.post(reverse("annotation:care"), {"next": odd})
        assert answer.status_code == 302 and answer["Location"] == reverse("annotation:care")


def test_the_campaign_page_warns_when_opt_outs_leave_too_few_raters(
    campaign, raters, researcher_client
):
    url = reverse("campaigns:detail", args=[campaign.pk])
    assert b"data-short-of-raters" not in researcher_client.get(url).content
    care.set_opted_out(raters[0], ["high"])
    assert b"data-short-of-raters" not in researcher_client.get(url).content  # 2 left, k = 2
    care.set_opted_out(raters[1], ["high", "medium"])
    page = researcher_client.get(url).content.decode()
    assert 'data-short-of-raters="high"' in page and 'data-short-of-raters="medium"' not in page
    (short,) = campaigns.annotator_monitoring(campaign)["short_of_raters"]
    assert short["level"] == "high" and short["comparisons"] == len(campaign.by_level["high"])
    assert (short["eligible"], short["opted_out"]) == (1, 2)
    # A rater who already judged them counts; one who passed them on cannot take them again.
    api = researcher_client.get(f"/api/campaigns/{campaign.pk}/progress/").json()
    assert api["short_of_raters"][0]["level"] == "high"


# ---------------------------------------------------------------- the daily cap


def test_the_daily_cap_stops_high_risk_items_and_a_new_day_starts_again(campaign, raters):
    Campaign.objects.filter(pk=campaign.pk).update(high_risk_daily_cap=1)
    handed = drain(raters[0], campaign)
    levels = [level_of(item) for item in handed]
    assert levels.count("high") == 1  # of 3 high-risk comparisons
    assert len(handed) == 12 - 2
    tally = AnnotatorTally.objects.get(campaign=campaign, annotator=raters[0])
    assert (tally.high_today, tally.high_day) == (1, timezone.localdate())
    AnnotatorTally.objects.filter(pk=tally.pk).update(
        high_day=timezone.localdate() - timedelta(days=1)
    )
    assert [level_of(item) for item in drain(raters[0], campaign)] == ["high"]


def test_a_cap_of_zero_hands_out_no_high_risk_item(campaign, raters):
    Campaign.objects.filter(pk=campaign.pk).update(high_risk_daily_cap=0)
    assert "high" not in {level_of(item) for item in drain(raters[0], campaign, "skip")}


def test_care_keeps_the_k_guarantee(campaign, raters):
    """Opt-outs and a cap change who gets what, never how many: no comparison passes k, and
    every comparison someone may still take reaches it."""
    care.set_opted_out(raters[0], ["high"])
    Campaign.objects.filter(pk=campaign.pk).update(high_risk_daily_cap=3)
    for rater in raters:
        drain(rater, campaign)
    counts = dict(campaign.comparisons.values_list("pk", "judgment_count"))
    assert max(counts.values()) == 2
    assert all(n == 2 for n in counts.values())  # raters 1 and 2 cover the high ones


# ---------------------------------------------------------------- support text and exposure


def test_support_text_is_one_click_away_in_the_rater_language(client, campaign, raters):
    Campaign.objects.filter(pk=campaign.pk).update(
        support_text="Helpline: **400-161-9995**",
        support_text_zh_hans="心理援助热线：**400-161-9995**",
        break_after_minutes=45,
    )
    client.force_login(raters[0])
    page = client.get(reverse("annotation:rate", args=[campaign.pk])).content.decode()
    support_url = reverse("annotation:support", args=[campaign.pk])
    assert f'href="{support_url}" data-support-open' in page
    assert "<strong>400-161-9995</strong>" in page and 'id="support"' in page
    assert 'data-break-minutes="45"' in page
    alone = client.get(support_url, headers={"accept-language": "zh-hans"}).content.decode()
    assert "心理援助热线" in alone
    api = token_client(raters[0]).get("/api/rate/campaigns/").json()["results"][0]
    assert api["support_text"].startswith("Helpline") and api["break_after_minutes"] == 45


def test_exposure_counts_risk_items_seen_by_level_today_and_in_all(campaign, raters):
    drain(raters[0], campaign)
    yesterday = timezone.now() - timedelta(days=1, hours=1)
    first_high = Assignment.objects.filter(
        annotator=raters[0], comparison__scenario__risk_level="high"
    ).first()
    Assignment.objects.filter(pk=first_high.pk).update(issued_at=yesterday)
    seen = care.exposure(campaign)[raters[0].username]
    assert seen["levels"] == {
        "low": {"today": 3, "total": 3},
        "medium": {"today": 3, "total": 3},
        "high": {"today": 2, "total": 3},
    }
    assert raters[1].username not in care.exposure(campaign)


def test_the_campaign_form_and_api_set_the_care_settings(researcher_client, campaign):
    url = f"/api/campaigns/{campaign.pk}/"
    body = {
        "high_risk_daily_cap": 5,
        "break_after_minutes": 40,
        "support_text": "Call 110",
        "support_text_zh_hans": "拨打 110",
    }
    answer = researcher_client.patch(url, json.dumps(body), "application/json")
    assert answer.status_code == 200, answer.content
    stored = Campaign.objects.get(pk=campaign.pk)
    assert (stored.high_risk_daily_cap, stored.break_after_minutes) == (5, 40)
    assert stored.support_text_in("zh-hans") == ("拨打 110", "zh-hans")
    bad = researcher_client.patch(url, json.dumps({"break_after_minutes": 0}), "application/json")
    assert bad.status_code == 400 and "break_after_minutes" in bad.json()
    page = researcher_client.get(reverse("campaigns:detail", args=[campaign.pk])).content.decode()
    assert re.search(r"High-risk items per rater per day</dt><dd>5<", page)


# ---------------------------------------------------------------- the queue's hot path


@pytest.mark.django_db(transaction=True)
def test_opt_outs_and_the_cap_cost_the_queue_no_statement(
    researcher, raters, django_assert_max_num_queries
):
    """The care state comes with the campaign read: a rater with opt-outs, or at the cap,
    costs `next` what one without does (test_rating_queries' budget); only handing out a
    high-risk item adds its count."""
    from tests.annotation.test_rating_queries import NEXT, SUBMIT, _writes

    campaign = factories.campaign(researcher, raters, n_scenarios=4, overlap=2)
    by_level = with_levels(campaign, ["none", "low", "medium", "high"])
    Campaign.objects.filter(pk=campaign.pk).update(high_risk_daily_cap=0)
    care.set_opted_out(raters[0], ["low"])
    api = token_client(raters[0])
    api.get("/api/rate/campaigns/")  # the first progress read counts the new comparisons
    for _ in range(3):
        with django_assert_max_num_queries(NEXT):
            item = post(api, next_url(campaign.pk))
        key = item.json()["key"]
        assert (
            Comparison.objects.get(assignments__key=key).pk in by_level["none"] | by_level["medium"]
        )
        with django_assert_max_num_queries(SUBMIT + _writes()):
            assert post(api, submit_url(key), {"preference": 1}).status_code == 200
    # raters[2], without opt-outs or cap: a high-risk hand-out is one statement more.
    Campaign.objects.filter(pk=campaign.pk).update(high_risk_daily_cap=None)
    api = token_client(raters[2])
    api.get("/api/rate/campaigns/")
    statements = {}
    for _ in range(12):
        with CaptureQueriesContext(connection) as sent:
            item = post(api, next_url(campaign.pk))
        if item.status_code == 204:
            break
        level = (item.json()["content_note"] or {"level": "none"})["level"]
        statements.setdefault(level, set()).add(len(sent))
        post(api, submit_url(item.json()["key"]), {"preference": 1})
    assert statements["none"] == statements["low"] == statements["medium"]
    assert statements["high"] == {n + 1 for n in statements["none"]}
    assert max(statements["none"]) <= NEXT


def test_without_javascript_continue_reloads_the_page_with_the_item(client, researcher, raters):
    campaign = factories.campaign(researcher, raters[:1], n_scenarios=1, overlap=1)
    with_levels(campaign, ["medium"])
    client.force_login(raters[0])
    url = reverse("annotation:rate", args=[campaign.pk])
    page = client.get(url).content.decode()
    key = re.search(r"/a/([0-9a-f-]{36})/submit/", page).group(1)
    assert "data-content-note" in page and "data-behind-note" in page
    assert f'href="{url}?continue={key}" data-note-continue' in page
    shown = client.get(url, {"continue": key}).content.decode()
    assert "data-content-note" not in shown and "data-behind-note" not in shown
    assert f"/a/{key}/submit/" in shown  # the same item, now shown
    passed = client.post(reverse("annotation:rather_not", args=[key]))
    assert passed.status_code == 302
    assert Assignment.objects.get(key=key).skip_reason == care.RATHER_NOT
