"""The figures of `python -m bench two_hosts` (bench/two_hosts.py): latency per phase and
host, CPU per cycle, the integrity checks, the release after the run, as text and as the
summary tests/test_two_hosts.py reads."""

from bench._common import percentile
from bench._hosts import Lab
from bench._two_hosts_campaign import Plan, World

# ---------------------------------------------------------------- figures


def phases(result: dict) -> list[tuple[str, float, float]]:
    events, end = result["events"], result["elapsed"]
    if not events:
        return [("whole run", 0.0, end)]
    return [
        ("before the kill", 0.0, events["kill"]),
        ("host B down", events["kill"], events["revive"]),
        ("after B's return", events["revive"], end),
    ]


def latency_table(result: dict, lab: Lab) -> list[dict]:
    rows = []
    samples = result["board"].samples
    for name, start, end in phases(result):
        for host in lab.hosts:
            for kind in ("next", "submit"):
                ms = [
                    m
                    for t, h, k, m in samples
                    if start <= t < end and h == host.index and k == kind
                ]
                if ms:
                    rows.append(
                        {
                            "phase": name,
                            "host": host.name,
                            "kind": kind,
                            "requests": len(ms),
                            "median_ms": round(percentile(ms, 50), 1),
                            "p95_ms": round(percentile(ms, 95), 1),
                        }
                    )
    return rows


def release_after(world: World, plan: Plan) -> dict:
    """A release of every companion (anchor the first), frozen and computed in child
    processes as the release job runs them; its slices computed and skipped."""
    from bench.release_bench import child_step
    from scoring.models import Release, ReleaseResult

    release = Release.objects.create(
        name="two hosts release",
        campaign=world.campaign,
        anchor=world.companions[0],
        seed=0,
        n_boot=plan.release_draws,
    )
    release.companions.set(world.companions)
    freeze = child_step("freeze", release.pk)
    compute = child_step("compute", release.pk)
    data = ReleaseResult.objects.get(release=release).data
    computed, skipped = [], []
    for name, block in _blocks(data):
        if "skipped" in block:
            skipped.append(f"{name}: {block['skipped']}")
        else:
            computed.append(name)
    return {"freeze": freeze, "compute": compute, "computed": computed, "skipped": skipped}


def _blocks(data: dict, path: str = ""):
    """Every fitted part of a release's numbers: dicts with a "votes" or "skipped" key."""
    if isinstance(data, dict):
        if "skipped" in data or ("votes" in data and "scenarios" in data):
            yield path, data
            return
        for key, value in data.items():
            yield from _blocks(value, f"{path}/{key}")


def report(plan: Plan, world: World, result: dict, release: dict | None, lab: Lab) -> str:
    lines = [*_heading(plan, world, result), *_latency_lines(result, lab)]
    lines.append(_cpu_line(result))
    lines.append(_integrity_line(result))
    if result["pool"] is not None:
        lines.append(_pool_line(plan, result))
    if result["still_running"]:
        lines.append(f"WARNING: {result['still_running']} annotator threads did not finish")
    if release:
        lines.append(_release_line(release))
    return "\n".join(lines)


def _heading(plan: Plan, world: World, result: dict) -> list[str]:
    """The world, the run's settings, the time building the world took, the load averages."""
    return [
        f"two hosts: {world.scenarios:,} scenarios × {len(world.companions)} companions = "
        f"{world.responses:,} responses, {world.comparisons:,} comparisons (overlap 3, "
        f"{world.seeded_votes:,} earlier votes), {plan.annotators} annotators at "
        f"{plan.pace[0]:g}–{plan.pace[1]:g} s per item for {result['elapsed']:.0f} s, "
        f"{plan.gunicorn_workers} sync gunicorn workers + 1 Celery worker per host",
        "world built: " + ", ".join(f"{k} {v:.0f} s" for k, v in world.build_seconds.items()),
        "loadavg: " + ", ".join(f"{k} {v}" for k, v in result["loads"].items()),
    ]


