"""Issue 22 point 5 on the agreement page: which reasons go with the preferred response, per
companion (named: researchers only), agreement by confidence, and "both unacceptable" as a
category of its own in the 4-way outcome."""

import pytest
from django.urls import reverse

from annotation import queue
from annotation.models import Judgment
from annotation.rating_details import parse_reasons
from scoring.agreement import services as agreement
from tests.annotation import factories


@pytest.fixture
def rated(researcher, roles, django_user_model):
    """4 annotators on 6 comparisons of 3 companions: the higher id is preferred "because it is
    warmer" (and safer, for rater 0), except that rater 3 says both are unacceptable."""
    raters = factories.annotators(django_user_model, 4)
    campaign = factories.campaign(
        researcher,
        raters,
        n_scenarios=2,
        overlap=4,
        reason_choices=parse_reasons(["Warmer", "Safer"]),
        ask_confidence=True,
    )
    for n, rater in enumerate(raters):
        while (item := queue.next_assignment(rater, campaign)) is not None:
            if n == 3:
                answer = queue.Submission(None, both_unacceptable=True, confidence=1)
            else:
                b_on_left = not item.left_is_a
                reasons = ["warmer", "safer"] if n == 0 else ["warmer"]
                answer = queue.Submission(-1 if b_on_left else 1, reasons=reasons, confidence=3)
            queue.submit(rater, item.key, answer)
    return campaign


def test_report_sums_up_reasons_per_preferred_companion_and_confidence(rated):
    report = agreement.compute_report(rated, n_boot=20)
    by_id = list(rated.companions.order_by("pk").values_list("name", flat=True))
    reasons = report["reasons"]
    assert reasons["labels"] == [
        {"key": "warmer", "label": "Warmer"},
        {"key": "safer", "label": "Safer"},
    ]
    rows = {row["companion"]: row for row in reasons["companions"]}
    # The lowest id is never preferred; the middle one wins its 2 scenarios against the lowest,
    # the highest wins 4 (2 scenarios × 2 opponents); raters 0–2 vote, each with "warmer".
    assert set(rows) == set(by_id[1:])
    assert rows[by_id[1]]["preferred"] == 3 * 2 and rows[by_id[2]]["preferred"] == 3 * 4
    for row in rows.values():
        counts = {r["key"]: (r["count"], r["share"]) for r in row["reasons"]}
        assert counts["warmer"] == (row["preferred"], 1.0)
        assert counts["safer"] == (row["preferred"] // 3, pytest.approx(1 / 3))
    levels = {row["confidence"]: row for row in report["confidence"]}
    assert levels[3]["n"] == 18 and levels[1]["n"] == 6
    assert levels[3]["agreement"] == 1.0 and levels[1]["agreement"] == 0.0
    overall = {row["label"]: row for row in report["overall"]}
    assert overall["outcome4"]["level"] == "nominal"
    # Nobody votes a plain tie here, so "both unacceptable" as the tie or as its own category
    # partitions the votes alike: the same α (where they differ: tests/test_rating_outcomes.py).
    assert overall["outcome4"]["alpha"] == pytest.approx(overall["winner3"]["alpha"])
    assert Judgment.objects.filter(both_unacceptable=True, preference=0).count() == 6


def test_page_shows_the_reasons_table_to_researchers_only(rated, researcher, client, roles):
    client.force_login(researcher)
    page = client.get(reverse("scoring:agreement", args=[rated.pk])).content.decode()
    assert 'id="reason-table"' in page and 'id="confidence-table"' in page
    for name in rated.companions.order_by("pk").values_list("name", flat=True)[1:]:
        assert f'data-companion="{name}"' in page
    assert "4-way outcome" in page
    annotator = rated.annotators.first()
    client.force_login(annotator)
    refused = client.get(reverse("scoring:agreement", args=[rated.pk]))
    assert refused.status_code in (403, 404)
