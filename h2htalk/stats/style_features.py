"""Presentation features of a response text, the covariates of style control
(h2htalk.stats.style_control): how long it is and how it is laid out, not what it says.

Counted on the text as stored (Chinese or English), by line where Markdown works by line:
- length: characters (Unicode code points) of the stripped text;
- list_items: lines that open a Markdown list item (`- `, `* `, `+ `, `1. `, `1) `), and the
  Chinese enumeration `1、` that companions write where Markdown has `1.`;
- headers: Markdown ATX headers (`#` to `######`, then a space, at most three spaces in);
- actions: persona actions in parentheses, half-width `(…)` or full-width `（…）` (a companion's
  "（轻轻抱住你）"), one per pair with text inside and no line break; a mixed pair `(…）` counts;
- emoji: pictographs (U+1F000–1FAFF, U+2600–27BF, U+2B00–2BFF, U+3030, U+303D, U+3297,
  U+3299), one per emoji as drawn: a ZWJ sequence (👨‍👩‍👧), a skin tone or a variation selector
  does not count again, a flag's two regional indicators count once;
- questions: question marks, half-width `?` and full-width `？`.

Pure Python (re only): the release freezes these counts, and tests check them on texts.
"""

import re

FEATURES = ("length", "list_items", "headers", "actions", "emoji", "questions")

_LIST_ITEM = re.compile(
    r"^[ \t]*(?:[-*+•][ \t]+|\d{1,3}[.)][ \t]+|\d{1,3}、[ \t]*)\S", re.MULTILINE
)
_HEADER = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.MULTILINE)
_ACTION = re.compile(r"[(（][^()（）\n]*[^()（）\s][^()（）\n]*[)）]")
_PICTOGRAPHS = (
    (0x1F000, 0x1FAFF),  # mahjong and cards to symbols and pictographs extended-A
    (0x2600, 0x27BF),  # miscellaneous symbols, dingbats (☀ ☺ ♥ ✨ ❤)
    (0x2B00, 0x2BFF),  # arrows and stars (⭐ ⭕)
    (0x3030, 0x3030),
    (0x303D, 0x303D),
    (0x3297, 0x3297),
    (0x3299, 0x3299),
)
_JOINER = 0x200D
_MODIFIERS = (0x1F3FB, 0x1F3FF)  # skin tones: part of the emoji before them
_REGIONAL = (0x1F1E6, 0x1F1FF)  # two make one flag


def _pictograph(code: int) -> bool:
    return any(low <= code <= high for low, high in _PICTOGRAPHS)


def emoji_count(text: str) -> int:
    """Emoji as a reader sees them (see the module docstring)."""
    count = 0
    joined = False  # the previous code point was a zero-width joiner
    regional_open = False  # an odd regional indicator waits for its pair
    for char in text:
        code = ord(char)
        if code == _JOINER:
            joined = True
            continue
        if _REGIONAL[0] <= code <= _REGIONAL[1]:
            if not regional_open:
                count += 1
            regional_open = not regional_open
            joined = False
            continue
        regional_open = False
        if _pictograph(code) and not joined and not _MODIFIERS[0] <= code <= _MODIFIERS[1]:
            count += 1
        joined = False
    return count


def features(text: str | None) -> tuple[int, ...]:
    """The FEATURES of one response text, in that order."""
    text = (text or "").strip()
    return (
        len(text),
        len(_LIST_ITEM.findall(text)),
        len(_HEADER.findall(text)),
        len(_ACTION.findall(text)),
        emoji_count(text),
        text.count("?") + text.count("？"),
    )
