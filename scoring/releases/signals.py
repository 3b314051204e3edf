"""`release_published` (release): a release's numbers were computed and stored for the first
time (its state became ready); listened to by webhooks."""

from django.dispatch import Signal

release_published = Signal()  # release
