"""The platform's core app. Deliberately empty: `h2htalk.stats` must import without Django or
Celery. The Celery app is created in `h2htalk.celery`, imported by `CoreConfig.ready()` so that
`@shared_task` binds to it in every process that sets Django up (web, commands, tests, worker
started with `celery -A h2htalk.celery worker`)."""
