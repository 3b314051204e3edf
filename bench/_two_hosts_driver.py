"""The run of `python -m bench two_hosts` (bench/two_hosts.py): the annotators' threads on
the two hosts, host B killed and brought back midway, the CPU sampled, and the checks read from
the database (held items back in the pool, accepted = stored, none over k)."""

import http.client
import json
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from bench._common import cpu_ms, loadavg, log
from bench._hosts import HTTP_PORT, Lab
from bench._two_hosts_campaign import Plan, World

# ---------------------------------------------------------------- annotators


class Unreachable(Exception):
    """The host did not answer; `sent`: the request may have reached it."""

    def __init__(self, sent: bool):
        super().__init__("sent" if sent else "not sent")
        self.sent = sent


def call(host, path: str, token: str, body: dict) -> tuple[int, bytes, float]:
    """One POST on a new connection (gunicorn's sync workers close each one), timed from
    the connect."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection(host.inner, HTTP_PORT, timeout=30)
    try:
        try:
            connection.connect()
        except OSError:
            raise Unreachable(sent=False) from None
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        try:
            connection.request("POST", path, body=json.dumps(body), headers=headers)
            response = connection.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException):
            raise Unreachable(sent=True) from None
    finally:
        connection.close()
    return response.status, payload, (time.perf_counter() - started) * 1000


class Board:
    """What the annotators share: the run's clock, which hosts are up, the samples."""

    def __init__(self, lab: Lab, deadline: float):
        self.lab, self.deadline = lab, deadline
        self.t0 = time.monotonic()
        self.up = {host.index: threading.Event() for host in lab.hosts}
        for event in self.up.values():
            event.set()
        self.lock = threading.Lock()
        self.samples: list[tuple] = []  # (t, host index, kind, ms)
        self.unreachable: list[tuple] = []  # (t, host index, kind, sent)
        self.moved = set()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def sample(self, host, kind: str, ms: float) -> None:
        with self.lock:
            self.samples.append((self.now(), host.index, kind, ms))


@dataclass
class Rater:
    number: int
    token: str
    home: int  # host index
    accepted: set = field(default_factory=set)
    refused: int = 0
    errors: dict = field(default_factory=dict)
    dropped: list = field(default_factory=list)  # keys shown on a page that died


