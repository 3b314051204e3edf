"""The admission check in the rating cycle: nothing where a campaign needs no qualification
(test_rating_queries' budgets hold unchanged), one indexed row per hand-out for an admitted
annotator, and the drift watch's reads per submission where the campaign asks for it."""

import json

import pytest

from annotation.models import QualificationRule, QualificationStatus
from annotation.qualification import phase
from tests.annotation import factories
from tests.annotation.qualification_setup import qualification_campaign
from tests.annotation.test_rating_api import next_url, submit_url, token_client
from tests.annotation.test_rating_queries import HELD, NEXT, SUBMIT, _writes

pytestmark = pytest.mark.django_db(transaction=True)

ADMISSION = 1  # the annotator's phase row, before an item is handed out
WATCH = 1  # the rule and phase, after a judgment is stored
WATCH_MEASURE = 1  # the window of the measure the judgment can change


@pytest.fixture
def rater(roles, django_user_model):
    return factories.annotators(django_user_model, 1)[0]


def _admitted(campaign, rater):
    QualificationStatus.objects.create(
        campaign=campaign, annotator=rater, phase="admitted", since=campaign.created_at
    )
    assert phase(campaign, rater) == "admitted"


@pytest.mark.parametrize("watched", [False, True], ids=["rule only", "drift watch"])
def test_an_admitted_annotator_pays_one_row_per_item_and_the_watch_per_judgment(
    researcher, rater, watched, django_assert_max_num_queries
):
    campaign = qualification_campaign(researcher, [rater], n_gold=0)
    if watched:
        QualificationRule.objects.filter(campaign=campaign).update(min_consensus=0.5)
    _admitted(campaign, rater)
    api = token_client(rater)
    api.get("/api/rate/campaigns/")
    watch = WATCH + (WATCH_MEASURE if watched else 0)
    for _ in range(3):
        with django_assert_max_num_queries(NEXT + ADMISSION):
            item = api.post(next_url(campaign.pk))
        assert item.status_code == 200
        with django_assert_max_num_queries(HELD + ADMISSION):
            assert api.post(next_url(campaign.pk)).json()["key"] == item.json()["key"]
        with django_assert_max_num_queries(SUBMIT + _writes() + watch):
            stored = api.post(
                submit_url(item.json()["key"]), json.dumps({"preference": 1}), "application/json"
            )
        assert stored.status_code == 200
