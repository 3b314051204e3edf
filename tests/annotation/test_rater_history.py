"""A rater's history elsewhere costs nothing in a campaign (issue 24): the progress counts, the
held item and the statements of next and submit read only the rater's rows in the campaign
asked about, and answer as a recount from the rows does.

The history: the rater's submitted, skipped and open items in other campaigns (closed and
open), some of them on comparisons still open there, which the old count visited one by one.
"""

import json
import random
from contextlib import contextmanager

import pytest
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from annotation import candidates, queue
from annotation.models import AnnotatorTally, Assignment, Campaign
from annotation.progress import judged_by_others, progress_for
from annotation.rating_reads import assignment_statement, campaign_statement, rating_campaign
from tests.annotation import factories
from tests.annotation.test_queue_guarantees import recounted
from tests.annotation.test_rating_api import next_url, submit_url, token_client
from tests.annotation.test_rating_queries import (  # the budgets without history
    NEXT,
    SUBMIT,
    _writes,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


def _history(researcher, raters, name: str, state: str, n_items: int) -> Campaign:
    """A campaign in which raters[0] answered (submitted, then skipped) and still holds items,
    left in `state`."""
    elsewhere = factories.campaign(researcher, raters, n_scenarios=n_items, overlap=3, name=name)
    for turn in range(n_items * 3):
        item = queue.next_assignment(raters[0], rating_campaign(raters[0], elsewhere.pk))
        if item is None:
            break
        if turn % 5 == 4:
            break  # this one stays open: held in that campaign
        if turn % 3 == 2:
            queue.skip(raters[0], item.key, "other")
        else:
            queue.submit(raters[0], item.key, queue.Submission(1))
    Campaign.objects.filter(pk=elsewhere.pk).update(state=state)
    return elsewhere


@pytest.fixture
def with_history(researcher, raters):
    """raters[0] with items in a closed and in an open campaign, then a new campaign."""
    _history(researcher, raters, "closed before", Campaign.State.CLOSED, 4)
    _history(researcher, raters, "still open", Campaign.State.OPEN, 4)
    assert Assignment.objects.filter(annotator=raters[0]).count() >= 8
    return factories.campaign(researcher, raters, n_scenarios=3, overlap=2, name="this one")


def test_progress_with_history_elsewhere_equals_a_recount_after_every_action(with_history, raters):
    campaign = with_history
    recounted(raters[0], campaign)
    assert progress_for(raters[0], rating_campaign(raters[0], campaign.pk)).done_total == 0
    for turn in range(9):
        user = raters[turn % 3]
        read = rating_campaign(user, campaign.pk)
        assert progress_for(user, read) == recounted(user, campaign)
        assert not read.has_open_item  # their open item elsewhere is not held here
        item = queue.next_assignment(user, read)
        if item is None:
            continue
        assert item.campaign_id == campaign.pk == item.comparison.campaign_id
        assignment, carried = queue.rated_item(user, item.key)
        queue.submit(user, item.key, queue.Submission(-1), item=assignment)
        assert progress_for(user, carried) == recounted(user, campaign)


def test_every_assignment_carries_its_comparisons_campaign(with_history, raters):
    """Made by the queue's claim (hand-written INSERT) or saved through the ORM alike."""
    queue.next_assignment(raters[1], rating_campaign(raters[1], with_history.pk))
    made = Assignment.objects.create(
        comparison=with_history.comparisons.exclude(assignments__annotator=raters[2]).first(),
        annotator=raters[2],
        left_is_a=True,
        lease_expires_at="2030-01-01T00:00:00Z",
    )
    assert made.campaign_id == with_history.pk
    for assignment in Assignment.objects.select_related("comparison"):
        assert assignment.campaign_id == assignment.comparison.campaign_id


def test_next_and_submit_send_as_many_statements_with_history_as_without(
    with_history, raters, django_assert_max_num_queries
):
    api = token_client(raters[0])
    api.get("/api/rate/campaigns/")  # the first progress read counts the new comparisons
    for _ in range(2):
        with django_assert_max_num_queries(NEXT):
            item = api.post(next_url(with_history.pk))
        assert item.status_code == 200
        with django_assert_max_num_queries(SUBMIT + _writes()):
            stored = api.post(
                submit_url(item.json()["key"]), json.dumps({"preference": 1}), "application/json"
            )
        assert stored.status_code == 200
        assert stored.json()["progress"] == vars(recounted(raters[0], with_history))


def _assignment_rows_read(sql: str, params: list) -> int:
    """Rows PostgreSQL read from annotation_assignment running `sql` (EXPLAIN ANALYZE), with
    sequential scans off: on tables this small the planner would rather read them whole, as it
    would not on a store of millions; what is checked is the access path there is."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
            (plan,) = cursor.fetchone()
        finally:
            cursor.execute("RESET enable_seqscan")
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def rows(node) -> int:
        own = 0
        if node.get("Relation Name") == "annotation_assignment":
            own = node["Actual Rows"] * node["Actual Loops"]
            own += node.get("Rows Removed by Filter", 0) * node["Actual Loops"]
        return own + sum(rows(child) for child in node.get("Plans", []))

    return rows(plan[0]["Plan"])


def test_the_campaign_and_item_reads_visit_none_of_the_raters_rows_elsewhere(with_history, raters):
    """PostgreSQL: the statements next and submit read with (the campaign with the progress
    counts and the held item; the item answered with the same) read none of the rater's
    answered items elsewhere: before their first item here at most the items they hold open
    elsewhere (one per open campaign at most: whether they hold one here may be probed by the
    index (annotator, state), which the planner takes about as often as (campaign, annotator,
    state) on tables this small: 4 runs in 21 under xdist), then also their rows here."""
    if connection.vendor != "postgresql":
        pytest.skip("EXPLAIN ANALYZE's row counts are PostgreSQL's: run with DATABASE_URL")
    rater = raters[0]
    mine = Assignment.objects.filter(annotator=rater)
    held_elsewhere = mine.filter(state=Assignment.State.OPEN).count()
    assert held_elsewhere == 2 and mine.count() >= 8 + held_elsewhere  # and 8 answered
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    assert _assignment_rows_read(*campaign_statement(rater, with_history.pk)) <= held_elsewhere
    for _ in range(2):
        item = queue.next_assignment(rater, rating_campaign(rater, with_history.pk))
        queue.submit(rater, item.key, queue.Submission(1))
    mine_here = mine.filter(campaign=with_history).count()
    assert mine_here == 2
    read_campaign = campaign_statement(rater, with_history.pk)
    assert _assignment_rows_read(*read_campaign) <= 2 * mine_here + held_elsewhere
    read_item = assignment_statement(rater, item.key)
    assert _assignment_rows_read(*read_item) <= 2 * mine_here + 1 + held_elsewhere  # the item


def test_progress_within_a_long_campaign_equals_a_recount_through_every_change(researcher, raters):
    """The rater's items in this campaign are counted by their handed tally, not visited one
    by one: co-raters filling their comparisons, gold marked and unmarked, a scenario sent to
    review and back, an exclusion and its removal, and k raised keep it equal to a recount."""
    from annotation import exclusions
    from annotation.models import Comparison
    from scenarios.models import Scenario

    campaign = factories.campaign(researcher, raters, n_scenarios=6, overlap=2, name="long")

    def left_for(user) -> int:
        """Regular comparisons below k of approved scenarios never handed to `user` (none
        while they are excluded), counted from the rows."""
        if campaign.exclusions.filter(annotator=user).exists():
            return 0
        k = Campaign.objects.get(pk=campaign.pk).overlap
        open_here = Comparison.objects.filter(
            campaign=campaign, is_gold=False, judgment_count__lt=k
        )
        approved = open_here.filter(scenario__state=Scenario.State.APPROVED)
        return approved.exclude(assignments__annotator=user).count()

    def act(turns: int) -> None:
        for turn in range(turns):
            user = raters[turn % 3]
            read = rating_campaign(user, campaign.pk)
            item = queue.next_assignment(user, read)
            for each in raters:
                fresh = Campaign.objects.get(pk=campaign.pk)
                assert progress_for(each, fresh).left_for_me == left_for(each)
            if item is None:
                continue
            assignment, carried = queue.rated_item(user, item.key)
            if turn % 5 == 4:
                queue.skip(user, item.key, "other", item=assignment)
            else:
                queue.submit(user, item.key, queue.Submission(1), item=assignment)
            assert progress_for(user, carried).left_for_me == left_for(user)

    act(7)
    skipped = []  # two items raters[0] skips: handed to them, still below k
    for _ in range(2):
        item = queue.next_assignment(raters[0], rating_campaign(raters[0], campaign.pk))
        queue.skip(raters[0], item.key, "other")
        skipped.append(item.comparison)
    Comparison.objects.filter(pk=skipped[0].pk).update(is_gold=True, gold_preference=1)
    Scenario.objects.filter(pk=skipped[1].scenario_id).update(state=Scenario.State.IN_REVIEW)
    fresh = Campaign.objects.get(pk=campaign.pk)
    assert progress_for(raters[0], fresh).left_for_me == left_for(raters[0])
    act(5)
    Comparison.objects.filter(pk=skipped[0].pk).update(is_gold=False)
    Scenario.objects.filter(pk=skipped[1].scenario_id).update(state=Scenario.State.APPROVED)
    exclusions.exclude(campaign, [raters[1]], "test")
    act(4)
    exclusions.clear(campaign, [raters[1]])
    editor = APIClient()
    editor.force_authenticate(researcher)
    raised = editor.patch(f"/api/campaigns/{campaign.pk}/", {"overlap": 3}, format="json")
    assert raised.status_code == 200, raised.json()
    campaign.refresh_from_db()
    act(6)
    assert Assignment.objects.filter(annotator=raters[0], campaign=campaign).count() >= 6


def test_the_reads_visit_no_row_per_item_the_rater_had_in_the_campaign(researcher, raters):
    """PostgreSQL: after a dozen items in the campaign, the campaign read and the item read
    visit the rater's open item (and the item answered), not every item they had there."""
    if connection.vendor != "postgresql":
        pytest.skip("EXPLAIN ANALYZE's row counts are PostgreSQL's: run with DATABASE_URL")
    rater = raters[0]
    campaign = factories.campaign(researcher, raters, n_scenarios=8, overlap=3, name="many")
    for _ in range(12):
        item = queue.next_assignment(rater, rating_campaign(rater, campaign.pk))
        queue.submit(rater, item.key, queue.Submission(1))
    item = queue.next_assignment(rater, rating_campaign(rater, campaign.pk))
    assert Assignment.objects.filter(annotator=rater, campaign=campaign).count() == 13
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    assert _assignment_rows_read(*campaign_statement(rater, campaign.pk)) <= 1
    assert _assignment_rows_read(*assignment_statement(rater, item.key)) <= 2


def _lone_rater_campaign(researcher, raters, judged: int) -> Campaign:
    """A campaign (30 scenarios: 90 comparisons, k = 3) in which raters[0] alone judged
    `judged` items: all on comparisons still below k, which their candidate lock passes."""
    campaign = factories.campaign(researcher, raters, n_scenarios=30, overlap=3, name="lone")
    for _ in range(judged):
        item = queue.next_assignment(raters[0], rating_campaign(raters[0], campaign.pk))
        queue.submit(raters[0], item.key, queue.Submission(1))
    return campaign


def _locked(rater, campaign, start: int, now, **options) -> list[int]:
    """The regular comparisons `candidates.locked_batch` locks for `rater` from `start`, in
    queue order (in a transaction of its own, so the locks go with it)."""
    with transaction.atomic():
        batch = candidates.locked_batch(rater, campaign, False, start, [], now, **options)
    return [c.pk for c in batch]


def _lock_statement(monkeypatch, user, campaign) -> tuple[str, list]:
    """The candidate lock statement (and its parameters) the next request of `user` sends."""
    sent = []

    class Recording:
        def __init__(self, cursor):
            self.cursor = cursor

        def execute(self, sql, params):
            sent.append((sql, params))
            return self.cursor.execute(sql, params)

        def __getattr__(self, name):
            return getattr(self.cursor, name)

    bound = candidates.bound_cursor

    @contextmanager
    def recording():
        with bound() as cursor:
            yield Recording(cursor)

    monkeypatch.setattr(candidates, "bound_cursor", recording)
    item = queue.next_assignment(user, rating_campaign(user, campaign.pk))
    monkeypatch.setattr(candidates, "bound_cursor", bound)
    queue.submit(user, item.key, queue.Submission(1))
    return next(each for each in sent if each[0].startswith("WITH before_wrap"))


def test_a_raters_lock_reads_a_window_not_every_item_they_hold(researcher, raters, monkeypatch):
    """PostgreSQL: a rater holding many items below k (far ahead of the one co-rater who
    came) is not walked through all of them on every request: past WINDOW_AFTER, each count's
    range reads WINDOW rows."""
    if connection.vendor != "postgresql":
        pytest.skip("EXPLAIN ANALYZE's row counts are PostgreSQL's: run with DATABASE_URL")
    campaign = _lone_rater_campaign(researcher, raters, judged=40)
    item = queue.next_assignment(raters[1], rating_campaign(raters[1], campaign.pk))
    queue.submit(raters[1], item.key, queue.Submission(1))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    monkeypatch.setattr(candidates, "WINDOW", 3)
    monkeypatch.setattr(queue, "WINDOW_AFTER", 10)
    windowed = _assignment_rows_read(*_lock_statement(monkeypatch, raters[0], campaign))
    monkeypatch.setattr(queue, "WINDOW_AFTER", 1000)
    walked = _assignment_rows_read(*_lock_statement(monkeypatch, raters[0], campaign))
    assert walked >= 39  # every item they judged (but one the co-rater may share), a probe each
    assert windowed <= 2 * 2 * 3 + 2  # two halves, the counts 1 and 2, the windows; a margin


def test_a_lone_raters_lock_reads_only_the_comparisons_nobody_judged(
    researcher, raters, monkeypatch
):
    """A rater who made every judgment of the campaign (alone in it) holds every started
    comparison: their lock reads the range of unjudged ones only, none of their own items
    (PostgreSQL's row counts), and locks what the lock over every count would."""
    campaign = _lone_rater_campaign(researcher, raters, judged=40)
    sql, params = _lock_statement(monkeypatch, raters[0], campaign)
    assert "level0" in sql and "level1" not in sql
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        assert _assignment_rows_read(sql, params) <= 2 * 2  # two halves: a probe or two each
    read = rating_campaign(raters[0], campaign.pk)
    now = timezone.now()
    rng = random.Random(7)
    for _ in range(20):
        start = rng.randrange(2**candidates.SHUFFLE_KEY_BITS)
        new = _locked(raters[0], read, start, now, new_only=True)
        assert new and new == _locked(raters[0], read, start, now)
    # Once someone else judged, the started comparisons are read again.
    item = queue.next_assignment(raters[1], rating_campaign(raters[1], campaign.pk))
    queue.submit(raters[1], item.key, queue.Submission(1))
    sql, _ = _lock_statement(monkeypatch, raters[0], campaign)
    assert "level1" in sql and "level2" in sql


def test_counts_behind_the_judgments_still_hand_out_the_started_comparisons(researcher, raters):
    """Should the tallies miss others' judgments (rows written around the queue), the rater
    who seems alone finds no unjudged comparison and is handed the started ones at once."""
    campaign = factories.campaign(researcher, raters, n_scenarios=2, overlap=3, name="behind")
    while item := queue.next_assignment(raters[1], rating_campaign(raters[1], campaign.pk)):
        queue.submit(raters[1], item.key, queue.Submission(1))
    AnnotatorTally.objects.filter(annotator=raters[1]).delete()
    read = rating_campaign(raters[0], campaign.pk)
    assert judged_by_others(read) == 0
    handed = []
    while item := queue.next_assignment(raters[0], rating_campaign(raters[0], campaign.pk)):
        handed.append(item.comparison_id)
        queue.submit(raters[0], item.key, queue.Submission(1))
    assert sorted(handed) == sorted(campaign.comparisons.values_list("pk", flat=True))


def test_the_windowed_lock_hands_out_the_same_items(researcher, raters, monkeypatch):
    """With windows wider than the ranges, the windowed lock locks what the full one does, for
    any start; with narrow ones, only candidates the full one could lock; and a lone rater is
    handed every comparison once, the windows falling back to the full ranges at the end."""
    campaign = _lone_rater_campaign(researcher, raters, judged=20)
    campaign = rating_campaign(raters[1], campaign.pk)
    raters_item = queue.next_assignment(raters[1], campaign)  # a started one is locked
    queue.submit(raters[1], raters_item.key, queue.Submission(1))
    now = timezone.now()
    rng = random.Random(5)
    for _ in range(20):
        start = rng.randrange(2**candidates.SHUFFLE_KEY_BITS)
        full = _locked(raters[0], campaign, start, now)
        monkeypatch.setattr(candidates, "WINDOW", 1000)
        wide = _locked(raters[0], campaign, start, now, window=True)
        monkeypatch.setattr(candidates, "WINDOW", 2)
        narrow = _locked(raters[0], campaign, start, now, window=True)
        assert wide == full
        mine = set(
            Assignment.objects.filter(annotator=raters[0]).values_list("comparison", flat=True)
        )
        assert narrow and not set(narrow) & mine
    monkeypatch.setattr(candidates, "WINDOW", 2)
    monkeypatch.setattr(queue, "WINDOW_AFTER", 5)
    handed = []
    while item := queue.next_assignment(raters[0], rating_campaign(raters[0], campaign.pk)):
        handed.append(item.comparison_id)
        queue.submit(raters[0], item.key, queue.Submission(1))
    judged_before = Assignment.objects.filter(annotator=raters[0]).count() - len(handed)
    assert len(handed) == len(set(handed)) == 90 - judged_before
