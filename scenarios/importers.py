"""Scenario import: read (scenarios.import_formats) → validate → plan → (dry run | atomic write).

Every problem is reported with its file line and field; if there is any, nothing is written.
A row with an external id updates the scenario of that subtask and id; one without is new
unless its content repeats an existing scenario or an earlier line (a duplicate, skipped).
"""

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import PurePath

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from h2htalk import bulk, uploads
from scenarios import validation
from scenarios.import_formats import FORMATS, READERS, RowError, clean_row, detect_format
from scenarios.models import Persona, Revision, Scenario, Tag
from scenarios.services import (
    BACK_TO_REVIEW_NOTE,
    CONTENT_FIELDS,
    back_to_review_if_changed,
    changed_fields,
    snapshot,
)

BATCH = 500


class ImportFailed(Exception):
    def __init__(self, report: "ScenarioImportReport"):
        super().__init__(f"{len(report.errors)} error(s); nothing was written")
        self.report = report


@dataclass
class Row:
    line: int
    data: dict  # cleaned fields, persona as a name
    content_hash: str = ""


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
    errors: list[RowError] = field(default_factory=list)
    duplicate_lines: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return not self.errors


def count_lines(stream) -> int:
    """Lines in a binary stream (for a progress total), leaving it rewound."""
    return uploads.count_lines(stream)


# ---------------------------------------------------------------- planning and writing


@dataclass
class Plan:
    report: ScenarioImportReport
    creates: list[Row] = field(default_factory=list)
    updates: list[tuple[Row, Scenario]] = field(default_factory=list)
    inline_personas: dict = field(default_factory=dict)
    personas: dict = field(default_factory=dict)  # name -> Persona (existing)


def _scenario_from(data: dict, personas: dict, initial_state: str) -> Scenario:
    fields = {k: v for k, v in data.items() if k not in ("tags", "persona", "state")}
    scenario = Scenario(**fields, state=data["state"] or initial_state)
    scenario.persona = personas.get(data["persona"]) if data["persona"] else None
    return scenario


def build_plan(
    stream,
    filename: str,
    fmt: str = "auto",
    default_subtask: str = "",
    initial_state: str = Scenario.State.DRAFT,
    progress: Callable[[int], None] | None = None,
) -> Plan:
    if fmt == "auto":
        head = stream.read(64 * 1024)
        stream.seek(0)
        fmt = detect_format(filename, head)
    if fmt not in READERS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    report = ScenarioImportReport(filename=PurePath(filename).name, format=fmt)
    plan = Plan(report=report)
    rows: list[Row] = []
    for count, (line, item) in enumerate(
        READERS[fmt](stream, filename=filename, default_subtask=default_subtask), start=1
    ):
        is_header = fmt == "csv" and line == 1
        report.rows += not is_header
        if isinstance(item, RowError):
            report.errors.append(item)
            continue
        try:
            rows.append(Row(line, clean_row(item, line, default_subtask, plan.inline_personas)))
        except validation.FieldError as error:
            report.errors.append(RowError(line, error.field, error.message))
        if progress and count % BATCH == 0:
            progress(count)
    if progress:
        progress(report.rows)
    _match_personas(plan, rows)
    _match_existing(plan, rows, initial_state)
    return plan


def _match_personas(plan: Plan, rows: list[Row]) -> None:
    names = {row.data["persona"] for row in rows if row.data["persona"]}
    plan.personas = {p.name: p for p in Persona.objects.filter(name__in=names)}
    for row in rows:
        name = row.data["persona"]
        if name and name not in plan.personas and name not in plan.inline_personas:
            plan.report.errors.append(
                RowError(row.line, "persona", f"unknown persona {name!r}: create it first")
            )


def _match_existing(plan: Plan, rows: list[Row], initial_state: str) -> None:
    """Sort the rows into creates, updates, unchanged and duplicates (counted in the report)."""
    report = plan.report
    existing = _existing_by_key(rows)
    preview_personas = {**{n: Persona(name=n) for n in plan.inline_personas}, **plan.personas}
    hashes = _existing_hashes(rows, preview_personas, initial_state)
    seen_keys: dict = {}
    for row in rows:
        if row.data["external_id"]:
            _plan_keyed(plan, row, existing, seen_keys, preview_personas)
        else:
            first = hashes.get(row.content_hash)
            if first:
                report.duplicates += 1
                report.duplicate_lines.append({"line": row.line, "duplicate_of": first})
            else:
                hashes[row.content_hash] = f"line {row.line}"
                plan.creates.append(row)
    report.created = len(plan.creates)
    report.updated = len(plan.updates)
    report.personas_created = len(set(plan.inline_personas) - set(plan.personas))


