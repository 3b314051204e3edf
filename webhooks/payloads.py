"""The `data` of each event (README "Webhooks" documents the schema). Ids, names and links to
the pages; no judgment, vote or response text leaves the platform this way."""

from django.conf import settings
from django.urls import reverse


def link(name: str, *args) -> str:
    return settings.SITE_URL.rstrip("/") + reverse(name, args=args)


def campaign(campaign) -> dict:
    return {
        "id": campaign.pk,
        "name": campaign.name,
        "state": campaign.state,
        "k": campaign.overlap,
        "url": link("campaigns:detail", campaign.pk),
    }


def comparisons_filled(campaign_row, comparison_ids: list[int], remaining: int) -> dict:
    return {
        "campaign": campaign(campaign_row),
        "comparisons": comparison_ids,
        "count": len(comparison_ids),
        "remaining": remaining,
    }


def campaign_completed(campaign_row, comparisons: int) -> dict:
    return {"campaign": campaign(campaign_row), "comparisons": comparisons}


def annotator_flagged(campaign_row, annotator: str, reason: str, source: str) -> dict:
    return {
        "campaign": campaign(campaign_row),
        "annotator": annotator,
        "reason": reason,
        "source": source,
    }


def job_failed(job, campaign_row=None) -> dict:
    return {
        "job": {
            "id": job.pk,
            "kind": job.kind,
            "message": job.message,
            "attempts": job.attempts,
            "url": link("job_detail", job.pk),
        },
        "campaign": campaign(campaign_row) if campaign_row else None,
    }


def release_published(release) -> dict:
    return {
        "release": {
            "id": release.pk,
            "name": release.name,
            "fingerprint": release.fingerprint,
            "url": link("releases:detail", release.pk),
        },
        "campaign": campaign(release.campaign),
    }
