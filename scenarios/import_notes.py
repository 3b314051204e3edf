"""What an import preview says about each file: what it holds (a file of the benchmark's
release is recognised) and what its scenarios still need before annotators can rate them.
Written at display time, in the reader's language, from the stored report."""

from pathlib import PurePath

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from h2htalk import display
from scenarios.import_formats import RELEASE_LINES
from scenarios.models import Scenario

FORMAT_NAMES = {
    "jsonl": "Platform JSONL",
    "csv": "Platform CSV",
    "sharegpt": "ShareGPT",
    "release": "H2HTalk release",
}


def file_reports(report: dict) -> list[dict]:
    """The per-file reports of an upload's report (a report stored before uploads could hold
    several files is its own one file; none for a job without a report)."""
    if not isinstance(report, dict) or "rows" not in report:
        return []
    return report.get("files") or [report]


def holds(file: dict) -> str:
    """One or two sentences: what the file is and holds."""
    if file.get("file_error"):
        return ""
    if file.get("format") == "release":
        subtask = PurePath(file.get("filename") or "").name.split(".", 1)[0]
        known = RELEASE_LINES.get(subtask)
        text = _(
            "A file of the H2HTalk release, subtask %(subtask)s: reference answers only, no "
            "inputs (no user message, history, persona or memory). Line n becomes question "
            "qNNN."
        ) % {"subtask": display.SUBTASK_NAMES.get(subtask, subtask)}
        if known == file.get("rows"):
            text += " " + _("All %(n)s lines of the released file.") % {"n": f"{known:,}"}
        elif known:
            text += " " + _("The released file has %(known)s lines; this one has %(rows)s.") % {
                "known": f"{known:,}",
                "rows": f"{file.get('rows', 0):,}",
            }
        return text
    name = FORMAT_NAMES.get(file.get("format"), file.get("format") or "?")
    text = _("%(format)s scenarios.") % {"format": name}
    if file.get("without_input"):
        text += " " + ngettext(
            "%(n)s of them has no input (no user message, history, memory or schedule).",
            "%(n)s of them have no input (no user message, history, memory or schedule).",
            file["without_input"],
        ) % {"n": f"{file['without_input']:,}"}
    return text


def needs(file: dict) -> list[str]:
    """What the file's scenarios need before they can be rated (empty for a refused file)."""
    if file.get("file_error") or not file.get("rows"):
        return []
    said = []
    states = {row.get("state") for row in file.get("sample") or ()}
    if states - {Scenario.State.APPROVED}:
        said.append(
            _(
                "Approval: they come in as drafts. On the scenario list choose “Submit for "
                "review”, then “Approve” (an admin may approve with the review skipped)."
            )
        )
    said.append(
        _(
            "Responses from at least two companions to each scenario: import them on "
            "Companions → Import responses, or generate them."
        )
    )
    if file.get("without_input"):
        said.append(
            ngettext(
                "Inputs, for annotators to see what is answered: %(n)s scenario holds only a "
                "reference answer, so the rating page shows no conversation before the two "
                "responses. A platform JSONL or CSV row with the same subtask and external id "
                "(q001 …) fills them in.",
                "Inputs, for annotators to see what is answered: %(n)s scenarios hold only a "
                "reference answer, so the rating page shows no conversation before the two "
                "responses. Platform JSONL or CSV rows with the same subtask and external ids "
                "(q001 …) fill them in.",
                file["without_input"],
            )
            % {"n": f"{file['without_input']:,}"}
        )
    return said