def _existing_by_key(rows: list[Row]) -> dict:
    """(subtask, external id) -> the scenario already in the bank, for the rows with an id."""
    existing = {}
    keyed = [row for row in rows if row.data["external_id"]]
    for start in range(0, len(keyed), BATCH):
        chunk = keyed[start : start + BATCH]
        for scenario in (
            Scenario.objects.filter(
                subtask__in={r.data["subtask"] for r in chunk},
                external_id__in={r.data["external_id"] for r in chunk},
            )
            .select_related("persona")
            .prefetch_related("tags")
        ):
            existing[(scenario.subtask, scenario.external_id)] = scenario
    return existing


def _existing_hashes(rows: list[Row], personas: dict, initial_state: str) -> dict:
    """Content hash -> "existing scenario #pk" for the rows without an id (each row gets its
    hash): such a row repeating a scenario of the bank is a duplicate."""
    hashes = {}
    unkeyed = [row for row in rows if not row.data["external_id"]]
    for row in unkeyed:
        scenario = _scenario_from(row.data, personas, initial_state)
        scenario.refresh_derived()
        row.content_hash = scenario.content_hash
    for start in range(0, len(unkeyed), BATCH):
        chunk = {row.content_hash for row in unkeyed[start : start + BATCH]}
        for pk, digest in Scenario.objects.filter(content_hash__in=chunk).values_list(
            "pk", "content_hash"
        ):
            hashes.setdefault(digest, f"existing scenario #{pk}")
    return hashes


def _plan_keyed(plan: Plan, row: Row, existing: dict, seen_keys: dict, personas: dict) -> None:
    """A row with an external id: an error if an earlier line has it, else create, update or
    leave unchanged the scenario of that key."""
    data, report = row.data, plan.report
    key = (data["subtask"], data["external_id"])
    if key in seen_keys:
        message = f"{key[0]}/{key[1]} already appears on line {seen_keys[key]}"
        report.errors.append(RowError(row.line, "external_id", message))
        return
    seen_keys[key] = row.line
    current = existing.get(key)
    if current is None:
        plan.creates.append(row)
        return
    incoming = _incoming_snapshot(data, current, personas)
    current_snapshot = snapshot(current)
    if changed_fields(current_snapshot, incoming):
        plan.updates.append((row, current))
        if _goes_back_to_review(current_snapshot, incoming):
            report.back_to_review += 1
    else:
        report.unchanged += 1


def _goes_back_to_review(current: dict, incoming: dict) -> bool:
    """As back_to_review_if_changed, on snapshots (for the preview of an import)."""
    return (
        current["state"] == Scenario.State.APPROVED
        and incoming["state"] == Scenario.State.APPROVED
        and any(current[name] != incoming[name] for name in CONTENT_FIELDS)
    )


def _incoming_snapshot(data: dict, current: Scenario, personas: dict) -> dict:
    incoming = _scenario_from(data, personas, current.state)
    return snapshot(incoming, tags=data["tags"])


def _ensure_tags(names: Iterable[str]) -> dict[str, Tag]:
    names = set(names)
    Tag.objects.bulk_create([Tag(name=n) for n in names], ignore_conflicts=True)
    return {tag.name: tag for tag in Tag.objects.filter(name__in=names)}


@transaction.atomic
def write_plan(
    plan: Plan,
    author,
    initial_state: str = Scenario.State.DRAFT,
    progress: Callable[[int], None] | None = None,
) -> ScenarioImportReport:
    """Write a plan without errors, all or nothing (else ImportFailed): new personas, then the
    new scenarios and then the updates in batches of BATCH, each with its tags and revision,
    every table written set-based (h2htalk.bulk: COPY on PostgreSQL)."""
    report = plan.report
    if report.errors:
        raise ImportFailed(report)
    new_personas = [
        Persona(**definition)
        for name, definition in plan.inline_personas.items()
        if name not in plan.personas
    ]
    plan.personas |= {p.name: p for p in Persona.objects.bulk_create(new_personas)}
    rows = [*plan.creates, *(row for row, _ in plan.updates)]
    tags = _ensure_tags(t for row in rows for t in row.data["tags"])
    writer = _Writer(plan, author, tags, timezone.now())
    done = 0
    for start in range(0, len(plan.creates), BATCH):
        chunk = plan.creates[start : start + BATCH]
        writer.create(chunk, initial_state)
        done += len(chunk)
        if progress:
            progress(done)
    for start in range(0, len(plan.updates), BATCH):
        chunk = plan.updates[start : start + BATCH]
        writer.update(chunk)
        done += len(chunk)
        if progress:
            progress(done)
    report.written = True
    return report


