"""Scenario import: read (scenarios.import_formats) → check → write, streamed BATCH rows at a
time inside one transaction.

Every problem is reported with its file line and field (all of them, in line order); if there
is any, nothing is written: writing stops at the first and the transaction is rolled back at
the end, the rest of the file still being checked. Only compact facts about earlier rows are
kept (the keys and content hashes seen, persona and tag ids, the ids written), so memory does
not grow with the file's text. New scenarios, their tags and first revisions are written
set-based (scenarios.import_rows builds the rows without model instances; h2htalk.bulk: COPY
on PostgreSQL); changed ones go through the model (few, usually).

A row with an external id updates the scenario of that subtask and id (nothing happens when
nothing changed); one without is new unless its content repeats an existing scenario or an
earlier line (a duplicate, skipped). A row may name a persona that a later line defines: it
waits for the end of the file to be written.
"""

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import PurePath
from typing import NamedTuple

from django.db import connection, transaction
from django.db.models import Max, Q
from django.utils import timezone

from h2htalk import bulk, uploads
from scenarios import import_formats, import_rows, validation
from scenarios.import_formats import FORMATS, READERS, RowError, clean_row, detect_format
from scenarios.import_rows import REVISION_COLUMNS, SCENARIO_COLUMNS, Encoded
from scenarios.models import Persona, Revision, Scenario, Tag
from scenarios.services import (
    BACK_TO_REVIEW_NOTE,
    CONTENT_FIELDS,
    back_to_review_if_changed,
    changed_fields,
    snapshot,
)

BATCH = 500
MAX_ERRORS = 1000  # errors kept in the report; error_count has them all


class ImportFailed(Exception):
    def __init__(self, report: "ScenarioImportReport"):
        super().__init__(f"{report.error_count} error(s); nothing was written")
        self.report = report


@dataclass(slots=True)
class Row:
    line: int
    data: dict  # cleaned fields, persona as a name
    encoded: Encoded | None = None


@dataclass
class ScenarioImportReport:
    filename: str
    format: str
    rows: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    duplicates: int = 0
    personas_created: int = 0
    back_to_review: int = 0  # approved scenarios whose content the import changes
    written: bool = False
    error_count: int = 0
    errors: list[RowError] = field(default_factory=list)  # the first MAX_ERRORS
    duplicate_lines: list[dict] = field(default_factory=list)
    file_error: str = ""  # the whole file is refused (not text): one sentence, no line errors
    sample: list[dict] = field(default_factory=list)  # the first rows as they will be stored
    without_input: int = 0  # rows with no user message, history, memory or schedule
    without_persona: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return not self.error_count

    def add_error(self, error: RowError) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(error)


def count_lines(stream) -> int:
    """Lines in a binary stream (for a progress total), leaving it rewound."""
    return uploads.count_lines(stream)


def import_file(path_or_stream, filename: str, author=None, dry_run: bool = False, **options):
    """Check and (unless dry_run) write one file: run_import on a path or a binary stream."""
    stream = open(path_or_stream, "rb") if isinstance(path_or_stream, str) else path_or_stream  # noqa: SIM115
    try:
        return run_import(stream, filename, author, dry_run=dry_run, **options)
    finally:
        if isinstance(path_or_stream, str):
            stream.close()


def run_import(
    stream,
    filename: str,
    author=None,
    dry_run: bool = False,
    fmt: str = "auto",
    default_subtask: str = "",
    initial_state: str = Scenario.State.DRAFT,
    progress: Callable[[int], None] | None = None,
) -> ScenarioImportReport:
    """Check every row of a file and, unless dry_run, write them all or nothing: raises
    ImportFailed (its report lists every problem) when any row is bad. `progress(n)` hears
    the number of rows done so far."""
    options = {"fmt": fmt, "default_subtask": default_subtask, "initial_state": initial_state}
    if dry_run:
        return check_file(stream, filename, author, False, progress=progress, **options)[0]
    with transaction.atomic():
        report = check_file(stream, filename, author, True, progress=progress, **options)[0]
        if not report.ok:
            raise ImportFailed(report)  # (rolls back what was written)
        report.written = True
    return report


