"""The pages of the demo study show display names and human units, never internal codes, and
every statistic on the agreement and calibration pages has its one-line meaning."""

import io
import re
from html.parser import HTMLParser

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Campaign, Judgment
from h2htalk.meanings import MEANINGS
from scenarios.models import Scenario
from scenarios.taxonomy import Subtask
from scoring.agreement.models import AgreementReport
from scoring.calibration.models import CalibratedJudge

RAW_CODES = [
    re.compile(r"\bpreference5\b"),
    re.compile(r"\bwinner3\b"),
    re.compile(r"\b[ab]_(empathy|fluency|memory_use|planning|persona_consistency|safety)\b"),
    re.compile(r"\brating_\w+"),
    re.compile(r"\d ms\b|\? ms\b"),
    re.compile(r"\b0 tokens\b"),
    re.compile(r"\bimportance \d"),
    re.compile(r"\b(" + "|".join(Subtask.values) + r")\b"),
]


class VisibleText(HTMLParser):
    """The text a reader sees (no scripts, styles or attributes), plus every data-stat and
    data-meaning key."""

    def __init__(self):
        super().__init__()
        self.parts, self.stats, self.meanings, self._hidden = [], [], {}, 0
        self._meaning = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "style"):
            self._hidden += 1
        if "data-stat" in attrs:
            self.stats.append(attrs["data-stat"])
        if "data-meaning" in attrs:
            self._meaning = attrs["data-meaning"]
            self.meanings.setdefault(self._meaning, "")
        self.parts.append(" ")

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._hidden -= 1
        self._meaning = None  # a meaning is plain text in one element

    def handle_data(self, data):
        if self._hidden:
            return
        self.parts.append(data)
        if self._meaning:
            self.meanings[self._meaning] += data

    @property
    def text(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.parts))


def read(response) -> VisibleText:
    assert response.status_code == 200
    parsed = VisibleText()
    parsed.feed(response.content.decode())
    return parsed


@pytest.fixture(scope="module")
def demo(module_db):
    """`load_demo`'s study, plus ratings: empathy on every judgment of six comparisons, fluency
    on one judgment only (a label nobody gave twice: no row for it)."""
    with module_db():
        call_command("load_demo", stdout=io.StringIO())
        campaign = Campaign.objects.get(name__contains="demo data")
        comparisons = list(campaign.comparisons.order_by("pk")[:6])
        for judgment in Judgment.objects.filter(comparison__in=comparisons):
            judgment.ratings = {"a": {"empathy": 4}, "b": {"empathy": 2 + judgment.pk % 3}}
            judgment.save(update_fields=["ratings"])
        lonely = Judgment.objects.filter(comparison=comparisons[0]).first()
        lonely.ratings = {"a": {"empathy": 4, "fluency": 5}, "b": {"empathy": 3}}
        lonely.save(update_fields=["ratings"])
        AgreementReport.objects.filter(campaign=campaign).delete()  # computed on these ratings
        return campaign.pk


@pytest.fixture
def client_of(client, demo, django_user_model):
    def log_in(username):
        client.force_login(django_user_model.objects.get(username=username))
        return client

    return log_in


def pages(campaign_pk):
    campaign = Campaign.objects.get(pk=campaign_pk)
    scenario = Scenario.objects.get(external_id="demo-001")
    judge = CalibratedJudge.objects.get(campaign=campaign)
    return {
        "agreement": reverse("scoring:agreement", args=[campaign.pk]),
        "calibration": reverse("calibration:detail", args=[judge.pk]),
        "calibration list": reverse("calibration:list"),
        "campaign": reverse("campaigns:detail", args=[campaign.pk]),
        "scenarios": reverse("scenarios:list"),
        "scenario": reverse("scenarios:detail", args=[scenario.pk]),
        "responses": reverse("companions:responses") + f"?scenario={scenario.pk}",
        "response list": reverse("companions:responses"),
        "history": reverse("scenarios:history", args=[scenario.pk]),
        "gold": reverse("campaigns:gold", args=[campaign.pk]),
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    "page",
    [
        "agreement",
        "calibration",
        "calibration list",
        "campaign",
        "scenarios",
        "scenario",
        "responses",
        "response list",
        "history",
        "gold",
    ],
)
def test_no_internal_code_or_raw_unit_on_the_page(client_of, demo, page):
    text = read(client_of("researcher").get(pages(demo)[page])).text
    for code in RAW_CODES:
        assert not code.search(text), f"{page} shows {code.search(text).group()!r}"


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["agreement", "calibration", "calibration list"])
def test_every_statistic_shown_has_its_meaning(client_of, demo, page):
    parsed = read(client_of("researcher").get(pages(demo)[page]))
    assert len(set(parsed.stats)) >= 2  # the page marks its figures
    missing = set(parsed.stats) - set(parsed.meanings)
    assert not missing, f"{page} shows {sorted(missing)} without a meaning"
    for key in parsed.stats:
        assert parsed.meanings[key].strip() == MEANINGS[key][1]


@pytest.mark.django_db
def test_agreement_page_names_labels_and_gives_shares_with_their_base(client_of, demo):
    text = read(client_of("researcher").get(pages(demo)["agreement"])).text
    assert "5-point preference" in text and "3-way winner (A / tie / B)" in text
    assert "Empathy rating" in text
    assert "Fluency rating" not in text  # given once: no comparison to agree on, no empty row
    assert "All comparisons" in text and "Companion Dialogue" in text and "Dialogue · base" in text
    in_order = [text.index(f"{s.label} 5-point") for s in Subtask]
    assert in_order == sorted(in_order)  # subtasks in the benchmark's order, not by code
    assert re.search(r"pick different winners on \d+ of 81 comparisons \(\d+(\.\d)?%\)", text)
    assert re.search(r"\d+ of \d+ \(\d+%\) · p=", text)  # left-preference rate with its base
    assert re.search(r"Median time.*\d+\.\d s", text)


@pytest.mark.django_db
def test_scenario_pages_name_subtasks_flags_and_importance(client_of, demo):
    researcher = client_of("researcher")
    scenario = read(researcher.get(pages(demo)["scenario"])).text
    assert "long-term" in scenario  # demo-001's memory has importance 2
    listing = researcher.get(pages(demo)["scenarios"]).content.decode()
    assert '<td class="id">' in listing  # kept on one line by the stylesheet
    assert "Dialogue · base" in read(researcher.get(pages(demo)["scenarios"])).text
    responses = read(researcher.get(pages(demo)["responses"])).text
    assert "imported" in responses and "tokens" not in responses
