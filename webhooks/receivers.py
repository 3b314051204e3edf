"""Where the events come from: signals of the apps below (they do not know this app)."""

from django.dispatch import receiver

from annotation.signals import annotators_excluded, comparison_filled
from h2htalk.jobs import campaign_of
from h2htalk.models import Job
from h2htalk.signals import job_failed
from scoring.releases.signals import release_published

from . import batching, events, payloads
from .dispatch import emit


@receiver(comparison_filled)
def on_comparison_filled(sender, campaign_id, comparison_id, **kwargs):
    batching.comparison_filled(campaign_id, comparison_id)


@receiver(annotators_excluded)
def on_annotators_excluded(sender, campaign, usernames, reason, **kwargs):
    for username in usernames:
        batching.announce_flag(campaign, username, reason, "exclusion")


@receiver(job_failed)
def on_job_failed(sender, job_id, **kwargs):
    from annotation.models import Campaign

    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        return
    campaign_id = campaign_of(job)
    campaign = Campaign.objects.filter(pk=campaign_id).first() if campaign_id else None
    emit(
        events.JOB_FAILED,
        campaign.pk if campaign else None,
        payloads.job_failed(job, campaign),
        owner_id=job.created_by_id,
    )


@receiver(release_published)
def on_release_published(sender, release, **kwargs):
    emit(events.RELEASE_PUBLISHED, release.campaign_id, payloads.release_published(release))
