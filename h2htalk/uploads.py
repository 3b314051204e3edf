"""Uploaded files, from the form to the end of their job: stored, read safely, deleted.

Reading. `read_lines` is the one line reader of every importer (`text_lines` decodes its lines
for the JSONL readers): `readline(limit + 1)` on the
binary stream, so the time is linear in the bytes (Django's `File` line iteration glues the
pieces of a long line together again and again: quadratic), and a line longer than
MAX_LINE_BYTES comes as a `LongLine` (its error names the limit) while the rest of it is
skipped in chunks without being held. `zip_problems` refuses an archive before anything in it
is read (total uncompressed size, entry count, compression ratio of each entry; settings
MAX_ARCHIVE_BYTES, MAX_ARCHIVE_ENTRIES, MAX_ARCHIVE_RATIO), and `ArchiveBudget` counts the
bytes actually decompressed anyway, because the sizes in the headers can lie.

Upload to job. `start_job` checks the size, stores the file under `imports/` and creates the
preview Job (dry run) that a worker runs; the view redirects to the job page, which polls.
`confirm` starts the write job from a successful preview with the same file. In eager mode
(no broker: the demo) the job runs in the upload request itself, within the same limits.

Deletion. The stored file is deleted once no job needs it (`release`): when its job has ended
(after UPLOAD_RETENTION_SECONDS, default 0 = at once), except that a successful preview keeps it
for its confirmation until UPLOAD_PREVIEW_SECONDS have passed. `jobs.finish` and the sweeper
call `release`; `purge` (run by the sweeper and on every upload) deletes whatever is due later.
A Job records the deletion in `params["upload_deleted"]`.
"""

import logging
import os
import tempfile
import uuid
import zipfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import PurePath
from typing import NamedTuple

from django.conf import settings
from django.contrib import messages
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from .models import Job

logger = logging.getLogger(__name__)

CHUNK = 1 << 16
RATIO_CHECKED_FROM = 1 << 20  # entries smaller than this cannot be a bomb worth refusing
UPLOAD_DIR = "imports"


def _limit(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def max_line_bytes() -> int:
    return _limit("MAX_LINE_BYTES", 1 << 20)


# ---------------------------------------------------------------- reading lines


class LongLine:
    """Stands for a line over the limit (its bytes were skipped, not kept)."""

    __slots__ = ("limit", "number")

    def __init__(self, number: int, limit: int):
        self.number, self.limit = number, limit

    @property
    def message(self) -> str:
        return f"line {self.number} is longer than {self.limit:,} bytes (MAX_LINE_BYTES)"

    def __repr__(self):
        return f"LongLine({self.number}, {self.limit})"


def read_lines(stream, limit: int | None = None, feed=None) -> Iterator[tuple[int, object]]:
    """(number, raw bytes with their newline, or a LongLine) per physical line ("\\n"-ended).

    Linear time, at most `limit` + 1 bytes of a line held (default MAX_LINE_BYTES); a line's
    limit counts its bytes without the final newline. `feed(raw)` sees every byte read (for a
    fingerprint or a line count).
    """
    limit = max_line_bytes() if limit is None else int(limit)
    number = 0
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        number += 1
        if feed is not None:
            feed(raw)
        if len(raw) > limit and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = stream.readline(CHUNK)
                if feed is not None:
                    feed(raw)
            yield number, LongLine(number, limit)
            continue
        yield number, raw


class LineProblem(NamedTuple):
    """A line that cannot be read as text: `field` is "(line)" (over the limit) or "(encoding)"."""

    field: str
    message: str


BOM = b"\xef\xbb\xbf"


def text_lines(stream, feed=None) -> Iterator[tuple[int, "str | LineProblem"]]:
    """(number, text without its line end, or a LineProblem) per physical line: the one
    decoding reader of the importers, so each reports a bad line the same way (file line and
    field). UTF-8, a byte-order mark on the first line dropped; `feed` as in `read_lines`."""
    for number, raw in read_lines(stream, feed=feed):
        if isinstance(raw, LongLine):
            yield number, LineProblem("(line)", raw.message)
            continue
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM) :]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            message = f"not valid UTF-8 at byte {error.start} of the line"
            yield number, LineProblem("(encoding)", message)
            continue
        yield number, text.rstrip("\r\n")


def count_lines(stream) -> int:
    """Lines of a binary stream (a last line without a newline counts), reading in chunks;
    leaves a seekable stream rewound."""
    lines, last = 0, b"\n"
    for chunk in iter(lambda: stream.read(1 << 20), b""):
        lines += chunk.count(b"\n")
        last = chunk[-1:]
    if hasattr(stream, "seek"):
        stream.seek(0)
    return lines + (last != b"\n")


# ---------------------------------------------------------------- archives


class ArchiveRefused(ValueError):
    """An archive over one of the limits; the message names the limit."""


