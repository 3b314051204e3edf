"""Issue 23 point 5: no internal code or raw framework text on the researcher's pages.

Every researcher page of the demo (and a few pages given bad input on purpose) is read as a user
reads it — the visible text, titles and accessible names — and fails on:
- snake_case tokens (`campaign_build`, `cannot_judge`) outside code, keyboard keys and the
  places that show typed names and codes on purpose (marked `data-raw-ok`, or <code>) and
  user texts (scenarios, responses: elements with their own `lang`);
- Django's plain-text error lists ("* state * Select a valid choice");
- a word written twice in a row ("starting at at column 14").
"""

import re

import pytest

RAW_TEXT = """() => {
  const shown = (el) => el.checkVisibility({ checkVisibilityCSS: true });
  // Shown as typed: code, keys, and user texts (scenarios, responses) marked with their language.
  const verbatim = (el) => el.closest("code, pre, kbd, samp, textarea, [data-raw-ok], svg") !== null
    || (el.closest("[lang]") || document.documentElement) !== document.documentElement;
  const texts = [["title", document.title]];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    const text = node.textContent.trim();
    if (!text || !el || ["SCRIPT", "STYLE", "TEMPLATE", "NOSCRIPT"].includes(el.tagName)) continue;
    if (shown(el) && !verbatim(el)) texts.push([el.tagName.toLowerCase(), text]);
  }
  for (const el of document.body.querySelectorAll("[title], [aria-label]")) {
    if (!shown(el) || verbatim(el)) continue;
    for (const name of ["title", "aria-label"]) {
      const value = el.getAttribute(name);
      if (value) texts.push([`${el.tagName.toLowerCase()}[${name}]`, value]);
    }
  }
  return texts;
}"""

SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
ERROR_LIST = re.compile(r"(^|\s)\*\s+\w+\s+\*\s")
REPEATED = re.compile(r"\b([A-Za-z]{2,})\s+\1\b", re.IGNORECASE)
# Repeated words that are English ("that that" is rare but grammatical; "had had").
REPEATS_ALLOWED = {"had", "that"}
# Proper names written with an underscore (a library).
NAMES = {"ppi_py"}


def raw_text(page, allow=()) -> list[str]:
    found = []
    for where, text in page.evaluate(RAW_TEXT):
        for token in SNAKE.findall(text):
            if token not in allow and token not in NAMES:
                found.append(f"code {token!r} in <{where}>: {text[:100]!r}")
        if ERROR_LIST.search(text):
            found.append(f"raw error list in <{where}>: {text[:100]!r}")
        for word in REPEATED.findall(text):
            if word.lower() not in REPEATS_ALLOWED:
                found.append(f"{word!r} twice in <{where}>: {text[:100]!r}")
    return found


@pytest.mark.parametrize("role", ["researcher"])
def test_researcher_pages_show_no_raw_codes_or_framework_text(page, log_in, demo, role):
    users, pages = demo
    log_in(users[role])
    usernames = {user.username for user in users.values()}
    bad_input = [
        "/scenarios/?state=bogus",
        "/scenarios/?subtask=nope&page=999",
        "/companions/responses/?run=x",
    ]
    problems, seen = [], set()
    for url in [*pages[role], *bad_input]:
        page.goto(url)
        for details in page.locator("details:not([open]) > summary").all():
            if details.is_visible():
                details.click()
        for problem in raw_text(page, allow=usernames):
            if problem.split(" in <")[0] not in seen:  # each code once, where it first shows
                seen.add(problem.split(" in <")[0])
                problems.append(f"{url}: {problem}")
    assert not problems, "raw text on researcher pages:\n  " + "\n  ".join(problems)
