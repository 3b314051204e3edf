"""Background work of the campaign pages: building a campaign's comparisons as a tracked Job."""

from celery import shared_task
from django.db import transaction
from django.utils.translation import gettext, gettext_lazy, ngettext

from h2htalk import jobs
from h2htalk.models import Job, State

from .models import Campaign, Comparison
from .pairing import available_responses, build_comparisons, choose_pairs
from .progress import recount

BUILD_KIND = "campaign_build"
STEPS = 3
NO_COMPARISONS = gettext_lazy(
    "0 comparisons: these scenarios have no responses from two of the chosen companions in "
    "the chosen runs. Edit the campaign's scenarios, companions or runs, or import responses, "
    "then rebuild."
)


def designed_pairs(campaign: Campaign) -> set[tuple[int, int]]:
    """(response_a id, response_b id) of every comparison the current settings call for.

    The same choice build_comparisons makes (same responses, same seeded pairing).
    """
    responses = available_responses(campaign)
    by_scenario = {s: sorted(c) for s, c in responses.items() if len(c) >= 2}
    triples = choose_pairs(
        by_scenario, campaign.pairing, campaign.pairs_per_scenario, campaign.seed
    )
    return {(responses[s][low], responses[s][high]) for s, low, high in triples}


def prune_comparisons(campaign: Campaign) -> int:
    """Delete the comparisons the settings no longer call for, unless they have judgments.

    Used after an edit of the pairing settings (allowed only before the first judgment). Gold
    marks on comparisons that stay are kept. The rows are locked first, and only unjudged ones
    deleted, so a vote submitted meanwhile (submit locks the same row) is never lost.
    """
    if campaign.pairing == Campaign.Pairing.FIXED:
        return 0
    wanted = designed_pairs(campaign)
    stale = [
        pk
        for pk, a, b in campaign.comparisons.values_list("pk", "response_a_id", "response_b_id")
        if (a, b) not in wanted
    ]
    removed = 0
    for start in range(0, len(stale), 1000):
        with transaction.atomic():
            locked = list(
                Comparison.objects.select_for_update()
                .filter(pk__in=stale[start : start + 1000], judgment_count=0)
                .values_list("pk", flat=True)
            )
            removed += (
                Comparison.objects.filter(pk__in=locked).delete()[1].get(Comparison._meta.label, 0)
            )
    recount(campaign)  # their items went with them
    return removed


@shared_task
def run_campaign_build(job_id: int) -> None:
    """Create the campaign's comparisons (idempotent); with params.reset, prune stale ones first."""
    job = jobs.start(job_id)
    params = job.params
    try:
        campaign = Campaign.objects.get(pk=params["campaign_id"])
        removed = 0
        if params.get("reset"):
            jobs.report_progress(job_id, 0, STEPS, "removing comparisons the settings dropped")
            removed = prune_comparisons(campaign)
        jobs.report_progress(job_id, 1, STEPS, "pairing responses and creating comparisons")
        created = build_comparisons(campaign, incremental=not params.get("reset"))
        total = campaign.comparisons.count()
        jobs.report_progress(job_id, STEPS, STEPS, "done")
    except Exception as error:
        jobs.finish(job_id, State.FAILED, f"{type(error).__name__}: {error}")
        raise
    result = {"campaign_id": campaign.pk, "created": created, "removed": removed, "total": total}
    if total == 0:  # a campaign with nothing to rate: the build did not do its job
        jobs.finish(job_id, State.FAILED, str(NO_COMPARISONS), result)
        return
    message = ngettext(
        "%(created)s new comparison, %(total)s in the campaign",
        "%(created)s new comparisons, %(total)s in the campaign",
        created,
    ) % {"created": created, "total": total}
    if removed:
        message += gettext("; %(n)s no longer called for were removed") % {"n": removed}
    jobs.finish(job_id, State.COMPLETED, message, result)


# Re-run by h2htalk.sweeper after a lost worker: a build is idempotent (and one bulk insert).
jobs.register(BUILD_KIND, run_campaign_build)


def queue_build(campaign: Campaign, user, reset: bool = False) -> Job:
    """A campaign_build Job, handed to a worker once the current transaction commits."""
    job = Job.objects.create(
        kind=BUILD_KIND,
        created_by=user,
        params={"campaign_id": campaign.pk, "campaign": campaign.name, "reset": reset},
    )
    transaction.on_commit(lambda: run_campaign_build.delay(job.pk))
    return job