def _latency_lines(result: dict, lab: Lab) -> list[str]:
    """Latency per phase, host and kind, then the surviving host's p95 while B was down."""
    loads = result["loads"]
    lines = ["latency (ms, from connect to the last byte):"]
    for row in latency_table(result, lab):
        lines.append(
            f"  {row['phase']:<17} host {row['host']} {row['kind']:<6} n={row['requests']:>5} "
            f"median {row['median_ms']:>6.1f}  p95 {row['p95_ms']:>6.1f}"
        )
    survivor = [
        r for r in latency_table(result, lab) if r["phase"] == "host B down" and r["host"] == "A"
    ]
    if survivor:
        p95 = {r["kind"]: r["p95_ms"] for r in survivor}
        lines.append(
            f"surviving host while B was down: p95 next {p95.get('next')} ms, submit "
            f"{p95.get('submit')} ms (target ≤ 50); loadavg at the kill {loads.get('kill')}, "
            f"at B's return {loads.get('revive')}"
        )
    return lines


def _cpu_line(result: dict) -> str:
    loads = result["loads"]
    cycles = sum(1 for _, _, kind, _ in result["board"].samples if kind == "submit")
    cpu = result["cpu"]
    total = cpu["gunicorn"] + cpu["postgres"]
    return (
        f"CPU-ms per cycle: gunicorn {cpu['gunicorn'] / max(cycles, 1):.1f} + PostgreSQL "
        f"{cpu['postgres'] / max(cycles, 1):.1f} = {total / max(cycles, 1):.1f} over {cycles:,} "
        f"cycles ({cycles / result['elapsed']:.1f}/s; loadavg {loads['start']} → {loads['end']})"
    )


def _errors(raters) -> dict:
    """The annotators' error counts, added up by kind."""
    errors: dict = {}
    for rater in raters:
        for key, n in rater.errors.items():
            errors[key] = errors.get(key, 0) + n
    return errors


def _integrity_line(result: dict) -> str:
    board, checks = result["board"], result["integrity"]
    refused = sum(r.refused for r in result["raters"])
    errors = _errors(result["raters"])
    lost = len(board.unreachable)
    return (
        f"accepted {checks['accepted']:,} = stored {checks['stored']:,}: "
        f"{'yes' if checks['accepted'] == checks['stored'] else 'NO'}; over k: "
        f"{checks['over_k']} (judgment rows), {checks['counter_over_k']} (counter); refused "
        f"{refused}, errors {errors or 0}, requests to a dead host {lost}, annotators moved "
        f"{len(board.moved)}, items dropped with a dead page "
        f"{sum(len(r.dropped) for r in result['raters'])}; loadavg {result['loads']['end']}"
    )


def _pool_line(plan: Plan, result: dict) -> str:
    pool, end = result["pool"], result["handed_again"]
    return (
        f"items held by B's waiting annotators at the kill: {pool['held']}; after the "
        f"{plan.lease_minutes}-minute lease (B still down): {pool['expired']} leases "
        f"expired, {pool['free']} with a slot free again, {pool['filled_by_others']} "
        f"filled to k by others, {pool['leased_to_others']} with the slot leased to "
        f"another annotator (loadavg {result['loads'].get('pool')}); by the end "
        f"{end['handed_again']} handed to another annotator after the lease, "
        f"{end['filled_by_others']} filled to k without the held answer"
    )


def _release_line(release: dict) -> str:
    compute = release["compute"]
    return (
        f"release: freeze {release['freeze']['wall_s']:.1f} s wall / "
        f"{release['freeze']['cpu_s']:.1f} CPU-s; compute {compute['wall_s']:.1f} s wall / "
        f"{compute['cpu_s']:.1f} CPU-s (target ≤ 30 s), peak RSS "
        f"{compute['peak_mib']:,.0f} MiB; slices computed {len(release['computed'])}, "
        f"skipped {len(release['skipped'])}"
        + (f" ({'; '.join(release['skipped'])})" if release["skipped"] else "")
        + f"; loadavg {compute['load']}"
    )


def summarize(world: World, result: dict) -> dict:
    """The guarantees' figures, read from the database after the run."""
    from annotation.models import Judgment

    campaign = world.campaign
    errors = _errors(result["raters"])
    return {
        **result["integrity"],
        "comparisons": world.comparisons,
        "full": campaign.comparisons.filter(judgment_count__gte=campaign.overlap).count(),
        "judgments": Judgment.objects.filter(comparison__campaign=campaign).count(),
        "seeded_votes": world.seeded_votes,
        "pool": result["pool"],
        "end": result["handed_again"],
        "moved": len(result["board"].moved),
        "dropped": sum(len(r.dropped) for r in result["raters"]),
        "unreachable": len(result["board"].unreachable),
        "errors": errors,
        "still_running": result["still_running"],
    }
