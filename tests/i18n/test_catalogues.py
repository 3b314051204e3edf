"""The message catalogues in locale/: the compiled .mo files are committed (a fresh machine
needs no GNU gettext for `make demo`), so each must say exactly what its .po says; and every
string of the annotator's pages has its Simplified Chinese translation."""

import gettext
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.i18n.po import read_po

LOCALE = REPO / "locale"
CATALOGUES = sorted(LOCALE.glob("*/LC_MESSAGES/*.po"))
# The files whose strings an annotator reads (the later pass adds the researchers' and admins').
ANNOTATOR_SOURCES = (
    "templates/base.html",
    "templates/registration/",
    "templates/accounts/set_password.html",
    "templates/annotation/",
    "templates/403.html",
    "templates/404.html",
    "templates/500.html",
    "templates/503.html",
    "templates/error.html",
    "templates/confirm.html",
    "templates/no_role.html",
    "annotation/views.py",
    "annotation/forms.py",
    "annotation/queue.py",
    "annotation/access.py",
    "annotation/study/",  # crowd participants (and the study link's researcher page)
    "templates/study/",
    "annotation/qualification/",
    "h2htalk/auth.py",
    "h2htalk/errors.py",
    "h2htalk/middleware.py",
    "h2htalk/roles.py",
    "h2htalk/accounts/views.py",
    "static/js/rate.js",
    "static/js/practice.js",
)

# The files whose strings researchers and admins read (their pages, forms, messages, job
# headings, chart labels and display names).
RESEARCHER_SOURCES = (
    "templates/scenarios/",
    "templates/companions/",
    "templates/campaigns/",
    "templates/scoring/",
    "templates/planning/",
    "templates/judges/",
    "templates/calibration/",
    "templates/releases/",
    "templates/jobs/",
    "templates/accounts/",
    "templates/admin_home.html",
    "templates/api_docs.html",
    "templates/_stat_meanings.html",
    "scenarios/",
    "annotation/",
    "scoring/",
    "h2htalk/",
)


def compiled(po: Path) -> dict:
    """The messages of the .mo beside `po`, as gettext reads them (plural forms keyed (id, n))."""
    mo = po.with_suffix(".mo")
    assert mo.exists(), f"{mo.relative_to(REPO)} is missing: run `make messages` and commit it"
    with mo.open("rb") as handle:
        catalogue = dict(gettext.GNUTranslations(handle)._catalog)
    catalogue.pop("", None)  # the header
    return catalogue


def expected(po: Path) -> dict:
    """What compiling `po` gives: its translated, not fuzzy, entries."""
    messages = {}
    for entry in read_po(po.read_text("utf-8")):
        if not entry.msgid or not entry.translated:
            continue
        if entry.plural is None:
            messages[entry.key] = entry.strings[0]
        else:
            messages.update({(entry.key, n): text for n, text in entry.strings.items()})
    return messages


def test_there_are_catalogues_for_the_chinese_interface():
    names = {path.relative_to(LOCALE).as_posix() for path in CATALOGUES}
    assert {"zh_Hans/LC_MESSAGES/django.po", "zh_Hans/LC_MESSAGES/djangojs.po"} <= names


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda path: path.relative_to(LOCALE).as_posix())
def test_the_committed_mo_says_what_its_po_says(po):
    mo, source = compiled(po), expected(po)
    stale = sorted(str(key) for key in source if mo.get(key) != source[key])
    extra = sorted(str(key) for key in set(mo) - set(source))
    assert not stale and not extra, (
        f"{po.with_suffix('.mo').relative_to(REPO)} is out of date (run `make messages`): "
        f"changed or missing {stale[:5]}, no longer in the .po {extra[:5]}"
    )


def untranslated(sources: tuple[str, ...]) -> list[str]:
    """The zh_Hans entries with a reference in `sources` that have no (or a fuzzy) translation."""
    missing = []
    for po in (LOCALE / "zh_Hans" / "LC_MESSAGES").glob("*.po"):
        for entry in read_po(po.read_text("utf-8")):
            where = [ref for ref in entry.references if ref.startswith(sources)]
            if entry.msgid and where and not entry.translated:
                missing.append(f"{entry.msgid!r} ({where[0]})")
    return missing


def test_every_string_of_the_annotators_pages_is_translated():
    missing = untranslated(ANNOTATOR_SOURCES)
    assert not missing, "untranslated in zh_Hans:\n" + "\n".join(missing)


def test_every_string_of_the_researchers_and_admins_pages_is_translated():
    missing = untranslated(RESEARCHER_SOURCES)
    assert not missing, "untranslated in zh_Hans:\n" + "\n".join(missing)


def test_the_researcher_sources_are_in_the_catalogue():
    """The list names real places: the catalogue has strings from each of them."""
    references = {
        ref
        for entry in read_po((LOCALE / "zh_Hans" / "LC_MESSAGES" / "django.po").read_text("utf-8"))
        for ref in entry.references
    }
    empty = [s for s in RESEARCHER_SOURCES if not any(r.startswith(s) for r in references)]
    assert not empty, f"no string of {empty} in the catalogue"


def test_the_reader_finds_contexts_plurals_and_fuzzy_entries():
    text = (
        'msgid ""\nmsgstr ""\n"Plural-Forms: nplurals=1; plural=0;\\n"\n\n'
        '#: a.py:1\nmsgctxt "role"\nmsgid "admin"\nmsgstr "管理员"\n\n'
        '#, fuzzy\nmsgid "Old"\nmsgstr "旧"\n\n'
        'msgid "%(n)d turn"\nmsgid_plural "%(n)d turns"\nmsgstr[0] ""\n"%(n)d 轮"\n\n'
        '#~ msgid "Gone"\n#~ msgstr "没了"\n'
    )
    entries = {entry.msgid: entry for entry in read_po(text)}
    assert set(entries) == {"", "admin", "Old", "%(n)d turn"}
    assert entries["admin"].key == "role\x04admin" and entries["admin"].references == ["a.py:1"]
    assert not entries["Old"].translated
    assert entries["%(n)d turn"].strings == {0: "%(n)d 轮"}
