from celery import shared_task

from annotation.models import Campaign
from h2htalk import jobs
from h2htalk.models import Job

from . import agreement


@shared_task
def compute_agreement(job_id: int) -> None:
    job = jobs.start(job_id)
    campaign = Campaign.objects.get(pk=job.params["campaign"])
    state = agreement.fingerprint(campaign)
    try:
        data = agreement.compute_report(
            campaign,
            progress=lambda done, total, step: jobs.report_progress(job_id, done, total, step),
        )
    except Exception as error:
        jobs.finish(job_id, Job.State.FAILED, f"{type(error).__name__}: {error}")
        raise
    report = agreement.store_report(campaign, data, state)
    jobs.finish(job_id, Job.State.SUCCEEDED, "agreement computed", {"report": report.pk})
