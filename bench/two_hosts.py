"""Two app hosts on one PostgreSQL and one Redis, at H2HTalk scale: `python -m bench two_hosts`.

Not run through the bench's per-backend worker: it makes its own world (bench/_hosts.py, needs
root): two network namespaces joined to this machine by veth pairs, a PostgreSQL cluster and a
redis-server of its own listening on loopback and the host side of the veths, and in each
namespace gunicorn (h2htalk.wsgi, BENCH_TWO_HOSTS_WORKERS sync workers, 3) and a Celery worker.
Its parts: bench/_two_hosts_campaign.py (the plan and the world built before the run),
bench/_two_hosts_driver.py (the annotators, the kill, the checks), bench/_two_hosts_report.py
(the figures).

The campaign: the 11 files of the H2HTalk release (4,589 scenarios, imported with the scenario
importer) × BENCH_TWO_HOSTS_COMPANIONS companions (50: 229,450 responses, bulk-inserted with
stored reference metrics, as release_bench), random pairing with BENCH_TWO_HOSTS_PAIRS pairs per
scenario (10: 45,890 comparisons), overlap 3, a lease of 1 minute, built by the campaign build
job on a host's Celery worker. Half of the comparisons (the first half of every scenario's)
already carry 3 votes of 30 earlier raters, counted as the queue counts them (tallies, rater
pairs), so that the release after the run has votes enough for every slice.

The run: BENCH_TWO_HOSTS_ANNOTATORS annotators (100), half on each host, each taking 4–8 s per
item (BENCH_TWO_HOSTS_PACE="4,8"), arriving over the first 8 s, for BENCH_TWO_HOSTS_SECONDS
(600). Midway host B's gunicorn and worker are killed (SIGKILL). B's annotators with an even
number move to host A at once (a submit that did not get through is sent there again, with
the same key); those with an odd number wait for B, and the item they were shown is left (a
page that died); B comes back after the lease plus 30 s. A submit whose answer was lost in the
kill is always sent again (submits are idempotent), so every accepted answer is known.

Figures (each with /proc/loadavg beside it): p95 of next and submit per host and phase (before
the kill, host A while B is down, both after); CPU-ms per cycle (utime + stime from /proc of the
gunicorn workers and of the PostgreSQL client backends, sampled every 2 s); accepted = stored;
comparisons over k (the judgment rows, not the counter); the items the waiting annotators held
when B died: lease expired and slot free again (judgments + live leases < k) before B returns,
and how many were handed to someone else afterwards; then a release of all companions frozen
and computed in a child process (release_bench.child_step), with its slices computed or skipped.
"""

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from bench._common import REPO, log
from bench._hosts import HTTP_PORT, Lab
from bench._two_hosts_campaign import Plan, build_world
from bench._two_hosts_driver import drive
from bench._two_hosts_report import release_after, report, summarize

OUT_DIR = Path(__file__).resolve().parent / "out"
RESULT_PREFIX = "TWO-HOSTS-RESULT "  # one line of JSON for tests/test_two_hosts.py


def main(argv: list[str] | None = None) -> int:
    if argv:  # settings come from the environment (the docstring's BENCH_TWO_HOSTS_*)
        print(__doc__)
        return 0 if argv[0] in ("-h", "--help") else 2
    plan = Plan.from_env()
    if plan.seconds < plan.down_seconds + 60:
        print(f"BENCH_TWO_HOSTS_SECONDS must be at least {plan.down_seconds + 60:.0f}")
        return 2
    started = datetime.now(UTC)
    with Lab(hosts=2, gunicorn_workers=plan.gunicorn_workers) as lab:
        os.environ.update(lab.host_env(None))  # this process: one more host, on loopback
        os.environ.pop("DJANGO_DEBUG", None)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        for host in lab.hosts:
            lab.start_host(host)
        log(f"hosts up: {', '.join(f'{h.name} {h.inner}:{HTTP_PORT}' for h in lab.hosts)}")
        world = build_world(plan, lab)
        log(f"driving {plan.annotators} annotators for {plan.seconds:.0f} s")
        result = drive(plan, lab, world)
        from django.db import connections

        connections.close_all()
        release = release_after(world, plan) if plan.release else None
        text = report(plan, world, result, release, lab)
        summary = summarize(world, result)
    print(text)
    print(RESULT_PREFIX + json.dumps(summary), flush=True)
    OUT_DIR.mkdir(exist_ok=True)
    path = OUT_DIR / f"two-hosts-{started:%Y%m%d-%H%M%S}.txt"
    path.write_text(text + "\n", encoding="utf-8")
    print(f"\n(also in {path.relative_to(REPO)})")
    checks = result["integrity"]
    return 0 if checks["accepted"] == checks["stored"] and checks["over_k"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
