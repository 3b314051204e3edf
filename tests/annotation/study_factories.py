"""A campaign with a study link, and joining it as a participant."""

import pytest
from django.core.cache import cache
from django.urls import reverse

from annotation.study.models import StudyLink
from tests.annotation import factories


def study(owner, n_scenarios=2, overlap=1, n_companions=2, **link_fields):
    """An open campaign (no annotator of its own) with a Prolific study link."""
    models = factories.companions()[:n_companions]
    campaign = factories.campaign(
        owner, [], n_scenarios=n_scenarios, overlap=overlap, companions=models
    )
    return link_for(campaign, **link_fields)


def link_for(campaign, **link_fields):
    """A Prolific study link of `campaign`: codes, local platform addresses, quota 2."""
    fields = {
        "completion_code": "C0MPL3TE",
        "completion_url": "http://127.0.0.1:9/complete?cc=C0MPL3TE",
        "screenout_code": "SCR33N",
        "screenout_url": "http://127.0.0.1:9/screened",
        "quota": 2,
        "time_limit_minutes": 30,
        "consent": "You agree to **rate** conversations.",
        "consent_zh_hans": "您同意为对话**评分**。",
        "instructions": "Read both replies.",
        **link_fields,
    }
    return StudyLink.objects.create(campaign=campaign, **fields)


def join_url(link, pid="PID-1", study="STUDY-1", session="SESSION-1") -> str:
    query = f"PROLIFIC_PID={pid}&STUDY_ID={study}&SESSION_ID={session}"
    return f"{reverse('study:join', args=[link.token])}?{query}"


@pytest.fixture(autouse=True)
def empty_throttle():
    """The join throttle's slots live in the shared cache (Redis under CI): none from before."""
    cache.clear()
    yield
    cache.clear()
