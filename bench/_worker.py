"""One benchmark on one database, in its own process: `python -m bench._worker MODULE`.

The runner has already pointed DATABASE_URL at a fresh throwaway database. This sets Django up,
migrates it, runs the module and prints one line `BENCH-RESULT {json}` on stdout.
"""

import importlib
import json
import os
import sys
import time

RESULT_PREFIX = "BENCH-RESULT "


def main(module_name: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "h2htalk.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    name = settings.DATABASES["default"]["NAME"]
    throwaway = (
        str(name).startswith(os.environ["BENCH_TMPDIR"])
        if connection.vendor == "sqlite"
        else "bench" in str(name)
    )
    if not throwaway:
        raise SystemExit(f"refusing to run on {name}: not a throwaway bench database")

    start = time.perf_counter()
    call_command("migrate", verbosity=0, interactive=False)
    rows = [
        {
            "benchmark": "migrate (empty database)",
            "seconds": round(time.perf_counter() - start, 3),
        }
    ]
    module = importlib.import_module(f"bench.{module_name}")
    rows += module.run()
    print(RESULT_PREFIX + json.dumps({"vendor": connection.vendor, "rows": rows}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
