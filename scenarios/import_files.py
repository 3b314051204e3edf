"""One upload of several scenario files (sent together, or as one .zip): one preview, one
transaction. Each file is read as its own (format, subtask from its name) and reported apart;
a later file continues the earlier ones (a key or content repeated across files is caught), and
one bad file writes nothing at all.

The upload's report keeps the summed counts at the top (as a one-file report has them) and one
report per file under `files`.
"""

import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import PurePath

from django.db import transaction

from h2htalk import uploads
from scenarios.importers import ScenarioImportReport, check_file
from scenarios.models import Scenario

SUMMED = (
    "rows",
    "created",
    "updated",
    "unchanged",
    "duplicates",
    "personas_created",
    "back_to_review",
    "error_count",
    "without_input",
    "without_persona",
)
SPOOL_BYTES = 1 << 24


class UploadFailed(Exception):
    def __init__(self, report: dict):
        super().__init__(f"{report['error_count']} error(s); nothing was written")
        self.report = report


def is_archive(stream, filename: str) -> bool:
    head = stream.read(4)
    stream.seek(0)
    return head == b"PK\x03\x04" and PurePath(filename).suffix.lower() == ".zip"


@contextmanager
def opened_files(stream, filename: str) -> Iterator[list[tuple[str, object]]]:
    """(name, seekable binary stream) of the upload's files: the file itself, or the members
    of a zip (folders, hidden files and macOS resource forks left out), within the archive
    limits (h2htalk.uploads)."""
    if not is_archive(stream, filename):
        yield [(filename, stream)]
        return
    with zipfile.ZipFile(stream) as archive:
        problems = uploads.zip_problems(archive)
        if problems:
            raise uploads.ArchiveRefused("; ".join(problems))
        budget = uploads.ArchiveBudget()
        opened: list[tuple[str, object]] = []
        try:
            for info in archive.infolist():
                name = PurePath(info.filename)
                hidden = any(part.startswith((".", "__MACOSX")) for part in name.parts)
                if info.is_dir() or hidden:
                    continue
                copy = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
                opened.append((name.name, copy))
                with budget.wrap(archive.open(info)) as member:
                    for chunk in iter(lambda member=member: member.read(1 << 16), b""):
                        copy.write(chunk)
                copy.seek(0)
            yield opened
        finally:
            for _name, copy in opened:
                copy.close()


def import_upload(
    stream,
    filename: str,
    author=None,
    dry_run: bool = True,
    fmt: str = "auto",
    default_subtask: str = "",
    initial_state: str = Scenario.State.DRAFT,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Check every file of the upload and, unless dry_run, write them all or nothing: raises
    UploadFailed (its report lists every file's problems) when any is bad. `progress(done,
    total)` hears lines."""
    options = {"fmt": fmt, "default_subtask": default_subtask, "initial_state": initial_state}
    with opened_files(stream, filename) as files:
        lines = [uploads.count_lines(file) for _name, file in files]  # (rewound)
        if not dry_run:
            with transaction.atomic():
                report = _check_all(files, lines, author, True, options, progress)
                if report["error_count"]:
                    raise UploadFailed(report)  # (rolls back every file)
                report["written"] = True
                for one in report["files"]:
                    one["written"] = True
            return report
        return _check_all(files, lines, author, False, options, progress)


def _check_all(files, lines: list[int], author, write: bool, options: dict, progress) -> dict:
    reports: list[ScenarioImportReport] = []
    earlier, total = None, sum(lines)
    for (name, stream), before in zip(files, _starts(lines), strict=True):

        def heard(n, before=before):
            if progress:
                progress(min(before + n, total), total)

        writing = write and all(report.ok for report in reports)  # none after a bad file
        report, earlier = check_file(
            stream, name, author, writing, progress=heard, earlier=earlier, **options
        )
        reports.append(report)
    if progress:
        progress(total, total)
    return combined(reports, filename_of(files))


def _starts(lines: list[int]) -> list[int]:
    """Lines before each file."""
    starts, done = [], 0
    for n in lines:
        starts.append(done)
        done += n
    return starts


def filename_of(files) -> str:
    return files[0][0] if len(files) == 1 else f"{len(files)} files"


def combined(reports: list[ScenarioImportReport], filename: str) -> dict:
    """The upload's report: summed counts, every error with its file, one report per file."""
    files = [report.as_dict() for report in reports]
    errors = [{**error, "file": one["filename"]} for one in files for error in one["errors"]]
    formats = sorted({one["format"] for one in files})
    return {
        "filename": filename,
        "format": formats[0] if len(formats) == 1 else ", ".join(formats),
        **{key: sum(one[key] for one in files) for key in SUMMED},
        "written": False,
        "errors": errors[:1000],
        "duplicate_lines": [d for one in files for d in one["duplicate_lines"]][:1000],
        "files": files,
    }


def refused_upload(filename: str, problem: str) -> dict:
    """The report of an upload refused as a whole (an archive over a limit)."""
    report = ScenarioImportReport(filename=PurePath(filename).name, format="zip")
    report.file_error = problem
    report.error_count = 1
    report.errors = []
    return combined([report], report.filename) | {
        "errors": [{"line": 0, "field": "(file)", "message": problem, "file": report.filename}]
    }
