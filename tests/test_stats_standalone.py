"""The pure statistics (h2htalk.stats) import without Django or Celery, and the Celery app is
still the one `@shared_task` binds to once Django is set up (it is no longer created by
h2htalk/__init__.py but by CoreConfig.ready)."""

import json
import pkgutil

import h2htalk.stats
from tests.test_settings import run

STATS_MODULES = sorted(  # the modules inside the packages (agreement, calibration) too
    module.name for module in pkgutil.walk_packages(h2htalk.stats.__path__, "h2htalk.stats.")
)


def test_every_stats_module_is_found():
    assert {
        "h2htalk.stats.agreement",
        "h2htalk.stats.agreement.krippendorff_alpha",
        "h2htalk.stats.calibration.cross_validation",
        "h2htalk.stats.bradley_terry",
    } <= set(STATS_MODULES)
    assert len(STATS_MODULES) >= 7


def test_stats_import_without_django_or_celery():
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in STATS_MODULES)
        + "loaded = sorted(m for m in ('django', 'celery', 'kombu') if m in sys.modules)\n"
        + "assert not loaded, f'h2htalk.stats pulled in {loaded}'\n"
    )
    result = run(code)  # no DJANGO_SETTINGS_MODULE, SECRET_KEY or broker in the environment
    assert result.returncode == 0, result.stderr


def test_stats_modules_hold_no_simulators():
    code = (
        "import importlib, json\n"
        f"names = {STATS_MODULES!r}\n"
        "print(json.dumps([f'{n}.{a}' for n in names for a in dir(importlib.import_module(n))"
        " if a.startswith('simulate')]))\n"
    )
    result = run(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_shared_tasks_bind_to_the_project_app_after_django_setup():
    code = (
        "import json, os\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'h2htalk.settings'\n"
        "import django\n"
        "django.setup()\n"
        "from annotation.tasks import run_campaign_build\n"
        "app = run_campaign_build.app\n"
        "print(json.dumps({'main': app.main, 'broker': app.conf.broker_url,"
        " 'queue': app.conf.task_default_queue}))\n"
    )
    result = run(
        code,
        SECRET_KEY="x",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/13",
        CELERY_TASK_DEFAULT_QUEUE="standalone-check",
    )
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values == {
        "main": "h2htalk",
        "broker": "redis://127.0.0.1:6379/13",
        "queue": "standalone-check",
    }
