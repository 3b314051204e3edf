"""A small reader of gettext catalogues (.po) with the standard library only, so that the test
of the committed .mo files needs neither GNU gettext nor a package: enough of the format for
the catalogues `makemessages` writes (contexts, plurals, flags, obsolete entries)."""

import ast
from dataclasses import dataclass, field


@dataclass
class Entry:
    msgid: str = ""
    context: str | None = None
    plural: str | None = None
    strings: dict[int, str] = field(default_factory=dict)  # msgstr, or msgstr[n] by n
    flags: set[str] = field(default_factory=set)
    references: list[str] = field(default_factory=list)  # "path:line" of the "#:" comments

    @property
    def key(self) -> str:
        """The key of the entry in a compiled catalogue: "context\\x04msgid"."""
        return self.msgid if self.context is None else f"{self.context}\x04{self.msgid}"

    @property
    def translated(self) -> bool:
        return bool(self.strings) and all(self.strings.values()) and "fuzzy" not in self.flags


def _unquote(text: str) -> str:
    return ast.literal_eval(text)  # a C string in double quotes: Python reads it the same way


def read_po(text: str) -> list[Entry]:
    """The entries of a .po file (the header is the entry with the empty msgid), obsolete
    ("#~") entries left out."""
    entries, entry, target = [], Entry(), None

    def close():
        nonlocal entry, target
        if target is not None:
            entries.append(entry)
        entry, target = Entry(), None

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            close()
        elif line.startswith("#,"):
            entry.flags.update(flag.strip() for flag in line[2:].split(","))
        elif line.startswith("#:"):
            entry.references.extend(line[2:].split())
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            _append(entry, target, _unquote(line))
        else:
            keyword, _, rest = line.partition(" ")
            if keyword == "msgctxt" and target is not None and target != "msgctxt":
                close()
            target = keyword
            _append(entry, target, _unquote(rest), start=True)
    close()
    return entries


def _append(entry: Entry, target: str | None, text: str, start: bool = False) -> None:
    if target == "msgid":
        entry.msgid = text if start else entry.msgid + text
    elif target == "msgctxt":
        entry.context = text if start else (entry.context or "") + text
    elif target == "msgid_plural":
        entry.plural = text if start else (entry.plural or "") + text
    elif target == "msgstr":
        entry.strings[0] = text if start else entry.strings.get(0, "") + text
    elif target and target.startswith("msgstr["):
        n = int(target[7:-1])
        entry.strings[n] = text if start else entry.strings.get(n, "") + text
