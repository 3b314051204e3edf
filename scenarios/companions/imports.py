"""Response import: companion outputs from files into one GenerationRun of kind "import".

The formats and their readers are in scenarios.companions.import_formats.

Benchmark scale is 4,650 scenarios × 50 companions, so the input is streamed twice and never
held in memory: a preview pass validates and counts, and the write pass re-reads it inside one
transaction, writing them set-based (scenarios.companions.writer: COPY on PostgreSQL, into
the table or a staging table for one upsert). Between and during the passes only
small, fixed-size tables are kept: the (subtask, external id) → scenario lookup and, per
companion, arrays with one 8-byte slot per scenario (where each scenario was first answered in
this input, to report duplicates; and, for the preview, a 63-bit digest of the answer already
stored in the run, to tell new, changed and unchanged rows apart). Every problem is reported
with its file, line and field; if there is any, nothing is written.
"""

import hashlib
import zipfile
import zlib
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from django.db import transaction
from django.db.models.functions import MD5
from django.utils import timezone

from h2htalk import uploads
from scenarios import validation
from scenarios.companions.import_formats import READERS, FileState, Input, Item, ResponseError
from scenarios.companions.writer import ResponseWriter
from scenarios.importers import ImportFailed
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario

BATCH = 2000  # responses staged at a time (one COPY on PostgreSQL)
PROGRESS_EVERY = 2000  # lines between progress callbacks
MAX_ERRORS = 1000  # errors kept in the report; error_count has them all
MAX_COMPANIONS = 200  # per import: each costs 16 bytes per scenario of memory
# What reading a member of a damaged or unsupported archive raises (a bad local header or CRC,
# corrupt deflate data, a truncation, an unknown compression method, encryption).
ARCHIVE_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)
# (uploads.ArchiveRefused, more bytes out than MAX_ARCHIVE_BYTES, ends the pass: see _scan.)


class ResponseImportFailed(ImportFailed):
    def __init__(self, report: "ResponseImportReport"):
        Exception.__init__(self, f"{report.error_count} error(s); nothing was written")
        self.report = report


@dataclass
class ResponseImportReport:
    filename: str
    format: str
    run: str
    run_exists: bool = False
    files: int = 0
    lines: int = 0  # physical lines read (the unit of progress)
    rows: int = 0  # responses found, good or bad
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    companions_created: int = 0
    new_companions: list[str] = field(default_factory=list)
    companions: dict[str, int] = field(default_factory=dict)  # rows per companion
    subtasks: dict[str, int] = field(default_factory=dict)  # rows per subtask
    written: bool = False
    error_count: int = 0
    errors: list[ResponseError] = field(default_factory=list)  # the first MAX_ERRORS

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return not self.error_count

    def add_error(self, line: int, field_name: str, message: str, file: str = "") -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(ResponseError(line, field_name, message, file))


def count_input_lines(source, filename: str | None = None) -> int:
    """Physical lines in every input file (the progress total), reading in chunks."""
    source = source if isinstance(source, Input) else Input(source, filename)
    files, _ = source.layout()
    total = 0
    with source.opener() as open_file:
        for item in files:
            counter = FileState()
            try:
                with open_file(item) as stream:
                    for chunk in iter(lambda stream=stream: stream.read(1 << 20), b""):
                        counter.feed(chunk)
            except ARCHIVE_ERRORS as error:
                if source.kind != "zip" or isinstance(error, RecursionError):
                    raise
                # (the scan reports the member)
            except uploads.ArchiveRefused:
                total += counter.lines
                break  # (the scan reports it)
            total += counter.lines
    if source.stream is not None:
        source.stream.seek(0)
    return total


# ---------------------------------------------------------------- matching


def _digest(text_md5: str, status, latency_ms, prompt_tokens, completion_tokens, finish, error):
    """A 63-bit digest of what an import sets on a response (0 means "no response")."""
    value = "\x1f".join(
        map(str, (text_md5, status, latency_ms, prompt_tokens, completion_tokens, finish, error))
    )
    digest = hashlib.blake2b(value.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 1) or 1


def _item_digest(item: Item) -> int:
    prompt_tokens, completion_tokens, latency_ms, finish_reason = item.meta
    text_md5 = hashlib.md5(item.text.encode(), usedforsecurity=False).hexdigest()
    ok = Response.Status.OK
    return _digest(text_md5, ok, latency_ms, prompt_tokens, completion_tokens, finish_reason, "")


