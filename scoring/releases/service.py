"""Benchmark releases as the pages, the API and the commands use them: creating, freezing,
computing and checking a release, and the background job for large ones.

`compute` first checks that every frozen input is still in the database unchanged
(scoring.releases.verifying, refusing with what changed or was deleted), then computes from the
frozen ids only (scoring.releases.data.load_data → scoring.releases.computing.compute_results,
pure) and stores the numbers as JSON with the code version (h2htalk.provenance.code_version).
`check` recomputes and compares the canonical JSON with the stored one, bit for bit.
"""

import contextlib
import json
import time
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from annotation.models import Judgment
from h2htalk import stats
from h2htalk.models import Job
from h2htalk.params import parse_int
from h2htalk.provenance import canonical, code_version, sha256_text
from scoring.metrics import jobs as metric_jobs
from scoring.models import CalibratedJudge, Release, ReleaseResult
from scoring.releases.errors import InputsChanged, ReleaseError
from scoring.releases.freezing import (
    candidate_responses,
    check_choices,
    fingerprint_of,
    freeze,
)
from scoring.releases.signals import release_published
from scoring.releases.verifying import verify

KIND = "release_compute"
# The stages a release job reports (stored in English, shown translated: h2htalk.jobs).
VERIFYING = gettext_noop("checking the frozen inputs against the database")
LOADING = gettext_noop("loading the frozen votes, responses and metrics")
COMPUTING = gettext_noop("computing the numbers (bootstrap)")
JUDGE_STAGE = gettext_noop("scoring pairs with the judge")
INLINE_RESPONSES = 3_000  # more responses (or judgments) than this: a background job
INLINE_JUDGMENTS = 20_000


def create_release(
    *,
    name: str,
    campaign,
    anchor,
    companions=None,
    judge: CalibratedJudge | None = None,
    seed: int = 0,
    n_boot: int = stats.N_BOOT,
    style_control: bool = False,
    description: str = "",
    user=None,
    is_demo: bool = False,
    compute_now: bool | None = None,
) -> Release:
    """Create a release and freeze + compute it: inline for small ones (or compute_now=True),
    as a background job for large ones (compute_now=None decides), not at all when False."""
    chosen = check_choices(campaign, companions, anchor, judge)
    with transaction.atomic():
        release = Release.objects.create(
            name=name,
            description=description,
            campaign=campaign,
            anchor=anchor,
            judge=judge,
            seed=seed,
            n_boot=n_boot,
            style_control=style_control,
            is_demo=is_demo,
            created_by=user,
        )
        release.companions.set(chosen)
    return start(release, user, compute_now)


def start(release: Release, user, compute_now: bool | None) -> Release:
    """Freeze and compute a new release (or version): inline when compute_now (None: when small,
    else as a background job; False: not at all)."""
    if compute_now is None:
        compute_now = not needs_job(release)
        if not compute_now:
            from scoring.tasks import queue_release_job  # the tasks module imports this one

            with transaction.atomic():
                queue_release_job(release, user)
            return release
    if compute_now:
        with contextlib.suppress(ReleaseError):  # the release records it (FAILED, message)
            compute(release)
    return release


def estimate_size(release: Release) -> tuple[int, int]:
    """(responses, judgments) a release will freeze, roughly (for inline vs job)."""
    ids = list(release.companions.values_list("pk", flat=True))
    responses = candidate_responses(release.campaign, ids).count()
    judgments = Judgment.objects.filter(comparison__campaign=release.campaign).count()
    return responses, judgments


def needs_job(release: Release) -> bool:
    responses, judgments = estimate_size(release)
    return responses > INLINE_RESPONSES or judgments > INLINE_JUDGMENTS


