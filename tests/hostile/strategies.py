"""Hypothesis strategies for hostile input: arbitrary bytes, JSON-ish lines, and near-valid rows
(a valid row with one field replaced by something hostile, or its bytes damaged).

Values are built as raw JSON *text* fragments, so they can hold what Python's json module
would never write: integers of thousands of digits, nesting thousands deep, lone surrogate
escapes, NaN and Infinity.
"""

import json

from hypothesis import strategies as st

from scenarios.taxonomy import Subtask

SUBTASKS = sorted(Subtask.values)

# Text a valid row may hold: anything but NUL and lone surrogates (which UTF-8 cannot encode).
SAFE_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
SAFE_TEXT = st.text(SAFE_CHARS, max_size=40)
NONBLANK_TEXT = st.text(SAFE_CHARS, min_size=1, max_size=40).filter(lambda s: s.strip())
IDENT = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,15}", fullmatch=True)
NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9_\-]{0,15}", fullmatch=True)

HOSTILE_TEXTS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\ufeff",
    "\u202e\u2066",
    "\r\n",
    "\r",
    "\x01\x1f\x7f\x85",
    "\u2028\u2029",
    "x" * 20_001,
    "<script>window.__xss=1</script>",
    "'; DROP TABLE scenarios_scenario; --",
    "💥" * 50,
    "%s%n{0}${x}",
    "../../etc/passwd",
]
RAW_FRAGMENTS = [
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1.5",
    "-0.0",
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "-Infinity",
    "1" * 5000,  # over Python's int-from-string digit limit
    "9" * 30,
    "[]",
    "{}",
    "[null]",
    "[{}]",
    "[1, 2, 3]",
    '["a", 1, null]',
    '{"role": "user"}',
    '{"name": null}',
    "[" * 3000 + "]" * 3000,
    '{"a":' * 3000 + "1" + "}" * 3000,
    '"\\ud800"',
    '"\\udfff\\ud800"',
    '"\\u0000"',
    '"ok\\u0000"',
    '"' + "y" * 25_000 + '"',
    '"' + "\\u00e9" * 21_000 + '"',
]

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


@st.composite
def hostile_fragment(draw) -> str:
    """The JSON text of one hostile value."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.sampled_from(RAW_FRAGMENTS))
    if kind == 1:
        return json.dumps(draw(st.sampled_from(HOSTILE_TEXTS)))  # ASCII escapes survive anything
    if kind == 2:
        return json.dumps(draw(JSON_VALUES))  # NaN/Infinity appear as such
    if kind == 3:
        # Hostile text nested where a field expects a structure.
        inner = draw(hostile_fragment())
        return draw(
            st.sampled_from(
                [
                    f'[{{"role": "user", "content": {inner}}}]',
                    f'[{{"role": {inner}, "content": "x"}}]',
                    f'[{{"content": "x", "importance": {inner}}}]',
                    f'[{{"content": {inner}, "category": {inner}}}]',
                    f'[{{"time": {inner}, "activity": "x"}}]',
                    f'[{{"time": "09:00", "activity": {inner}}}]',
                    f'{{"name": {inner}}}',
                    f'{{"name": "P", "summary": {inner}}}',
                    f'{{"name": "P", "sap_block": {inner}}}',
                    f"[{inner}]",
                    f'{{"from": {inner}, "value": "x"}}',
                    f'[{{"from": "gpt", "value": {inner}}}]',
                ]
            )
        )
    return json.dumps(draw(st.text(max_size=60)))


def object_text(pairs) -> str:
    """A JSON object from (key, JSON text) pairs (keys may repeat: the last one wins)."""
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs) + "}"


@st.composite
def mutated_object(draw, row: dict, keys: list[str] | None = None) -> str:
    """The JSON text of `row` with one field replaced, added (unknown) or removed."""
    pairs = [(k, dumps(v)) for k, v in row.items()]
    action = draw(st.sampled_from(["replace", "replace", "replace", "add", "remove"]))
    if action == "remove" and pairs:
        del pairs[draw(st.integers(0, len(pairs) - 1))]
    elif action == "add" or not pairs:
        key = draw(st.sampled_from(["unknown", "Subtask", "", " subtask", "__proto__"]) | NAME)
        pairs.append((key, draw(hostile_fragment())))
    else:
        choices = keys or [k for k, _ in pairs]
        key = draw(st.sampled_from(choices))
        pairs = [(k, v) for k, v in pairs if k != key] + [(key, draw(hostile_fragment()))]
        if draw(st.booleans()):
            pairs = draw(st.permutations(pairs))
    return object_text(pairs)


@st.composite
def damaged(draw, data: bytes) -> bytes:
    """Bytes of a file, damaged at the byte level (or left alone)."""
    kind = draw(st.integers(0, 8))
    position = draw(st.integers(0, len(data)))
    if kind == 0:
        bad = draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xe2\x82", b"\x80"]))
        return data[:position] + bad + data[position:]
    if kind == 1:
        return b"\xef\xbb\xbf" + data  # a BOM (fine on line 1)
    if kind == 2:
        return data[:position] + b"\xef\xbb\xbf" + data[position:]  # a BOM elsewhere
    if kind == 3:
        return data.replace(b"\n", b"\r\n", draw(st.integers(1, 3)))  # CRLF mixed with LF
    if kind == 4:
        return data.replace(b"\n", b"\r", 1)  # a lone CR
    if kind == 5:
        return data[:position] + b"\x00" + data[position:]
    if kind == 6:
        return data.rstrip(b"\n")  # no final newline
    if kind == 7:
        return data[:position]  # truncated
    return data


def lines_file(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")


def jsonish_line() -> st.SearchStrategy[str]:
    """A line that looks more or less like JSON."""
    return st.one_of(
        JSON_VALUES.map(json.dumps),
        hostile_fragment(),
        st.text(max_size=80),
        st.builds(lambda v: json.dumps(v)[:-1], st.dictionaries(st.text(max_size=5), JSON_VALUES)),
        st.just(""),
        st.just("   "),
    )