class _Index:
    """The lookups both passes share; their size depends on scenarios × companions, not rows."""

    def __init__(self):
        self.scenarios: dict[tuple[str, str], int] = {}  # (subtask, external id) -> slot
        self.scenario_ids = array("q")
        rows = Scenario.objects.exclude(external_id="").values_list("pk", "subtask", "external_id")
        for pk, subtask, external_id in rows.order_by().iterator(chunk_size=5000):
            self.scenarios[(subtask, external_id)] = len(self.scenario_ids)
            self.scenario_ids.append(pk)
        self.companion_ids = dict(CompanionModel.objects.values_list("name", "pk"))
        self.slots: dict[str, int] = {}  # companion name -> slot in `seen`
        self.names: list[str] = []
        self.seen: list[array] = []  # per companion: (file number << 32 | line) of first answer
        self.existing: dict[int, array] = {}  # companion id -> digest per scenario slot

    def _blank(self) -> array:
        return array("q", bytes(8 * len(self.scenario_ids)))

    def companion_slot(self, name: str) -> int | None:
        slot = self.slots.get(name)
        if slot is None:
            if len(self.names) >= MAX_COMPANIONS:
                return None
            slot = self.slots[name] = len(self.names)
            self.names.append(name)
            self.seen.append(self._blank())
        return slot

    def load_existing(self, run_id: int | None) -> None:
        """The digest of every response already in the run (one query, streamed)."""
        self.existing = {}
        if run_id is None:
            return
        by_id = {pk: slot for slot, pk in enumerate(self.scenario_ids)}
        rows = Response.objects.filter(run_id=run_id).values_list(
            "scenario_id",
            "companion_id",
            MD5("text"),
            "status",
            "latency_ms",
            "prompt_tokens",
            "completion_tokens",
            "finish_reason",
            "error",
        )
        for scenario_id, companion_id, *values in rows.order_by().iterator(chunk_size=5000):
            slot = by_id.get(scenario_id)
            if slot is None:
                continue  # a scenario without an external id: no input line can name it
            digests = self.existing.get(companion_id)
            if digests is None:
                digests = self.existing[companion_id] = self._blank()
            digests[slot] = _digest(*values)


CREATE, UPDATE, UNCHANGED = "create", "update", "unchanged"


def _scan(source: Input, report: ResponseImportReport, index: _Index, emit, progress) -> str:
    """Read every input file once: check each response and hand emit(kind, item, slots, line)
    the good ones. Returns the input's fingerprint (to notice a change between the passes)."""
    files, layout_errors = source.layout()
    for error in layout_errors:
        report.add_error(error.line, error.field, error.message, error.file or source.filename)
    fingerprint = hashlib.blake2b(digest_size=16)
    done = last_progress = 0
    with source.opener() as open_file:
        for number, item in enumerate(files, start=1):
            fingerprint.update(item.path.encode() + b"\0")
            state = FileState(fingerprint)
            try:
                with open_file(item) as stream:
                    for line, value in READERS[item.kind](stream, item, state):
                        report.rows += 1
                        if isinstance(value, validation.FieldError):
                            report.add_error(line, value.field, value.message, item.path)
                        else:
                            _check(report, index, files, number, item.path, line, value, emit)
                        if progress and done + line - last_progress >= PROGRESS_EVERY:
                            last_progress = done + line
                            progress(last_progress)
            except ARCHIVE_ERRORS as error:
                if source.kind != "zip" or isinstance(error, RecursionError):
                    raise
                message = f"cannot be read from the archive: {error}"
                report.add_error(0, "(zip)", message, item.path)
            except uploads.ArchiveRefused as error:
                report.add_error(0, "(zip)", str(error), item.path)
                done += state.lines
                report.files += 1
                break  # nothing more is read from this archive
            done += state.lines
            report.files += 1
    report.lines = done
    if progress:
        progress(done)
    if not files and not layout_errors:
        report.add_error(0, "(file)", "no response files found", source.filename)
    elif report.rows == 0 and not report.error_count:
        report.add_error(0, "(file)", "no responses in the input", source.filename)
    return fingerprint.hexdigest()