def freeze_release(release: Release, progress=None) -> None:
    """Compute missing reference metrics of the candidate responses (of the calibrated judge's
    metrics profile when the release has one and none are stored, else of the profile of those
    stored), then freeze the inputs."""
    companion_ids = list(release.companions.values_list("pk", flat=True))
    candidates = candidate_responses(release.campaign, companion_ids)
    for campaign in release.added_campaigns.all():  # a version's other campaigns
        candidates = candidates | candidate_responses(campaign, companion_ids)
    profile = None
    if release.judge is not None and metric_jobs.stored_profile(candidates) is None:
        profile = release.judge.document.get("metrics_profile")
    metric_jobs.compute(candidates, profile=profile, keep_other_profiles=True, progress=progress)
    if release.parent_id is not None:
        from scoring.releases.versioning import freeze_version

        inputs = freeze_version(release)
    else:
        inputs = freeze(
            release.campaign,
            list(release.companions.all()),
            release.anchor,
            release.judge,
            release.seed,
            release.n_boot,
            release.style_control,
        )
    release.inputs = inputs
    release.fingerprint = fingerprint_of(inputs)
    release.frozen_at = timezone.now()
    release.save(update_fields=["inputs", "fingerprint", "frozen_at"])


def _fail(release: Release, message: str) -> None:
    """A release without numbers fails; one with stored numbers keeps them (they are the
    numbers of its frozen inputs) and records the failed recomputation as a failed check."""
    if ReleaseResult.objects.filter(release=release).exists():
        now = timezone.now()
        Release.objects.filter(pk=release.pk).update(
            state=Release.State.READY, checked_at=now, check_ok=False, check_message=message
        )
        release.state, release.checked_at, release.check_ok, release.check_message = (
            Release.State.READY,
            now,
            False,
            message,
        )
        return
    Release.objects.filter(pk=release.pk).update(state=Release.State.FAILED, message=message)
    release.state, release.message = Release.State.FAILED, message


def results_for(release: Release, progress=None) -> dict:
    """Verify the frozen inputs against the database, then compute the numbers (numpy, pandas
    and scipy load here: the pages import this module). The stored metrics and verdicts are
    read once for both (scoring.stored_columns)."""
    from scoring import stored_columns
    from scoring.releases.computing import compute_results
    from scoring.releases.data import load_data

    stage = progress or (lambda done, total, message: None)
    with stored_columns.reading_once():  # verifying hashes the rows load_data then uses
        stage(0, 3, VERIFYING)
        problems = verify(release)
        if problems:
            raise InputsChanged(problems)
        stage(1, 3, LOADING)
        data = load_data(release, progress)
    stage(2, 3, COMPUTING)
    return compute_results(data)


def compute(release: Release, progress=None) -> ReleaseResult:
    """Freeze (if not yet), verify and compute a release, storing its numbers."""
    Release.objects.filter(pk=release.pk).update(state=Release.State.COMPUTING, message="")
    try:
        if not release.inputs:
            freeze_release(release, progress)
        start = time.perf_counter()
        data = results_for(release, progress)
    except ReleaseError as error:
        _fail(release, str(error))
        raise
    except Exception as error:
        _fail(release, f"{type(error).__name__}: {error}")
        raise
    seconds = time.perf_counter() - start
    text = canonical(data)
    with transaction.atomic():
        first = not ReleaseResult.objects.filter(release=release).exists()
        result, _ = ReleaseResult.objects.update_or_create(
            release=release,
            defaults={
                "data": json.loads(text),
                "data_sha256": sha256_text(text),
                "code_version": code_version(),
                "computed_at": timezone.now(),
                "seconds": round(seconds, 3),
            },
        )
        Release.objects.filter(pk=release.pk).update(
            state=Release.State.READY,
            message=f"computed in {seconds:.1f} s",
        )
        if first:
            release_published.send(Release, release=release)
    release.state = Release.State.READY
    release.message = f"computed in {seconds:.1f} s"
    release.result = result
    return result


@dataclass
class CheckOutcome:
    ok: bool
    message: str
    problems: list[str] = field(default_factory=list)