def moves(rater: "Rater") -> bool:
    """On a dead host, every other annotator of it moves to another host; the rest wait."""
    return (rater.number // 2) % 2 == 0


def _next_key(board: Board, host, rater: Rater, campaign_id: int) -> str | None:
    """The key of the next item on `host`; None after a second's wait when there is none free
    now (204) or the host answered with an error (counted)."""
    status, payload, ms = call(host, f"/api/rate/campaigns/{campaign_id}/next/", rater.token, {})
    board.sample(host, "next", ms)
    if status == 200:
        return json.loads(payload)["key"]
    if status != 204:
        rater.errors[f"next {status}"] = rater.errors.get(f"next {status}", 0) + 1
    time.sleep(1)
    return None


def annotate(board: Board, rater: Rater, campaign_id: int, plan: Plan) -> None:
    """Next, think, submit, until the deadline; on an unreachable host, move to another one
    or wait for it to come back (`moves`)."""
    rng = random.Random(rater.token)
    hosts = board.lab.hosts
    host = hosts[rater.home]
    pending = None  # a key whose submit must be sent (again)
    time.sleep(rng.uniform(0, plan.arrival))

    def submit(key):
        body = {"preference": rng.choice([-2, -1, 0, 1, 2])}
        status, _, ms = call(host, f"/api/rate/assignments/{key}/submit/", rater.token, body)
        board.sample(host, "submit", ms)
        if status == 200:
            rater.accepted.add(key)
        elif status == 409:
            rater.refused += 1
        else:
            rater.errors[f"submit {status}"] = rater.errors.get(f"submit {status}", 0) + 1

    def other_host():
        nonlocal host
        if moves(rater):
            alive = [h for h in hosts if board.up[h.index].is_set()]
            host = alive[0] if alive else host
            board.moved.add(rater.number)
        else:
            board.up[host.index].wait(max(0.0, board.deadline - time.monotonic()) + 60)

    while time.monotonic() < board.deadline or pending:
        if time.monotonic() > board.deadline + 120:
            rater.errors["unresolved submit"] = 1  # its host never came back
            break
        try:
            if pending:
                submit(pending)
                pending = None
                continue
            key = _next_key(board, host, rater, campaign_id)
            if key is None:
                continue
            time.sleep(rng.uniform(*plan.pace))
            pending = key
            submit(key)
            pending = None
        except Unreachable as lost:
            with board.lock:
                board.unreachable.append((board.now(), host.index, lost.sent))
            if pending and not lost.sent and not moves(rater):
                rater.dropped.append(pending)  # the page died with the host: not sent again
                pending = None
            other_host()
            time.sleep(0.2)


# ---------------------------------------------------------------- CPU


class CpuSampler(threading.Thread):
    """utime + stime of the hosts' gunicorn workers and of the PostgreSQL client backends,
    every `every` seconds: a process counts from its first sample (a backend from 0: it
    started after the last one), its last sample stays when it dies."""

    def __init__(self, lab: Lab, every: float = 2.0):
        super().__init__(daemon=True)
        self.lab, self.every = lab, every
        self.stop_event = threading.Event()
        self.first: dict[tuple, float] = {}
        self.last: dict[tuple, float] = {}
        self.started_once = False

    def _backends(self, connection) -> list[int]:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
        return [pid for (pid,) in rows]

    def snapshot(self, connection) -> None:
        workers = [p for h in self.lab.hosts for p in self.lab.gunicorn_workers_of(h)]
        for kind, pids in (("gunicorn", workers), ("postgres", self._backends(connection))):
            for pid in pids:
                value = cpu_ms(pid)
                if value <= 0 and (kind, pid) not in self.last:
                    continue
                key = (kind, pid)
                if key not in self.first:
                    new = kind == "postgres" and self.started_once
                    self.first[key] = 0.0 if new else value
                self.last[key] = max(value, self.last.get(key, 0.0))
        self.started_once = True

    def totals(self) -> dict[str, float]:
        out = {"gunicorn": 0.0, "postgres": 0.0}
        for key, value in self.last.items():
            out[key[0]] += value - self.first[key]
        return out

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.lab.database_url(), autocommit=True) as connection:
            while not self.stop_event.is_set():
                self.snapshot(connection)
                self.stop_event.wait(self.every)
            self.snapshot(connection)


# ---------------------------------------------------------------- the run


def held_items(campaign, tokens: list[str]) -> list[tuple[int, int, datetime]]:
    """(assignment, comparison, lease end) of the live open items of these annotators."""
    from django.utils import timezone

    from annotation.models import Assignment

    return list(
        Assignment.objects.filter(
            comparison__campaign=campaign,
            annotator__auth_token__key__in=tokens,
            state=Assignment.State.OPEN,
            lease_expires_at__gt=timezone.now(),
        ).values_list("pk", "comparison_id", "lease_expires_at")
    )


def pool_check(campaign, held) -> dict:
    """Of the held items (their annotators gone, none answered): leases expired, and what
    their comparisons look like without them: a slot free (others' judgments + live leases
    < k) or filled to k by others, which the dead lease's slot would have prevented."""
    from django.db.models import Count, Q
    from django.utils import timezone

    from annotation.models import Assignment, Comparison

    now = timezone.now()
    expired = Assignment.objects.filter(
        pk__in=[pk for pk, _, _ in held], state=Assignment.State.OPEN, lease_expires_at__lte=now
    ).count()
    live = Count(
        "assignments",
        filter=Q(assignments__state=Assignment.State.OPEN, assignments__lease_expires_at__gt=now),
    )
    comparisons = Comparison.objects.filter(pk__in=[c for _, c, _ in held]).annotate(live=live)
    k = campaign.overlap
    full = sum(c.judgment_count >= k for c in comparisons)
    free = sum(c.judgment_count + c.live < k for c in comparisons)
    return {
        "held": len(held),
        "expired": expired,
        "free": free,
        "filled_by_others": full,
        # judgments + others' live leases = k: the held slot went to someone who holds it now
        "leased_to_others": len(comparisons) - full - free,
    }


