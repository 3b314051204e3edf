"""Events of the rating path that other apps listen to (webhooks), without annotation knowing
them: `comparison_filled` (a comparison reached k counted judgments; sent inside the
submission's transaction, once per comparison) and `annotators_excluded` (new exclusions)."""

from django.dispatch import Signal

comparison_filled = Signal()  # campaign_id, comparison_id
annotators_excluded = Signal()  # campaign, usernames, reason
