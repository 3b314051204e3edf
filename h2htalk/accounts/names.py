"""User names that cannot be confused: one normal form for every check, and look-alikes refused.

- `clean(name)`: the name as stored: NFKC (full-width `ａｄｍｉｎ` is `admin`), trimmed.
- `fold(name)`: the key two names are "the same" by: NFKC, then case-folded (`Anna` = `anna`,
  `STRASSE` = `straße`). Every check and every login compares folded names.
- `skeleton(name)`: the folded name with the common Cyrillic and Greek look-alikes of Latin
  letters (after UTS #39's confusables) replaced by those letters, so `аdmin` with a Cyrillic
  `а` has the skeleton of `admin`. Two names with one skeleton could be mistaken for each
  other: the second is refused.

The database holds both keys of every user (`UsernameKey`, one row per user, written by a
post_save signal of the user model) under unique indexes: two admins creating `Case_1` and
`case_1` at the same moment cannot both succeed, whatever the application checked before.
"""

import unicodedata

# Cyrillic and Greek letters (lower case: names are folded first) that look like a Latin one.
# A small subset of Unicode's confusables.txt: the letters of the two scripts one meets in
# names that render like Latin letters in common fonts.
CONFUSABLES = {
    # Cyrillic
    "а": "a",
    "в": "b",
    "с": "c",
    "ԁ": "d",
    "е": "e",
    "ё": "ë",
    "һ": "h",
    "і": "i",
    "ї": "ï",
    "ј": "j",
    "к": "k",
    "ӏ": "l",
    "м": "m",
    "н": "h",
    "о": "o",
    "р": "p",
    "ԛ": "q",
    "ѕ": "s",
    "т": "t",
    "ѵ": "v",
    "ԝ": "w",
    "х": "x",
    "у": "y",
    "ү": "y",
    # Greek
    "α": "a",
    "β": "b",
    "ε": "e",
    "η": "n",
    "ι": "i",
    "κ": "k",
    "ν": "v",
    "ο": "o",
    "ρ": "p",
    "τ": "t",
    "υ": "u",
    "χ": "x",
    "γ": "y",
    "ζ": "z",
    # Latin letters that pass for others
    "ı": "i",
    "ɡ": "g",
    "ℓ": "l",
}
# Digits and marks commonly swapped for letters are left alone: `anna1` and `annal` are two
# plausible names, and refusing them would refuse real people.
_TABLE = str.maketrans(CONFUSABLES)


def clean(name: str) -> str:
    """The name as it is stored: NFKC-normalised and trimmed (case kept)."""
    return unicodedata.normalize("NFKC", str(name)).strip()


def fold(name: str) -> str:
    """The comparison key: NFKC, trimmed, case-folded (NFKC again: folding can denormalise)."""
    return unicodedata.normalize("NFKC", clean(name).casefold())


def skeleton(name: str) -> str:
    """The folded name with look-alike letters replaced by the Latin letter they pass for."""
    return unicodedata.normalize("NFC", fold(name).translate(_TABLE))


def keys(name: str) -> tuple[str, str]:
    """(folded, skeleton) of a name: what `UsernameKey` stores."""
    return fold(name), skeleton(name)