def zip_problems(archive: zipfile.ZipFile) -> list[str]:
    """Why this archive is refused (empty: it is not), from its directory alone."""
    infos = archive.infolist()
    entries = _limit("MAX_ARCHIVE_ENTRIES", 10_000)
    if len(infos) > entries:
        return [
            f"the archive holds {len(infos):,} entries; the limit is {entries:,} "
            "(MAX_ARCHIVE_ENTRIES)"
        ]
    problems = []
    total = sum(info.file_size for info in infos)
    most = _limit("MAX_ARCHIVE_BYTES", 1 << 30)
    if total > most:
        problems.append(
            f"the archive expands to {total:,} bytes; the limit is {most:,} (MAX_ARCHIVE_BYTES)"
        )
    ratio_limit = _limit("MAX_ARCHIVE_RATIO", 200)
    for info in infos:
        if info.file_size < RATIO_CHECKED_FROM:
            continue
        ratio = info.file_size / max(info.compress_size, 1)
        if ratio > ratio_limit:
            problems.append(
                f"{info.filename} expands {ratio:,.0f} times ({info.compress_size:,} to "
                f"{info.file_size:,} bytes); the limit is {ratio_limit:,} (MAX_ARCHIVE_RATIO)"
            )
            break
    return problems


class ArchiveBudget:
    """Counts the bytes decompressed in one pass over an archive, whatever its headers say."""

    def __init__(self, limit: int | None = None):
        self.limit = _limit("MAX_ARCHIVE_BYTES", 1 << 30) if limit is None else limit
        self.used = 0

    def wrap(self, member):
        return _Counted(member, self)

    def spend(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise ArchiveRefused(
                f"the archive expands to more than {self.limit:,} bytes (MAX_ARCHIVE_BYTES)"
            )


class _Counted:
    """A member stream whose reads are charged to an ArchiveBudget."""

    def __init__(self, member, budget: ArchiveBudget):
        self.member, self.budget = member, budget

    def read(self, n: int = -1) -> bytes:
        data = self.member.read(n)
        self.budget.spend(len(data))
        return data

    def readline(self, limit: int = -1) -> bytes:
        data = self.member.readline(limit)
        self.budget.spend(len(data))
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.member.close()
        return False

    def close(self) -> None:
        self.member.close()


# ---------------------------------------------------------------- upload to job


def size_error(upload) -> str | None:
    limit = settings.MAX_UPLOAD_BYTES
    if upload.size > limit:
        return f"The file is {upload.size:,} bytes; the limit is {limit:,}."
    return None


def storage_name(filename: str) -> str:
    """The stored file's name: "upload" plus the name's extension when it is a plain short one
    (the name as sent is kept in the job's params; any name, however long, stores safely)."""
    extension = PurePath(str(filename or "")).suffix.lower()
    if len(extension) > 10 or not extension[1:].isascii() or not extension[1:].isalnum():
        extension = ""
    return f"upload{extension}"


def store(upload) -> str:
    """Save an upload under imports/<random folder>/ and return its storage path."""
    name = storage_name(upload.name)
    return default_storage.save(f"{UPLOAD_DIR}/{uuid.uuid4().hex}/{name}", upload)


BUNDLE_SUFFIX = ".bundle.zip"  # several files of one upload, stored together


def store_bundle(uploads) -> str:
    """Save several uploaded files as one stored zip (uncompressed: they were sent as they
    are), so the job and the deletion rules deal with one path; names kept, in upload order."""
    buffer = tempfile.SpooledTemporaryFile(max_size=1 << 24)  # noqa: SIM115 (saved below)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as bundle:
        seen = set()
        for upload in uploads:
            name = PurePath(str(upload.name or "file")).name or "file"
            while name in seen:  # two files of one name: both kept
                name = f"_{name}"
            seen.add(name)
            with bundle.open(name, "w") as member:
                for chunk in upload.chunks():
                    member.write(chunk)
    buffer.seek(0)
    path = f"{UPLOAD_DIR}/{uuid.uuid4().hex}/upload{BUNDLE_SUFFIX}"
    return default_storage.save(path, File(buffer))


def start_job(request, form, kind: str, task, options: tuple[str, ...] = ()) -> Job | None:
    """The upload form's file (its field "file") as a preview Job of `kind` run by `task`, with
    the form's `options` fields in its params: what every import page does with a POST.

    Returns None when there is nothing to start: a GET, an invalid form, or a file over
    MAX_UPLOAD_BYTES (its error is put on the form and nothing is stored). Otherwise the file
    is stored and the job starts after the commit.
    """
    if request.method != "POST" or not form.is_valid():
        return None
    upload = form.cleaned_data["file"]
    files = list(upload) if isinstance(upload, list | tuple) else [upload]
    problem = size_error(files[0]) if len(files) == 1 else bundle_size_error(files)
    if problem:
        form.add_error("file", problem)
        return None
    purge()
    chosen = {name: form.cleaned_data[name] for name in options}
    if len(files) == 1:
        params = {"path": store(files[0]), "filename": files[0].name}
    else:
        names = [f.name for f in files]
        params = {"path": store_bundle(files), "filename": f"{len(files)} files", "files": names}
    return queue(kind, task, request.user, {**params, **chosen, "dry_run": True})


def bundle_size_error(files) -> str | None:
    limit = settings.MAX_UPLOAD_BYTES
    total = sum(f.size for f in files)
    if total > limit:
        return f"The {len(files)} files hold {total:,} bytes together; the limit is {limit:,}."
    return None


def queue(kind: str, task, user, params: dict) -> Job:
    job = Job.objects.create(kind=kind, created_by=user, params=params)
    transaction.on_commit(lambda: task.delay(job.pk))
    return job


class NotConfirmable(Exception):
    """The preview cannot be imported (not a successful preview, or its file is gone)."""


def confirm(preview: Job, task, user) -> Job:
    """The write job of a successful preview: same file and options, dry run off.

    Confirming a preview twice gives the job of the first confirmation again.
    """
    with transaction.atomic():
        preview = Job.objects.select_for_update().get(pk=preview.pk)
        params = preview.params
        if not params.get("dry_run") or preview.state != Job.State.COMPLETED:
            raise NotConfirmable("Only a successful preview can be imported.")
        earlier = params.get("confirmed_job")
        if earlier and Job.objects.filter(pk=earlier).exists():
            return Job.objects.get(pk=earlier)
        if params.get("upload_deleted"):
            hours = _limit("UPLOAD_PREVIEW_SECONDS", 86400) / 3600
            raise NotConfirmable(
                f"The uploaded file was deleted {hours:g} hours after the preview "
                "(UPLOAD_PREVIEW_SECONDS): upload it again."
            )
        written = {k: v for k, v in params.items() if k not in ("confirmed_job", "upload_deleted")}
        job = queue(preview.kind, task, user, {**written, "dry_run": False, "preview": preview.pk})
        Job.objects.filter(pk=preview.pk).update(params={**params, "confirmed_job": job.pk})
    return job


def confirm_from_page(request, preview: Job, task) -> Job:
    """The job whose page a confirmation shows next: the write job of `preview`, or the
    preview itself with the reason it cannot be imported as an error message."""
    try:
        return confirm(preview, task, request.user)
    except NotConfirmable as error:
        messages.error(request, str(error))
        return preview


# ---------------------------------------------------------------- deletion


def _waits_for_confirmation(job: Job, now) -> bool:
    return (
        bool(job.params.get("dry_run"))
        and job.state == Job.State.COMPLETED
        and not job.params.get("confirmed_job")
        and (job.finished_at or now)
        > now - timedelta(seconds=_limit("UPLOAD_PREVIEW_SECONDS", 86400))
    )


def _needed(path: str, now) -> bool:
    """Does a job still need this file: one not ended, one ended within the retention, or a
    successful preview waiting for its confirmation?"""
    retention = timedelta(seconds=_limit("UPLOAD_RETENTION_SECONDS", 0))
    for job in Job.objects.filter(params__path=path).only("state", "finished_at", "params"):
        if not job.is_finished:
            return True
        if retention and (job.finished_at or now) > now - retention:
            return True
        if _waits_for_confirmation(job, now):
            return True
    return False


def release(job_id: int) -> bool:
    """Delete the upload of this job if no job needs it any more; True if it was deleted."""
    job = Job.objects.filter(pk=job_id).only("params").first()
    path = (job.params or {}).get("path") if job else None
    if not path or not isinstance(path, str) or job.params.get("upload_deleted"):
        return False
    return _delete_if_unneeded(path, timezone.now())


def _delete_if_unneeded(path: str, now) -> bool:
    if _needed(path, now):
        return False
    try:
        default_storage.delete(path)
    except OSError:
        logger.warning("could not delete the upload %s", path, exc_info=True)
        return False
    _remove_empty_folder(path)
    for job in Job.objects.filter(params__path=path).only("params"):
        if not job.params.get("upload_deleted"):
            Job.objects.filter(pk=job.pk).update(
                params={**job.params, "upload_deleted": now.isoformat()}
            )
    return True


def _remove_empty_folder(path: str) -> None:
    folder = path.rsplit("/", 1)[0]
    if not folder.startswith(f"{UPLOAD_DIR}/") or folder == UPLOAD_DIR:
        return
    try:
        directories, files = default_storage.listdir(folder)
        if not directories and not files:
            os.rmdir(default_storage.path(folder))
    except (OSError, NotImplementedError):
        pass


def purge() -> list[str]:
    """Delete every upload whose jobs have all ended (and whose retention or preview time is
    over); returns the deleted paths."""
    now = timezone.now()
    deleted = []
    paths = (
        Job.objects.filter(state__in=Job.FINISHED, params__has_key="path")
        .exclude(params__has_key="upload_deleted")
        .values_list("params__path", flat=True)
        .distinct()
    )
    for path in list(paths):
        if isinstance(path, str) and path and _delete_if_unneeded(path, now):
            deleted.append(path)
    return deleted