def _check(report, index: _Index, files, file_number, path, line, item: Item, emit) -> None:
    scenario_slot = index.scenarios.get((item.subtask, item.external_id))
    if scenario_slot is None:
        message = f"no scenario {item.subtask}/{item.external_id}: import the scenarios first"
        report.add_error(line, item.id_field, message, path)
        return
    companion_slot = index.companion_slot(item.companion)
    if companion_slot is None:
        message = f"more than {MAX_COMPANIONS} companions in one import"
        report.add_error(line, "companion", message, path)
        return
    seen = index.seen[companion_slot]
    first = seen[scenario_slot]
    if first:
        first_file, first_line = first >> 32, first & 0xFFFFFFFF
        where = f"line {first_line}"
        if first_file != file_number:
            where = f"{files[first_file - 1].path} line {first_line}"
        message = (
            f"{item.subtask}/{item.external_id} for {item.companion} already appears on {where}"
        )
        report.add_error(line, item.id_field, message, path)
        return
    seen[scenario_slot] = file_number << 32 | line
    report.companions[item.companion] = report.companions.get(item.companion, 0) + 1
    report.subtasks[item.subtask] = report.subtasks.get(item.subtask, 0) + 1
    companion_id = index.companion_ids.get(item.companion)
    stored = index.existing.get(companion_id) if companion_id is not None else None
    old = stored[scenario_slot] if stored is not None else 0
    if not old:
        kind = CREATE
    elif old == _item_digest(item):
        kind = UNCHANGED
    else:
        kind = UPDATE
    emit(kind, item, scenario_slot, companion_slot, line)


# ---------------------------------------------------------------- planning and writing


@dataclass
class ResponsePlan:
    report: ResponseImportReport
    source: Input
    run_name: str
    fingerprint: str = ""


def _tally(report: ResponseImportReport, kind: str) -> None:
    if kind == CREATE:
        report.created += 1
    elif kind == UPDATE:
        report.updated += 1
    else:
        report.unchanged += 1


def _check_run(report: ResponseImportReport, run: GenerationRun | None) -> None:
    if run is not None and run.kind != GenerationRun.Kind.IMPORT:
        message = f"run {run.name!r} holds generated responses; import into another run"
        report.add_error(0, "run", message)


def _new_report(source: Input, run_name: str | None) -> tuple[ResponseImportReport, str]:
    """The report of an import into `run_name` (default: the file or directory name), with the
    problems of the name itself; and the name ("" when no query can hold it)."""
    run_name = (run_name or "").strip() or source.default_run_name()
    report = ResponseImportReport(filename=source.filename, format=source.format, run=run_name)
    if len(run_name) > 120:
        report.add_error(0, "run", "the run name is longer than 120 characters")
    try:
        validation.clean_text(run_name, "run")
    except validation.FieldError as error:  # NUL or a lone surrogate: no query can hold it
        report.add_error(0, "run", f"the run name {error.message}")
        run_name = ""
    return report, run_name


def _source(source, filename: str | None) -> Input:
    return source if isinstance(source, Input) else Input(source, filename)


