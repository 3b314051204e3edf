import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "h2htalk.settings")

app = Celery("h2htalk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