def check_file(
    stream,
    filename: str,
    author,
    write: bool,
    fmt: str = "auto",
    default_subtask: str = "",
    initial_state: str = Scenario.State.DRAFT,
    progress: Callable[[int], None] | None = None,
    earlier: "_Import | None" = None,
) -> tuple[ScenarioImportReport, "_Import"]:
    """Check one file and, when `write` and nothing is wrong so far, write it (the caller
    holds the transaction). `earlier`: the import of the files before it in one upload, whose
    keys, contents and personas this one continues. Returns the report and the import."""
    report = ScenarioImportReport(filename=PurePath(filename).name, format=fmt)
    importer = _Import(report, author, initial_state, write=write, earlier=earlier)
    refused = import_formats.not_text(stream.read(64 * 1024))
    stream.seek(0)
    if refused:
        report.file_error = refused
        report.add_error(RowError(0, "(file)", refused))
        return report, importer
    report.format = fmt = _format(stream, filename, fmt)
    items = READERS[fmt](stream, filename=filename, default_subtask=default_subtask)
    rows = _rows(report, items, default_subtask, importer.inline, initial_state)
    importer.run(rows, progress)
    return report, importer


def _format(stream, filename: str, fmt: str) -> str:
    if fmt == "auto":
        head = stream.read(64 * 1024)
        stream.seek(0)
        fmt = detect_format(filename, head)
    if fmt not in READERS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    return fmt


def _rows(
    report, items: Iterable, default_subtask: str, inline: dict, initial_state: str
) -> Iterator[Row]:
    """The cleaned rows of a reader's items; the problems go into the report, and the first
    SAMPLE_ROWS rows, as they will be stored, into its sample."""
    for line, item in items:
        report.rows += not (report.format == "csv" and line == 1)  # (not the header)
        if isinstance(item, RowError):
            report.add_error(item)
            continue
        try:
            data = clean_row(item, line, default_subtask, inline)
        except validation.FieldErrors as problems:
            for error in problems.errors:
                report.add_error(RowError(line, error.field, error.message))
            continue
        _note(report, line, data, initial_state)
        yield Row(line, data)


SAMPLE_ROWS = 3
INPUT_FIELDS = ("user_message", "history", "memory", "schedule")


def _note(report: ScenarioImportReport, line: int, data: dict, initial_state: str) -> None:
    """Count what a cleaned row lacks and keep it as a sample while there are few."""
    report.without_input += not any(data[name] for name in INPUT_FIELDS)
    report.without_persona += not data["persona"]
    if len(report.sample) < SAMPLE_ROWS:
        stored = {name: data[name] for name in data if name != "dimension"}
        report.sample.append({"line": line, **stored, "state": data["state"] or initial_state})


def _batches(rows: Iterator[Row]) -> Iterator[list[Row]]:
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


class _Current(NamedTuple):
    """What an existing scenario's fast comparison with a row needs (tags sorted)."""

    pk: int
    persona_id: int | None
    content_hash: str
    language: str
    implicit_need: bool
    evolving_need: bool
    risk_level: str
    source: str
    state: str
    tags: list


_CURRENT_FIELDS = ("pk", "persona_id", "content_hash", "language", "implicit_need")
_CURRENT_FIELDS += ("evolving_need", "risk_level", "source", "state")


