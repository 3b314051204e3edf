"""Campaign guidelines per language (the rating page and the rating API show the reader's,
else the default; the campaign API and form edit them) and units in the page's language."""

import json

import pytest
from django.test import Client
from django.utils import translation

from annotation.campaign_forms import CampaignForm
from h2htalk import display
from tests.annotation import factories
from tests.annotation.test_rating_api import token_client
from tests.conftest import PASSWORD

DEFAULT = "Prefer the **warmer** reply."
CHINESE = "选择**更温暖**的回复。"


@pytest.fixture
def rater(roles, django_user_model):
    return factories.annotators(django_user_model, 1)[0]


@pytest.fixture
def campaign(researcher, rater):
    return factories.campaign(
        researcher, [rater], n_scenarios=1, guidelines=DEFAULT, guidelines_zh_hans=CHINESE
    )


def rate_page(rater, campaign, language: str) -> str:
    client = Client(headers={"Accept-Language": language})
    client.login(username=rater.username, password=PASSWORD)
    return client.get(f"/rate/{campaign.pk}/").content.decode()


def test_the_rating_page_shows_the_guidelines_of_the_readers_language(rater, campaign):
    chinese = rate_page(rater, campaign, "zh-CN")
    assert "<strong>更温暖</strong>" in chinese and "warmer" not in chinese
    assert '<div class="md" lang="zh-hans">' in chinese
    english = rate_page(rater, campaign, "en")
    assert "<strong>warmer</strong>" in english and "更温暖" not in english
    # Other languages, and Chinese readers of a campaign without Chinese guidelines: the default.
    assert "<strong>warmer</strong>" in rate_page(rater, campaign, "fr")
    campaign.guidelines_zh_hans = "  \n"
    campaign.save()
    assert "<strong>warmer</strong>" in rate_page(rater, campaign, "zh-CN")


def test_the_rating_api_gives_the_guidelines_and_errors_of_the_readers_language(rater, campaign):
    api = token_client(rater)
    listed = api.get("/api/rate/campaigns/", headers={"Accept-Language": "zh-CN"}).json()
    (mine,) = listed["results"]
    assert mine["guidelines"] == CHINESE and "<strong>更温暖</strong>" in mine["guidelines_html"]
    assert {r["label"] for r in mine["skip_reasons"]} >= {"其他", "我无法判断这一条"}
    listed = api.get("/api/rate/campaigns/", headers={"Accept-Language": "en"}).json()
    assert listed["results"][0]["guidelines"] == DEFAULT
    missing = "/api/rate/assignments/00000000-0000-4000-8000-000000000000/submit/"
    answer = api.post(missing, {"preference": 0}, headers={"Accept-Language": "zh-CN"})
    assert answer.status_code == 404 and answer.json() == {"detail": "没有这一条。"}


def test_the_campaign_form_and_api_edit_the_chinese_guidelines(researcher_client, campaign):
    assert "guidelines_zh_hans" in CampaignForm.Meta.fields
    page = researcher_client.get(f"/campaigns/{campaign.pk}/edit/").content.decode()
    assert 'name="guidelines_zh_hans"' in page and CHINESE in page
    answer = researcher_client.patch(
        f"/api/campaigns/{campaign.pk}/",
        data=json.dumps({"guidelines_zh_hans": "要**真诚**。"}),
        content_type="application/json",
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["guidelines_zh_hans"] == "要**真诚**。"
    campaign.refresh_from_db()
    assert campaign.guidelines_zh_hans == "要**真诚**。" and campaign.guidelines == DEFAULT


@pytest.mark.parametrize(
    ("seconds", "english", "chinese"),
    [
        (45.5, "45.5 s", "45.5 秒"),
        (125, "2 min 5 s", "2 分 5 秒"),
        (120, "2 min", "2 分钟"),
        (3840, "1 h 4 min", "1 小时 4 分"),
        (7200, "2 h", "2 小时"),
        (None, "—", "—"),
    ],
)
def test_durations_follow_the_language(seconds, english, chinese):
    with translation.override("en"):
        assert display.duration(seconds) == english
    with translation.override("zh-hans"):
        assert display.duration(seconds) == chinese


def test_names_on_the_annotators_pages_follow_the_language():
    with translation.override("zh-hans"):
        assert display.subtask_label("dialogue_emotion") == "对话 · 情感支持"
        assert display.importance_name(2) == "长期"
        assert display.subtask_label("unknown_code") == "unknown_code"
    with translation.override("en"):
        assert display.subtask_label("dialogue_emotion") == "Dialogue · emotional support"
        assert display.importance_name(0) == "~a week"
