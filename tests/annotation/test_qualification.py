"""Qualification: the phase function, the pass rule and retries, the gate before the queue,
the drift watch and its refresher, and practice answers kept out of every number."""

import numpy as np
import pandas as pd
import pytest

from annotation import queue
from annotation.models import Judgment, PracticeAnswer, QualificationEvent, QualificationRule
from annotation.monitoring import load_judgments
from annotation.qualification import Phase, phase, practice
from annotation.qualification.phases import standing
from annotation.qualification.watch import consensus_agreement
from h2htalk.stats.agreement.annotators import loo_consensus
from scoring.agreement.services import judgment_state, judgments_frame
from scoring.metrics.features import _human_judgments
from scoring.releases.freezing import counted_judgments
from tests.annotation import factories
from tests.annotation.qualification_setup import (
    expected_screen,
    qualification_campaign,
    wrong_screen,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


def work_through(campaign, user, right: bool | list[bool]) -> practice.Turn:
    """Answer every item of the current attempt (right or wrong, per item)."""
    n = 0
    while True:
        turn = practice.turn(campaign, user)
        if turn.answer is None:
            return turn
        ok = right[n] if isinstance(right, list) else right
        key = turn.answer.key
        practice.answer(campaign, user, key, expected_screen(key) if ok else wrong_screen(key))
        n += 1


def test_phase_is_not_required_without_qualification_and_costs_no_query(
    researcher, raters, django_assert_num_queries
):
    campaign = factories.campaign(researcher, raters, n_scenarios=2)
    with django_assert_num_queries(0):
        assert phase(campaign, raters[0]) == "not_required"


def test_an_annotator_qualifies_before_the_queue_hands_out_anything(researcher, raters):
    campaign = qualification_campaign(researcher, raters, min_accuracy=1.0)
    assert phase(campaign, raters[0]) == "qualifying"
    with pytest.raises(queue.NotAdmitted) as refused:
        queue.next_assignment(raters[0], campaign)
    assert refused.value.phase == "qualifying"
    turn = work_through(campaign, raters[0], right=True)
    assert turn.standing.phase == phase(campaign, raters[0]) == Phase.ADMITTED
    assert queue.next_assignment(raters[0], campaign) is not None
    kinds = list(
        QualificationEvent.objects.filter(annotator=raters[0]).values_list("kind", flat=True)
    )
    assert kinds == ["started", "passed"]


def test_a_failed_attempt_may_be_retried_then_fails_for_good(researcher, raters):
    campaign = qualification_campaign(researcher, raters, min_accuracy=0.6, attempts=2)
    user = raters[0]
    turn = work_through(campaign, user, right=[True, False, False])
    assert turn.standing.phase == "qualifying" and turn.standing.can_retry
    assert turn.standing.last_attempt.correct == 1 and turn.standing.last_attempt.passed is False
    with pytest.raises(queue.NotAdmitted):
        queue.next_assignment(user, campaign)
    practice.retry(campaign, user)
    turn = work_through(campaign, user, right=False)
    assert phase(campaign, user) == "failed" and not turn.standing.can_retry
    with pytest.raises(practice.PracticeError):
        practice.retry(campaign, user)
    with pytest.raises(queue.NotAdmitted) as refused:
        queue.next_assignment(user, campaign)
    assert refused.value.phase == "failed"


def test_without_retries_one_failed_attempt_is_final(researcher, raters):
    campaign = qualification_campaign(researcher, raters, min_accuracy=0.5, attempts=1)
    work_through(campaign, raters[0], right=False)
    assert phase(campaign, raters[0]) == "failed"
    assert "0 of 3 answers were the expected one" in standing(campaign, raters[0]).reason


def test_the_direction_rule_is_applied_when_set(researcher, raters):
    campaign = qualification_campaign(researcher, raters, min_accuracy=0.0, min_direction=1.0)
    user = raters[0]
    turn = practice.turn(campaign, user)
    while turn.answer is not None:  # the right direction, never the known strength
        key = turn.answer.key
        right = expected_screen(key)
        practice.answer(campaign, user, key, {2: 1, 1: 2, -2: -1, -1: -2, 0: 0}[right])
        turn = practice.turn(campaign, user)
    attempt = turn.standing.last_attempt
    assert attempt.same_direction == 3 and attempt.passed
    assert phase(campaign, user) == "admitted"


def test_an_answer_is_stored_once_and_sides_are_drawn_per_answer(researcher, raters):
    campaign = qualification_campaign(researcher, raters)
    layouts = set()
    for user in raters:
        turn = practice.turn(campaign, user)
        first = practice.answer(campaign, user, turn.answer.key, 2)
        again = practice.answer(campaign, user, turn.answer.key, -2)
        assert again.screen_preference == first.screen_preference == 2
        assert first.preference == (2 if first.left_is_a else -2)
        layouts.update(
            PracticeAnswer.objects.filter(attempt__annotator=user).values_list(
                "left_is_a", flat=True
            )
        )
    assert layouts == {True, False}


def test_someone_elses_practice_item_is_not_found(researcher, raters):
    campaign = qualification_campaign(researcher, raters)
    key = practice.turn(campaign, raters[0]).answer.key
    with pytest.raises(practice.NotYours):
        practice.answer(campaign, raters[1], key, 0)


def admit(campaign, user):
    work_through(campaign, user, right=True)
    assert phase(campaign, user) == "admitted"


def judge(campaign, user, wrong_gold: bool) -> Judgment:
    assignment = queue.next_assignment(user, campaign)
    comparison = assignment.comparison
    preference = 0
    if comparison.is_gold:
        shown_gold = comparison.gold_preference * (1 if assignment.left_is_a else -1)
        preference = -shown_gold if wrong_gold else shown_gold
    return queue.submit(user, assignment.key, queue.Submission(screen_preference=preference))


def test_gold_accuracy_drifting_below_the_threshold_sends_to_the_refresher(researcher, raters):
    campaign = qualification_campaign(
        researcher,
        raters,
        n_gold=4,
        gold_share=1.0,
        min_gold_accuracy=0.7,
        min_in_window=2,
        window=5,
    )
    user = raters[0]
    admit(campaign, user)
    judge(campaign, user, wrong_gold=True)
    assert phase(campaign, user) == "admitted"  # one gold vote: under min_in_window
    judge(campaign, user, wrong_gold=True)
    assert phase(campaign, user) == "refresher"
    paused = QualificationEvent.objects.get(annotator=user, kind="paused")
    assert paused.data["measure"] == "gold" and paused.data["value"] == 0 and paused.data["n"] == 2
    with pytest.raises(queue.NotAdmitted) as refused:
        queue.next_assignment(user, campaign)
    assert refused.value.phase == "refresher"
    turn = practice.turn(campaign, user)
    assert turn.answer.item.practice_set == "refresher" and turn.total == 2
    work_through(campaign, user, right=True)
    assert phase(campaign, user) == "admitted"
    # The window starts again at the new admission: the old wrong votes no longer count.
    judge(campaign, user, wrong_gold=False)
    assert phase(campaign, user) == "admitted"
    kinds = list(QualificationEvent.objects.filter(annotator=user).values_list("kind", flat=True))
    assert kinds == ["started", "passed", "paused", "started", "passed"]


def test_without_a_refresher_set_the_watch_does_not_pause(researcher, raters):
    campaign = qualification_campaign(
        researcher,
        raters,
        n_refresher=0,
        n_gold=4,
        gold_share=1.0,
        min_gold_accuracy=0.9,
        min_in_window=1,
    )
    admit(campaign, raters[0])
    judge(campaign, raters[0], wrong_gold=True)
    assert phase(campaign, raters[0]) == "admitted"


def test_consensus_drift_pauses_an_annotator_who_keeps_disagreeing(researcher, raters):
    campaign = qualification_campaign(
        researcher, raters, n_gold=0, min_consensus=0.5, min_in_window=2, window=10
    )
    campaign.overlap = 3
    campaign.save()
    QualificationRule.objects.filter(campaign=campaign).update(min_consensus=0.5)
    for user in raters:
        admit(campaign, user)
    # Two raters say "A much better" on every item they get first; the third says the opposite.
    shown = {}
    for _ in range(3):
        for user in raters[:2]:
            assignment = queue.next_assignment(user, campaign)
            shown[(user.pk, assignment.comparison_id)] = assignment
            prefers_a = -2 if assignment.left_is_a else 2
            queue.submit(user, assignment.key, queue.Submission(screen_preference=prefers_a))
    done = 0
    while phase(campaign, raters[2]) == "admitted" and done < 12:
        assignment = queue.next_assignment(raters[2], campaign)
        if assignment is None:
            break
        prefers_b = 2 if assignment.left_is_a else -2
        queue.submit(raters[2], assignment.key, queue.Submission(screen_preference=prefers_b))
        done += 1
    assert phase(campaign, raters[2]) == "refresher"
    event = QualificationEvent.objects.get(annotator=raters[2], kind="paused")
    assert event.data["measure"] == "consensus" and event.data["value"] == 0.0
    assert phase(campaign, raters[0]) == phase(campaign, raters[1]) == "admitted"


def test_the_window_consensus_is_the_monitoring_pages_rule():
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "comparison": rng.integers(0, 25, 400),
            "annotator": rng.integers(0, 6, 400),
            "preference": rng.integers(-2, 3, 400),
        }
    ).drop_duplicates(["comparison", "annotator"])
    expected = loo_consensus(frame, unit="comparison")["agrees"].groupby(frame["annotator"])
    for annotator, group in frame.groupby("annotator"):
        own = dict(zip(group["comparison"], group["preference"], strict=True))
        rest = frame[frame["annotator"] != annotator]
        others = rest.groupby("comparison")["preference"].apply(list).to_dict()
        value, n = consensus_agreement(own, others)
        agrees = expected.get_group(annotator).dropna()
        assert n == len(agrees)
        assert value == pytest.approx(agrees.mean())


def test_practice_answers_change_no_input_of_agreement_calibration_or_releases(researcher, raters):
    campaign = qualification_campaign(researcher, raters, n_gold=0, attempts=3)
    for user in raters[:2]:
        admit(campaign, user)
        for _ in range(3):
            judge(campaign, user, wrong_gold=False)
    companions = list(campaign.companions.values_list("pk", flat=True))

    def inputs():
        return (
            judgment_state(campaign),
            judgments_frame(campaign).to_json(),
            load_judgments(campaign).to_json(),
            _human_judgments(campaign)[0].to_json(),
            repr(counted_judgments(campaign, companions)),
        )

    before = inputs()
    work_through(campaign, raters[2], right=False)  # practice answers, a failed attempt
    practice.retry(campaign, raters[2])
    work_through(campaign, raters[2], right=True)
    assert PracticeAnswer.objects.filter(attempt__annotator=raters[2]).count() == 6
    assert inputs() == before