class _Import:
    """One file's import: run() checks (and, when writing, writes) batch after batch."""

    # What one upload's files share: a later file continues the earlier ones.
    SHARED = ("personas", "absent", "keys", "hashes", "replaced", "written", "tag_ids")

    def __init__(self, report, author, initial_state: str, write: bool, earlier=None):
        self.report, self.initial_state, self.write = report, initial_state, write
        self.author_id = getattr(author, "pk", None)
        self.stamp = bulk.db_datetime(timezone.now())
        self.inline: dict = {}  # persona name -> definition (filled while rows are cleaned)
        self.personas: dict[str, Persona] = {}  # known: existing, or defined inline
        self.absent: set = set()  # names the database was asked about and has not
        self.unresolved: list[tuple[int, str]] = []  # (line, persona name) not known yet
        self.waiting: tuple[list, list] = ([], [])  # their creates and updates
        self.keys: dict = {}  # (subtask, external id) -> line
        self.hashes: dict = {}  # content hash of a new row -> (file name, line)
        self.replaced: dict = {}  # content hash an update replaced -> "existing scenario #pk"
        self.written: set = set()  # ids of the scenarios written by this import
        self.tag_ids: dict = {}
        self.keep_order = connection.vendor != "postgresql"  # (JSON stored as text)
        if earlier is not None:
            for name in self.SHARED:
                setattr(self, name, getattr(earlier, name))

    def run(self, rows: Iterator[Row], progress) -> None:
        for batch in _batches(rows):
            creates, updates = self._check(batch)
            if self.write and self.report.ok:
                self._create(creates)
                self._update(updates)
            if progress:
                progress(self.report.rows)
        self._finish()
        if progress:
            progress(self.report.rows)

    # ------------------------------------------------------------ checking

    def _check(self, batch: list[Row]) -> tuple[list[Row], list]:
        """Sort a batch into creates and updates (unchanged rows and duplicates counted)."""
        self._resolve_personas(batch)
        for row in batch:
            row.encoded = Encoded(row.data, self.keep_order)
        current = self._current([row for row in batch if row.data["external_id"]])
        known = self._known_hashes([row for row in batch if not row.data["external_id"]])
        creates, candidates = [], []
        for row in batch:
            if not row.data["external_id"]:
                self._unkeyed(row, known, creates)
                continue
            key = (row.data["subtask"], row.data["external_id"])
            if key in self.keys:
                filename, line = self.keys[key]
                where = "" if filename == self.report.filename else f"{filename} "
                message = f"{key[0]}/{key[1]} already appears on {where}line {line}"
                self.report.add_error(RowError(row.line, "external_id", message))
                continue
            self.keys[key] = (self.report.filename, row.line)
            existing = current.get(key)
            if existing is None:
                creates.append(row)
            elif self._same(row, existing):
                self.report.unchanged += 1
            else:
                candidates.append((row, existing))
        updates = self._changed(candidates)
        self.report.created += len(creates)
        return self._ready(creates, 0), self._ready(updates, 1)

    def _ready(self, rows: list, waiting: int) -> list:
        """The rows whose persona is known; the others wait for the end of the file."""
        ready = []
        for item in rows:
            name = (item[0] if waiting else item).data["persona"]
            (ready if not name or name in self.personas else self.waiting[waiting]).append(item)
        return ready

    def _resolve_personas(self, batch: list[Row]) -> None:
        names = {row.data["persona"] for row in batch} - self.personas.keys() - {""}
        ask = names - self.absent
        if ask:
            self.personas |= {p.name: p for p in Persona.objects.filter(name__in=ask)}
            self.absent |= ask - self.personas.keys()
        for name in sorted(names - self.personas.keys()):
            if name in self.inline:
                self._define_persona(name)
        for row in batch:
            name = row.data["persona"]
            if name and name not in self.personas:
                self.unresolved.append((row.line, name))

    def _define_persona(self, name: str) -> None:
        definition = self.inline[name]
        persona = Persona.objects.create(**definition) if self.write else Persona(**definition)
        self.personas[name] = persona
        self.report.personas_created += 1

    def _current(self, keyed: list[Row]) -> dict:
        """(subtask, external id) -> _Current, for the rows' keys already in the bank."""
        if not keyed:
            return {}
        ids = defaultdict(set)
        for row in keyed:
            ids[row.data["subtask"]].add(row.data["external_id"])
        # Per subtask, with the unique index's own condition: PostgreSQL then reads that index
        # (it cannot prove the condition from an IN list of over 100 values).
        wanted = Q()
        for subtask, external_ids in ids.items():
            wanted |= Q(subtask=subtask, external_id__in=external_ids) & ~Q(external_id="")
        found = (
            Scenario.objects.filter(wanted)
            .order_by()
            .values_list("subtask", "external_id", *_CURRENT_FIELDS)
        )
        found = {(subtask, external_id): values for subtask, external_id, *values in found}
        tags = {values[0]: [] for values in found.values()}
        links = Scenario.tags.through.objects.filter(scenario_id__in=tags)
        for scenario_id, name in links.values_list("scenario_id", "tag__name"):
            tags[scenario_id].append(name)
        return {key: _Current(*values, sorted(tags[values[0]])) for key, values in found.items()}

    def _same(self, row: Row, current: _Current) -> bool:
        """Whether a row leaves its scenario as it is, without reading the scenario's content:
        equal content hashes (services.content_hash) and the same persona (by id: a persona
        may have been renamed since the hash was taken) and other fields."""
        data = row.data
        persona = self.personas.get(data["persona"]) if data["persona"] else None
        persona_id = persona.pk if persona is not None else None
        return (
            row.encoded.content_hash == current.content_hash
            and bool(data["persona"]) == (current.persona_id is not None)
            and persona_id == current.persona_id
            and data["language"] == current.language
            and data["implicit_need"] == current.implicit_need
            and data["evolving_need"] == current.evolving_need
            and data["risk_level"] == current.risk_level
            and data["source"] == current.source
            and (data["state"] or current.state) == current.state
            and sorted(data["tags"]) == current.tags
        )

    def _changed(self, candidates: list) -> list[tuple[Row, Scenario]]:
        """(row, scenario) of the candidates whose snapshot the row changes (the others are
        unchanged); counts the updates and those sending approved scenarios back to review."""
        if not candidates:
            return []
        scenarios = (
            Scenario.objects.select_related("persona")
            .prefetch_related("tags")
            .in_bulk([existing.pk for _, existing in candidates])
        )
        changed = []
        for row, existing in candidates:
            scenario = scenarios[existing.pk]
            current = snapshot(scenario)
            persona = self.personas.get(row.data["persona"]) or Persona(name=row.data["persona"])
            incoming = _scenario_from(row.data, persona, scenario.state)
            incoming = snapshot(incoming, tags=row.data["tags"])
            if not changed_fields(current, incoming):
                self.report.unchanged += 1
                continue
            changed.append((row, scenario))
            self.report.back_to_review += _goes_back_to_review(current, incoming)
        self.report.updated += len(changed)
        return changed

    def _unkeyed(self, row: Row, known: dict, creates: list) -> None:
        digest = row.encoded.content_hash
        first = known.get(digest) or self._where(self.hashes.get(digest))
        if first:
            self.report.duplicates += 1
            self.report.duplicate_lines.append({"line": row.line, "duplicate_of": first})
        else:
            self.hashes[digest] = (self.report.filename, row.line)
            creates.append(row)

    def _where(self, place: tuple | None) -> str:
        """ "line n" of this file, "FILE line n" of an earlier one of the upload."""
        if place is None:
            return ""
        filename, line = place
        return f"line {line}" if filename == self.report.filename else f"{filename} line {line}"

    def _known_hashes(self, unkeyed: list[Row]) -> dict:
        """Content hash -> "existing scenario #pk" for the rows' hashes in the bank as it was
        before this import (scenarios it wrote left out, content it replaced counted)."""
        wanted = {row.encoded.content_hash for row in unkeyed} - self.hashes.keys()
        known = {}
        if wanted:
            found = Scenario.objects.filter(content_hash__in=wanted)
            for pk, digest in found.values_list("pk", "content_hash"):
                if pk not in self.written:
                    known.setdefault(digest, f"existing scenario #{pk}")
        for digest in wanted & self.replaced.keys():
            known.setdefault(digest, self.replaced[digest])
        return known

    def _finish(self) -> None:
        """The rows that waited for a persona: an error if no line defined it, else written."""
        for line, name in self.unresolved:
            if name not in self.personas and name not in self.inline:
                message = f"unknown persona {name!r}: create it first"
                self.report.add_error(RowError(line, "persona", message))
        undefined = self.inline.keys() - self.personas.keys()  # (only on lines with errors)
        if undefined:
            existing = Persona.objects.filter(name__in=undefined).values_list("name", flat=True)
            self.report.personas_created += len(undefined - set(existing))
        self.report.errors.sort(key=lambda error: error.line)
        if self.write and self.report.ok:
            self._create(self.waiting[0])
            self._update(self.waiting[1])

    # ------------------------------------------------------------ writing

    def _link_tags(self, links: list[tuple[int, list[str]]]) -> None:
        """Tag the scenarios: (scenario id, tag names), tags created as needed."""
        names = {name for _, tags in links for name in tags} - self.tag_ids.keys()
        if names:
            Tag.objects.bulk_create([Tag(name=name) for name in names], ignore_conflicts=True)
            self.tag_ids |= dict(Tag.objects.filter(name__in=names).values_list("name", "pk"))
        rows = [(pk, self.tag_ids[name]) for pk, tags in links for name in tags]
        bulk.insert_rows(Scenario.tags.through, ["scenario_id", "tag_id"], rows)

    def _create(self, rows: list[Row]) -> None:
        """New scenarios (ids reserved first), their tags and first revisions."""
        if not rows:
            return
        scenarios, revisions = [], []
        ids = bulk.reserve_ids(Scenario, len(rows))
        filename = self.report.filename
        for pk, row in zip(ids, rows, strict=True):
            data, encoded = row.data, row.encoded
            state = data["state"] or self.initial_state
            persona = self.personas[data["persona"]].pk if data["persona"] else None
            scenarios.append(
                import_rows.scenario_row(
                    pk, data, encoded, persona, state, self.author_id, self.stamp
                )
            )
            note = f"imported from {filename} line {row.line}"
            text = import_rows.snapshot_text(data, encoded, state)
            revisions.append(
                import_rows.revision_row(pk, 1, self.author_id, self.stamp, note, text, "{}")
            )
        bulk.insert_rows(Scenario, SCENARIO_COLUMNS, scenarios)
        self._link_tags([(pk, row.data["tags"]) for pk, row in zip(ids, rows, strict=True)])
        bulk.insert_rows(Revision, REVISION_COLUMNS, revisions)
        self.written.update(ids)

    def _update(self, pairs: list[tuple[Row, Scenario]]) -> None:
        """Existing scenarios take their rows' content (back to review when approved and their
        content changed), with new tags and a revision each."""
        if not pairs:
            return
        scenarios = [scenario for _, scenario in pairs]
        last = dict(
            Revision.objects.filter(scenario__in=scenarios)
            .values_list("scenario_id")
            .annotate(last=Max("number"))
        )
        revisions, now = [], timezone.now()
        for row, scenario in pairs:
            before = snapshot(scenario)
            self.replaced.setdefault(scenario.content_hash, f"existing scenario #{scenario.pk}")
            sent_back = _apply(row, scenario, self.personas, before)
            scenario.updated_at = now
            after = snapshot(scenario, tags=row.data["tags"])
            note = f"updated from {self.report.filename} line {row.line}"
            note += f"; {BACK_TO_REVIEW_NOTE}" if sent_back else ""
            number = last.get(scenario.pk, 0) + 1
            changes = bulk.json_text(changed_fields(before, after))
            revisions.append(
                import_rows.revision_row(
                    scenario.pk,
                    number,
                    self.author_id,
                    self.stamp,
                    note,
                    bulk.json_text(after),
                    changes,
                )
            )
        fields = [f.name for f in Scenario._meta.concrete_fields if not f.primary_key]
        Scenario.objects.bulk_update(scenarios, [f for f in fields if f != "created_at"])
        Scenario.tags.through.objects.filter(scenario__in=scenarios).delete()
        self._link_tags([(scenario.pk, row.data["tags"]) for row, scenario in pairs])
        bulk.insert_rows(Revision, REVISION_COLUMNS, revisions)
        self.written.update(scenario.pk for scenario in scenarios)


def _scenario_from(data: dict, persona: Persona | None, state: str) -> Scenario:
    fields = {k: v for k, v in data.items() if k not in ("tags", "persona", "state")}
    scenario = Scenario(**fields, state=data["state"] or state)
    scenario.persona = persona if data["persona"] else None
    return scenario


def _goes_back_to_review(current: dict, incoming: dict) -> bool:
    """As back_to_review_if_changed, on snapshots (for the preview of an import)."""
    return (
        current["state"] == Scenario.State.APPROVED
        and incoming["state"] == Scenario.State.APPROVED
        and any(current[name] != incoming[name] for name in CONTENT_FIELDS)
    )


def _apply(row: Row, scenario: Scenario, personas: dict, before: dict) -> bool:
    """Set an existing scenario's fields from a row (not saved; `before` is its snapshot);
    whether it goes back to review (approved, and its content changed)."""
    for name, value in row.data.items():
        if name not in ("tags", "persona", "state"):
            setattr(scenario, name, value)
    scenario.persona = personas.get(row.data["persona"]) if row.data["persona"] else None
    scenario.state = row.data["state"] or scenario.state
    sent_back = back_to_review_if_changed(scenario, before)
    scenario.refresh_derived()
    return sent_back