class _Writer:
    """Writes batches of a plan: scenarios, their tag links and revisions, a statement each."""

    def __init__(self, plan: Plan, author, tags: dict, now):
        self.plan, self.author, self.tags, self.now = plan, author, tags, now
        self.filename = plan.report.filename

    def _revision(self, scenario, number, note, after, changes=None) -> Revision:
        return Revision(
            scenario_id=scenario.pk,
            number=number,
            author=self.author,
            action=Revision.Action.IMPORTED,
            note=note[:300],
            snapshot=after,
            changes=changes or {},
        )

    def _link_tags(self, scenarios: list[Scenario], rows: list[Row]) -> None:
        Through = Scenario.tags.through
        links = [
            (s.pk, self.tags[name].pk)
            for s, r in zip(scenarios, rows, strict=True)
            for name in r.data["tags"]
        ]
        bulk.insert_rows(Through, ["scenario_id", "tag_id"], links)

    def create(self, chunk: list[Row], initial_state: str) -> None:
        """New scenarios (ids reserved first) with their tags and first revision."""
        scenarios = [_scenario_from(r.data, self.plan.personas, initial_state) for r in chunk]
        for scenario, pk in zip(scenarios, bulk.reserve_ids(Scenario, len(chunk)), strict=True):
            scenario.pk = pk
            scenario.created_by = self.author
            scenario.refresh_derived()
        bulk.insert_objects(Scenario, scenarios, self.now, with_pk=True)
        self._link_tags(scenarios, chunk)
        revisions = [
            self._revision(
                s,
                1,
                f"imported from {self.filename} line {r.line}",
                snapshot(s, tags=r.data["tags"]),
            )
            for s, r in zip(scenarios, chunk, strict=True)
        ]
        bulk.insert_objects(Revision, revisions, self.now)

    def update(self, chunk: list[tuple[Row, Scenario]]) -> None:
        """Existing scenarios take their rows' content (back to review when approved and their
        content changed), with new tags and a revision each."""
        rows = [row for row, _ in chunk]
        scenarios = [scenario for _, scenario in chunk]
        last = dict(
            Revision.objects.filter(scenario__in=scenarios)
            .values_list("scenario_id")
            .annotate(last=Max("number"))
        )
        revisions = []
        for row, scenario in chunk:
            before = snapshot(scenario)
            sent_back = _apply(row, scenario, self.plan.personas, before)
            scenario.updated_at = self.now
            after = snapshot(scenario, tags=row.data["tags"])
            note = f"updated from {self.filename} line {row.line}"
            note += f"; {BACK_TO_REVIEW_NOTE}" if sent_back else ""
            changes = changed_fields(before, after)
            revisions.append(
                self._revision(scenario, last.get(scenario.pk, 0) + 1, note, after, changes)
            )
        fields = [f.name for f in Scenario._meta.concrete_fields if not f.primary_key]
        Scenario.objects.bulk_update(scenarios, [f for f in fields if f != "created_at"])
        Scenario.tags.through.objects.filter(scenario__in=scenarios).delete()
        self._link_tags(scenarios, rows)
        bulk.insert_objects(Revision, revisions, self.now)


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


def import_file(path_or_stream, filename: str, author=None, dry_run: bool = False, **options):
    """Plan and (unless dry_run) write one file. Raises ImportFailed when any row is bad."""
    progress = options.pop("progress", None)
    initial_state = options.get("initial_state", Scenario.State.DRAFT)
    stream = open(path_or_stream, "rb") if isinstance(path_or_stream, str) else path_or_stream  # noqa: SIM115
    try:
        plan = build_plan(stream, filename, progress=progress, **options)
    finally:
        if isinstance(path_or_stream, str):
            stream.close()
    if dry_run:
        return plan.report
    return write_plan(plan, author, initial_state=initial_state, progress=progress)
