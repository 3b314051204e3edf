"""A campaign that requires qualification, with practice items chosen from its comparisons:
shared by the qualification tests (service, pages, API, browser)."""

from annotation.models import Campaign, PracticeItem, QualificationRule
from annotation.qualification.models import PracticeAnswer, PracticeSet
from tests.annotation import factories

EXPLANATION = "The warmer reply names the feeling before it offers a plan."


def qualification_campaign(owner, raters, n_items=3, n_refresher=2, n_gold=2, **rule):
    """An open campaign (6 scenarios, 3 companions, k=2) requiring qualification; the first
    comparisons become qualification items, the next refresher items (each with a known
    answer and an explanation), and `n_gold` further ones gold."""
    campaign = factories.campaign(
        owner,
        raters,
        n_scenarios=6,
        overlap=2,
        name=rule.pop("name", "Practice study"),
        requires_qualification=True,
        gold_share=rule.pop("gold_share", 0.0),
    )
    QualificationRule.objects.create(campaign=campaign, **rule)
    comparisons = list(campaign.comparisons.order_by("pk"))
    knowns = [-2, 1, 0, 2, -1, 1, -2]
    for n, comparison in enumerate(comparisons[: n_items + n_refresher]):
        PracticeItem.objects.create(
            campaign=campaign,
            practice_set=PracticeSet.QUALIFICATION if n < n_items else PracticeSet.REFRESHER,
            scenario=comparison.scenario,
            response_a=comparison.response_a,
            response_b=comparison.response_b,
            known_preference=knowns[n % len(knowns)],
            explanation=f"{EXPLANATION} (item {n + 1})",
        )
    gold = comparisons[-n_gold:] if n_gold else []
    for comparison in gold:
        comparison.is_gold, comparison.gold_preference = True, -1
        comparison.save()
    return Campaign.objects.get(pk=campaign.pk)


def expected_screen(key) -> int:
    """The known answer of a practice item as its annotator sees it (screen terms)."""
    answer = PracticeAnswer.objects.select_related("item").get(key=key)
    known = answer.item.known_preference
    return known if answer.left_is_a else -known


def wrong_screen(key) -> int:
    """An answer pointing the other way (a tie known answer gets 'A much better')."""
    right = expected_screen(key)
    return -right if right else -2
