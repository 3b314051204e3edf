"""Project-wide events other apps listen to (webhooks): `job_failed` (job_id), sent once a
job's failure is recorded, by its executor (`jobs.finish`) or by the sweeper."""

from django.dispatch import Signal

job_failed = Signal()  # job_id
