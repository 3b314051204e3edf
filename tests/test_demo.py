"""The demo set behind `make demo`: loads, is idempotent, and gives every role something to do."""

import io
import re

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from annotation.models import Campaign, Judgment
from scenarios.models import Response, Scenario


def load() -> str:
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_demo_loads_idempotently_with_working_printed_passwords():
    first = load()
    counts = (Scenario.objects.count(), Response.objects.count(), Judgment.objects.count())
    assert counts == (33, 99, 243)
    assert Scenario.objects.values("subtask").distinct().count() == 11
    assert set(Scenario.objects.values_list("language", flat=True)) == {"en", "zh"}
    campaign = Campaign.objects.get(name__contains="demo data")
    assert campaign.state == Campaign.State.OPEN and campaign.overlap == 4
    assert campaign.annotators.filter(username="annotator").exists()

    second = load()
    assert (Scenario.objects.count(), Response.objects.count(), Judgment.objects.count()) == counts
    for role in ("admin", "researcher", "annotator"):
        old, new = (
            re.search(rf"username: {role}\s+password: (\S+)", output).group(1)
            for output in (first, second)
        )
        assert authenticate(username=role, password=new) is not None
        assert authenticate(username=role, password=old) is None  # fresh passwords every run
