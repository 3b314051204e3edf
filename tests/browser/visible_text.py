"""What a page shows in a language other than its own: the checker of the browser tests that
render pages in Simplified Chinese (issue 22).

`latin_words(page, allow)` collects every piece of text a user meets on the page as it is now —
the visible text nodes, the window title, and the titles, accessible names (aria-label),
placeholders, alt texts and button values of visible elements — and returns the Latin-script
words in it that are not allowed. Text inside an element whose `lang` is not Chinese is left
out: it is marked as deliberately in another language (scenario text in English, the language
switch's "English"). Hidden parts (a closed dialog, a closed <details>) are not visible: open
them and check again.

Allowed: single letters (the screen's "A" / "B", keyboard keys), `ALWAYS_ALLOWED` (names and keys
every page may show) and what the caller adds (usernames, names and codes typed by users).
"""

import re

# Proper names and keyboard keys any page may show as they are.
ALWAYS_ALLOWED = frozenset({"H2HTalk", "Enter", "Esc", "SAP", "API"})
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_'’.-]*[A-Za-z0-9]|[A-Za-z]")

_COLLECT = """(codes) => {
  const shown = (el) => el.checkVisibility({ checkVisibilityCSS: true });
  const foreign = (el) => {
    const holder = el.closest("[lang]");
    return holder !== null && holder !== document.documentElement
      && !holder.getAttribute("lang").toLowerCase().startsWith("zh");
  };
  // Codes and what users typed into fields: <code>, <pre>, <kbd>, <samp>, <textarea>.
  const code = (el) => codes && el.closest("code, pre, kbd, samp, textarea") !== null;
  const texts = [["title", document.title]];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    const text = node.textContent.trim();
    if (!text || !el || ["SCRIPT", "STYLE", "TEMPLATE", "NOSCRIPT"].includes(el.tagName)) continue;
    if (shown(el) && !foreign(el) && !code(el)) texts.push([el.tagName.toLowerCase(), text]);
  }
  const named = "[title], [aria-label], [placeholder], [alt], input[type=submit], input[type=button]";
  for (const el of document.body.querySelectorAll(named)) {
    if (!shown(el) || foreign(el)) continue;
    for (const name of ["title", "aria-label", "placeholder", "alt"]) {
      const value = el.getAttribute(name);
      if (value) texts.push([`${el.tagName.toLowerCase()}[${name}]`, value]);
    }
    if (el.matches("input[type=submit], input[type=button]") && el.value) texts.push(["input[value]", el.value]);
  }
  return texts;
}"""


def latin_words(page, allow=(), codes: bool = False) -> list[str]:
    """The Latin-script words the page shows now that are not allowed, each with where it is;
    `codes`: leave out the text of <code>, <pre>, <kbd>, <samp> and <textarea> (field names,
    commands, file names and what a user typed, on the researchers' pages)."""
    allowed = ALWAYS_ALLOWED | set(allow)
    found = []
    for where, text in page.evaluate(_COLLECT, codes):
        for word in WORD.findall(text):
            letters = sum(char.isascii() and char.isalpha() for char in word)
            if letters >= 2 and word not in allowed:
                found.append(f"{word!r} in <{where}>: {text[:80]!r}")
    return found


def assert_no_english(page, allow=(), label: str = ""):
    """Fail, listing them, when the page shows Latin-script words outside the allow-list."""
    found = latin_words(page, allow)
    where = label or page.url
    assert not found, f"{where} shows untranslated text:\n  " + "\n  ".join(found)