def build_response_plan(
    source,
    run_name: str | None = None,
    filename: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> ResponsePlan:
    """The preview pass: read everything once, check it, count what a write would do.

    `source` is a path (directory, .zip, .jsonl) or a seekable binary stream whose `filename`
    says which (.zip or .jsonl). The default run name is the file or directory name.
    """
    source = _source(source, filename)
    report, run_name = _new_report(source, run_name)
    run = GenerationRun.objects.filter(name=run_name).first() if run_name else None
    report.run_exists = run is not None
    _check_run(report, run)
    index = _Index()
    index.load_existing(run.pk if run else None)
    fingerprint = _scan(source, report, index, lambda kind, *_: _tally(report, kind), progress)
    report.new_companions = [name for name in index.names if name not in index.companion_ids]
    report.companions_created = len(report.new_companions)
    return ResponsePlan(report=report, source=source, run_name=run_name, fingerprint=fingerprint)


def write_response_plan(
    plan: ResponsePlan, author=None, progress: Callable[[int], None] | None = None
) -> ResponseImportReport:
    """Write a previewed input: as write_responses, and refused (nothing written) if the input
    is no longer the one the preview read."""
    return _write(plan, author, progress)


def write_responses(
    source,
    run_name: str | None = None,
    author=None,
    progress: Callable[[int], None] | None = None,
    filename: str | None = None,
) -> ResponseImportReport:
    """Check and write in one pass, without a preview: what the preview would find wrong is
    found on the way and rolls the write back, so the result is the same (all or nothing, the
    same errors) for half the reading. Raises ResponseImportFailed when anything is bad."""
    source = _source(source, filename)
    report, run_name = _new_report(source, run_name)
    return _write(ResponsePlan(report, source, run_name), author, progress)


def _write(plan: ResponsePlan, author, progress) -> ResponseImportReport:
    """The write pass: read the input and write it set-based (scenarios.companions.writer),
    all in one transaction, creating the companions it names that do not exist yet.

    The run is locked and the counts are taken against it inside the transaction, so they are
    those of what was written even if the run changed since a preview. Anything wrong (a bad
    row, an input that changed since the preview, a database error) rolls everything back.
    """
    report = plan.report
    if not report.ok:
        raise ResponseImportFailed(report)
    with transaction.atomic():
        now = timezone.now()
        run = _run_to_write(plan, author, now)
        index = _Index()  # (no stored digests: the database compares the rows)
        scanned = ResponseImportReport(report.filename, report.format, report.run)
        with ResponseWriter(run, now) as writer:
            batch = _Batch(writer, index, scanned)
            paused = (lambda n: (writer.pause(), progress(n))) if progress else None
            fingerprint = _scan(plan.source, scanned, index, batch.emit, paused)
            if plan.fingerprint and fingerprint != plan.fingerprint and scanned.ok:
                message = "the input changed since it was checked; check it again"
                scanned.add_error(0, "(file)", message)
            for name in ("files", "lines", "rows", "companions", "subtasks", "error_count"):
                setattr(report, name, getattr(scanned, name))
            report.errors = scanned.errors
            report.new_companions = batch.new_companions
            report.companions_created = len(batch.new_companions)
            if not report.ok:
                raise ResponseImportFailed(report)
            batch.flush()
            report.created, report.updated, report.unchanged = writer.finish()
        run.companions.add(*(index.companion_ids[name] for name in index.names))
        if report.created or report.updated:
            GenerationRun.objects.filter(pk=run.pk).update(
                finished_at=now,
                message=f"imported from {report.filename}: {report.created} new, "
                f"{report.updated} changed, {report.unchanged} unchanged",
            )
    report.written = True
    return report


def _run_to_write(plan: ResponsePlan, author, now) -> GenerationRun:
    """The import run, locked (created if new)."""
    report = plan.report
    run = GenerationRun.objects.select_for_update().filter(name=plan.run_name).first()
    report.run_exists = run is not None
    _check_run(report, run)
    if not report.ok:
        raise ResponseImportFailed(report)
    if run is None:
        run = GenerationRun.objects.create(
            name=plan.run_name,
            kind=GenerationRun.Kind.IMPORT,
            state=GenerationRun.State.COMPLETED,
            created_by=author,
            started_at=now,
            finished_at=now,
        )
    return run


class _Batch:
    """Where the write pass's rows go: each good row is written with the next batch of BATCH
    (none once the pass has found an error: nothing will be kept). A companion seen for the
    first time is created."""

    def __init__(self, writer: ResponseWriter, index: _Index, report: ResponseImportReport):
        self.writer, self.index, self.report = writer, index, report
        self.rows: list[tuple] = []
        self.new_companions: list[str] = []

    def _companion_id(self, name: str) -> int:
        self.writer.pause()
        companion, created = CompanionModel.objects.get_or_create(
            name=name,
            defaults={
                "provider": CompanionModel.Provider.IMPORTED,
                "notes": f"created by the import of {self.report.filename} into run "
                f"{self.report.run}",
            },
        )
        if created:
            self.new_companions.append(name)
        self.index.companion_ids[name] = companion.pk
        return companion.pk

    def emit(self, kind, item: Item, scenario_slot, companion_slot, line) -> None:
        if self.report.error_count:
            return
        companion_id = self.index.companion_ids.get(item.companion)
        if companion_id is None:
            companion_id = self._companion_id(item.companion)
        prompt_tokens, completion_tokens, latency_ms, finish_reason = item.meta
        self.rows.append(
            (
                self.index.scenario_ids[scenario_slot],
                companion_id,
                item.text,
                latency_ms,
                prompt_tokens,
                completion_tokens,
                finish_reason,
            )
        )
        if len(self.rows) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write(self.rows)
            self.rows = []


def import_responses(
    source,
    run_name: str | None = None,
    author=None,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    filename: str | None = None,
) -> ResponseImportReport:
    """Preview (dry_run) or write in one pass (write_responses). Raises ResponseImportFailed
    when anything is bad."""
    if dry_run:
        return build_response_plan(source, run_name, filename=filename, progress=progress).report
    return write_responses(source, run_name, author, progress=progress, filename=filename)