def handed_again(held, overlap: int) -> dict:
    """Held comparisons handed to another annotator after the held lease ended, and those
    filled to k by others' judgments (the held item unanswered)."""
    from annotation.models import Assignment, Judgment

    again = filled = 0
    for pk, comparison, lease_end in held:
        again += (
            Assignment.objects.filter(comparison_id=comparison, issued_at__gte=lease_end)
            .exclude(pk=pk)
            .exists()
        )
        others = Judgment.objects.filter(comparison_id=comparison).exclude(assignment_id=pk)
        filled += others.count() >= overlap
    return {"handed_again": again, "filled_by_others": filled}


def integrity(campaign, accepted: int, stored_before: int) -> dict:
    from django.db.models import Count

    from annotation.models import Judgment

    judgments = Judgment.objects.filter(comparison__campaign=campaign)
    stored = judgments.count() - stored_before
    over_k = (
        judgments.values("comparison").annotate(n=Count("pk")).filter(n__gt=campaign.overlap)
    ).count()
    counter_over_k = campaign.comparisons.filter(judgment_count__gt=campaign.overlap).count()
    return {
        "accepted": accepted,
        "stored": stored,
        "over_k": over_k,
        "counter_over_k": counter_over_k,
    }


def drive(plan: Plan, lab: Lab, world: World, kill: bool = True) -> dict:
    """The annotators for plan.seconds; host B killed at plan.kill_at, back down_seconds
    later. Returns the samples, phases and figures."""
    from annotation.models import Judgment

    campaign = world.campaign
    stored_before = Judgment.objects.filter(comparison__campaign=campaign).count()
    board = Board(lab, time.monotonic() + plan.seconds)
    raters = [Rater(n, token, n % len(lab.hosts)) for n, token in enumerate(world.tokens)]
    threads = [
        threading.Thread(target=annotate, args=(board, r, campaign.pk, plan), daemon=True)
        for r in raters
    ]
    sampler = CpuSampler(lab)
    sampler.start()
    loads = {"start": loadavg()}
    for thread in threads:
        thread.start()
    events = {}
    pool = held = None
    if kill:
        held, pool = kill_and_revive(plan, lab, board, raters, campaign, events, loads)
    for thread in threads:
        thread.join(plan.seconds + 180)
    elapsed = board.now()
    sampler.stop_event.set()
    sampler.join(30)
    loads["end"] = loadavg()
    accepted = sum(len(r.accepted) for r in raters)
    checks = integrity(campaign, accepted, stored_before)
    return {
        "board": board,
        "raters": raters,
        "events": events,
        "loads": loads,
        "elapsed": elapsed,
        "cpu": sampler.totals(),
        "integrity": checks,
        "pool": pool,
        "held": held,
        "handed_again": handed_again(held, campaign.overlap) if held else None,
        "still_running": sum(t.is_alive() for t in threads),
    }


def kill_and_revive(plan: Plan, lab: Lab, board: Board, raters, campaign, events, loads):
    """Host B killed at plan.kill_at, its waiting annotators' items checked after their lease,
    B started again down_seconds after the kill; events and loads filled in on the way.
    Returns the held items and their pool check."""
    victim = lab.hosts[1]
    waiting = [r.token for r in raters if r.home == victim.index and not moves(r)]
    _sleep_until(board, plan.kill_at)
    board.up[victim.index].clear()
    lab.kill_host(victim)
    events["kill"] = board.now()
    loads["kill"] = loadavg()
    held = held_items(campaign, waiting)
    log(
        f"t={events['kill']:.0f} s: host {victim.name} killed; its waiting annotators "
        f"hold {len(held)} items (loadavg {loads['kill']})"
    )
    _sleep_until(board, plan.kill_at + plan.lease_minutes * 60 + 15)
    pool = pool_check(campaign, held)
    loads["pool"] = loadavg()
    log(f"t={board.now():.0f} s: held items {pool} (loadavg {loads['pool']})")
    _sleep_until(board, plan.kill_at + plan.down_seconds)
    lab.start_host(victim)
    board.up[victim.index].set()
    events["revive"] = board.now()
    loads["revive"] = loadavg()
    log(f"t={events['revive']:.0f} s: host {victim.name} back (loadavg {loads['revive']})")
    return held, pool


def _sleep_until(board: Board, t: float) -> None:
    time.sleep(max(0.0, t - board.now()))