def first_difference(stored, recomputed, path: str = "") -> str | None:
    """The path of the first value that differs between two JSON documents."""
    if type(stored) is not type(recomputed):
        return path or "/"
    if isinstance(stored, dict):
        for key in sorted(set(stored) | set(recomputed)):
            if key not in stored or key not in recomputed:
                return f"{path}/{key}"
            found = first_difference(stored[key], recomputed[key], f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(stored, list):
        if len(stored) != len(recomputed):
            return f"{path} (length)"
        for k, (x, y) in enumerate(zip(stored, recomputed, strict=True)):
            found = first_difference(x, y, f"{path}/{k}")
            if found:
                return found
        return None
    return None if stored == recomputed else (path or "/")


def check(release: Release, progress=None, record: bool = True) -> CheckOutcome:
    """Recompute the release from its frozen inputs and compare with the stored numbers, bit for
    bit (the canonical JSON). Recorded on the release unless record=False."""
    stored = ReleaseResult.objects.filter(release=release).first()
    if stored is None:
        outcome = CheckOutcome(False, "the release has no stored numbers to check yet")
    else:
        try:
            recomputed = results_for(release, progress)
        except InputsChanged as error:
            outcome = CheckOutcome(False, str(error), error.problems)
        except ReleaseError as error:
            outcome = CheckOutcome(False, str(error), [str(error)])
        else:
            text = canonical(recomputed)
            if text == canonical(stored.data) and sha256_text(text) == stored.data_sha256:
                outcome = CheckOutcome(
                    True,
                    f"inputs unchanged (fingerprint {release.fingerprint[:12]}…) and the "
                    f"recomputed numbers equal the stored ones bit for bit (sha256 "
                    f"{stored.data_sha256[:12]}…)",
                )
            else:
                where = first_difference(stored.data, json.loads(text)) or "(encoding)"
                message = (
                    f"the recomputed numbers differ from the stored ones (first at {where}); "
                    f"stored with {stored.code_version}, recomputed with {code_version()}"
                )
                if stored.data.get("schema") != recomputed.get("schema"):
                    message += (
                        f"; the stored numbers have results schema {stored.data.get('schema')}, "
                        f"this code computes {recomputed.get('schema')} (see the README's "
                        "release numbers: the methods differ), so they cannot agree"
                    )
                outcome = CheckOutcome(False, message)
    if record:
        now = timezone.now()
        Release.objects.filter(pk=release.pk).update(
            checked_at=now, check_ok=outcome.ok, check_message=outcome.message
        )
        release.checked_at, release.check_ok, release.check_message = (
            now,
            outcome.ok,
            outcome.message,
        )
    return outcome


def compute_or_check(release: Release, progress=None) -> str:
    """What the "compute / verify" button does: compute a release without numbers, else check
    it. Returns a sentence for the page."""
    if release.state != Release.State.READY or not has_result(release):
        try:
            compute(release, progress)
        except ReleaseError as error:
            return f"Not computed: {error}"
        return f"Computed: {release.message}."
    outcome = check(release, progress)
    return ("Verified: " if outcome.ok else "Check FAILED: ") + outcome.message + "."


def has_result(release: Release) -> bool:
    return ReleaseResult.objects.filter(release=release).exists()


def running_job(release: Release) -> Job | None:
    if release.job_id is None:
        return None
    job = Job.objects.filter(pk=release.job_id).first()
    return job if job is not None and not job.is_finished else None


def find_release(identifier: str) -> Release:
    """A release by id or exact name (for the management command)."""
    query = Q(name=identifier)
    if parse_int(str(identifier)) is not None:
        query |= Q(pk=parse_int(str(identifier)))
    release = Release.objects.select_related("campaign", "anchor", "judge").filter(query).first()
    if release is None:
        raise ReleaseError(f"no release {identifier!r} (give its id or exact name)")
    return release
