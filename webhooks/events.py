"""The events an endpoint may subscribe to, and what triggers each (README "Webhooks")."""

from django.utils.translation import gettext_lazy as _

COMPARISONS_FILLED = "comparisons.filled"
CAMPAIGN_COMPLETED = "campaign.completed"
ANNOTATOR_FLAGGED = "annotator.flagged"
JOB_FAILED = "job.failed"
RELEASE_PUBLISHED = "release.published"

EVENTS = [
    (COMPARISONS_FILLED, _("Comparisons reached k judgments (batched)")),
    (CAMPAIGN_COMPLETED, _("Campaign completed (every regular comparison has k judgments)")),
    (ANNOTATOR_FLAGGED, _("Annotator flagged (monitoring flag or exclusion)")),
    (JOB_FAILED, _("Background job failed")),
    (RELEASE_PUBLISHED, _("Release published (its numbers computed)")),
]
NAMES = [name for name, _label in EVENTS]
# Events noticed by the campaign's batch task (webhooks.batching), which a filled comparison
# starts: the rating path asks only whether any endpoint wants one of them.
BATCHED = frozenset({COMPARISONS_FILLED, CAMPAIGN_COMPLETED, ANNOTATOR_FLAGGED})
