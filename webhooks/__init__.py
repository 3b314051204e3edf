"""Signed webhooks: researchers' endpoints for events of their campaigns and releases, and the
deliveries (Celery tasks, retried with back-off, every attempt logged). See README "Webhooks"."""
