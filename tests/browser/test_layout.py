"""Issue 15 (points 1, 2, 3 and 6), measured in Chromium at 1440×900 and 390×844.

The rating page keeps its progress in sight, shows a long dialogue by page scrolling alone (the
earlier turns behind a button that counts them), lets each response be scrolled clear of the
sticky choice bar, and answers a submit without a choice with an alert by the buttons. No page
of the site scrolls sideways on a phone (a wide table scrolls in a box of its own, which takes
keyboard focus), and "Log out" is always on screen.
"""

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.urls import reverse
from playwright.sync_api import expect

from annotation.models import Judgment
from scenarios.models import Persona, Response, Scenario
from tests.annotation import factories

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
SIZES = pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1440x900", "390x844"])
TURNS = 10
SHOWN_TURNS = 2  # the exchange before the final message; the rest behind the button
LONG = " ".join(["A long and careful reply that goes on so that its card is taller."] * 18)

# The rectangles that matter, in viewport pixels.
BOXES = """() => {
  const box = (el) => (el ? el.getBoundingClientRect().toJSON() : null);
  return {
    progress: box(document.getElementById("progress")),
    bar: box(document.querySelector(".choice-bar")),
    item: box(document.getElementById("item")),
    height: window.innerHeight,
    width: window.innerWidth,
  };
}"""

# Elements between `element` and the page that clip it: a box that scrolls or hides overflow
# and has more content than room.
CLIPPERS = """(element) => {
  const clipping = [];
  for (let box = element.parentElement; box && box !== document.body; box = box.parentElement) {
    const style = getComputedStyle(box);
    const clips = [style.overflowY, style.overflowX].some((v) => ["auto", "scroll", "hidden", "clip"].includes(v));
    if (clips && (box.scrollHeight > box.clientHeight + 1 || box.scrollWidth > box.clientWidth + 1)) {
      clipping.push(box.tagName + "." + box.className);
    }
  }
  return clipping;
}"""


@pytest.fixture
def rater(roles, django_user_model):
    return factories.annotators(django_user_model, 1)[0]


@pytest.fixture
def campaign(researcher, rater):
    made = factories.campaign(researcher, [rater], n_scenarios=3, overlap=3, name="Layout study")
    persona = Persona.objects.create(name="Lin", summary="A calm friend from university")
    history = [
        {
            "role": "user" if n % 2 else "assistant",
            "content": f"Turn {n}: " + "what happened at work stayed with me all week. " * 3,
        }
        for n in range(1, TURNS + 1)
    ]
    Scenario.objects.filter(tags__name="campaign").update(
        persona=persona,
        history=history,
        memory=[{"content": "Works night shifts", "category": "work", "importance": 1}],
    )
    for response in Response.objects.filter(run__in=made.runs.all()):
        response.text = f"{LONG} End of reply {response.pk}."
        response.save(update_fields=["text"])
    return made


def open_rating(page, log_in, rater, campaign, size):
    page.set_viewport_size(size)
    log_in(rater)
    page.goto(reverse("annotation:rate", args=[campaign.pk]))
    expect(page.locator("#rating-form")).to_be_visible()
    return page


def assert_progress_in_view(page, when):
    boxes = page.evaluate(BOXES)
    progress = boxes["progress"]
    assert progress["top"] >= 0 and progress["bottom"] <= boxes["height"], (when, progress)
    assert progress["left"] >= 0 and progress["right"] <= boxes["width"], (when, progress)
    return boxes


@SIZES
def test_progress_stays_in_view_while_rating_and_scrolling(page, log_in, rater, campaign, size):
    open_rating(page, log_in, rater, campaign, size)
    assert_progress_in_view(page, "on arrival")
    for done in range(1, 4):
        key = page.locator("#rating-form").get_attribute("action")
        page.keyboard.press("3")
        page.keyboard.press("Enter")
        expect(page.locator("#rating-form")).not_to_have_attribute("action", key)
        expect(page.locator('[data-progress="today"]')).to_have_text(str(done))
        expect(page.locator("#item")).to_be_focused()
        boxes = assert_progress_in_view(page, f"after item {done}")
        # The next item starts below the progress strip, not under it.
        assert boxes["item"]["top"] >= boxes["progress"]["bottom"] - 1, boxes
    for where in ("document.body.scrollHeight / 2", "document.body.scrollHeight"):
        page.evaluate(f"window.scrollTo(0, {where})")
        assert page.evaluate("window.scrollY") > 0
        assert_progress_in_view(page, f"scrolled to {where}")


@SIZES
def test_a_long_history_and_long_responses_read_by_page_scrolling(
    page, log_in, rater, campaign, size
):
    open_rating(page, log_in, rater, campaign, size)
    transcript = page.locator("[data-transcript]")
    assert transcript.evaluate("(box) => box.scrollHeight === box.clientHeight")
    bubbles = transcript.locator(".bubble")
    expect(bubbles).to_have_count(TURNS)
    # The earlier turns are behind a button that says how many there are; it shows them all.
    expect(transcript.locator(".bubble:visible")).to_have_count(SHOWN_TURNS)
    earlier = transcript.locator("details > summary")
    expect(earlier).to_have_text(f"{TURNS - SHOWN_TURNS} earlier turns")
    expect(earlier).to_be_visible()
    earlier.click()
    expect(transcript.locator(".bubble:visible")).to_have_count(TURNS)
    page.locator("#item").focus()

    for n in range(TURNS):
        bubble = bubbles.nth(n)
        expect(bubble).to_contain_text(f"Turn {n + 1}:")
        assert bubble.evaluate(CLIPPERS) == [], f"turn {n + 1} sits in a clipping box"
        bubble.evaluate("(el) => el.scrollIntoView({block: 'nearest'})")
        box, boxes = bubble.bounding_box(), page.evaluate(BOXES)
        assert box["y"] >= boxes["progress"]["bottom"] - 1, (n + 1, box, boxes)
        assert box["y"] + box["height"] <= boxes["bar"]["top"] + 1, (n + 1, box, boxes)

    for side in ("left", "right"):
        card = page.locator(f'.response-card[data-side="{side}"]')
        assert card.evaluate(CLIPPERS) == []
        card.evaluate("(el) => el.scrollIntoView({block: 'end'})")
        box, boxes = card.bounding_box(), page.evaluate(BOXES)
        bottom = box["y"] + box["height"]
        assert bottom <= boxes["bar"]["top"] + 1, f"the choice bar covers {side}: {box} {boxes}"
        assert bottom > boxes["progress"]["bottom"], (box, boxes)
        card.evaluate("(el) => el.scrollIntoView({block: 'start'})")
        box, boxes = card.bounding_box(), page.evaluate(BOXES)
        assert box["y"] >= boxes["progress"]["bottom"] - 1, f"the progress covers {side}"

    bar = page.evaluate(BOXES)["bar"]
    assert bar["height"] <= 0.25 * size["height"], f"choice bar {bar['height']} px tall"
    page.keyboard.press("Enter")  # the alert row too keeps the bar within a quarter
    expect(page.locator("[data-hint]")).to_be_visible()
    bar = page.evaluate(BOXES)["bar"]
    assert bar["height"] <= 0.25 * size["height"], f"with the alert {bar['height']} px tall"


@SIZES
def test_submitting_without_a_choice_raises_an_alert_by_the_buttons(
    page, log_in, rater, campaign, size
):
    open_rating(page, log_in, rater, campaign, size)
    alert = page.locator(".choice-bar [data-hint]")  # empty (and hidden) until needed
    expect(alert).to_have_attribute("role", "alert")
    submit = page.locator("[data-submit]")
    for attempt in ("Enter key", "click"):
        page.reload()  # the same item, nothing chosen
        expect(alert).to_have_text("")
        expect(submit).to_have_attribute("aria-disabled", "true")  # rate.js is running
        if attempt == "click":
            submit.click(force=True)  # only aria-disabled: the click arrives, nothing is sent
        else:
            page.keyboard.press("Enter")
        announced = page.locator(".choice-bar").get_by_role("alert")
        expect(announced).to_have_text("Choose a preference first (keys 1–5).")
        expect(announced).to_be_visible()
        colour = alert.evaluate("(el) => getComputedStyle(el).backgroundColor")
        assert colour == "rgb(251, 233, 231)", f"{attempt}: not alert-styled ({colour})"
        near, button = alert.bounding_box(), submit.bounding_box()
        gap = near["y"] - (button["y"] + button["height"])
        assert 0 <= gap <= 24, f"{attempt}: the alert is {gap} px from the buttons"
        assert near["y"] + near["height"] <= size["height"], attempt
    assert not Judgment.objects.exists()
    page.keyboard.press("2")  # choosing clears the alert; Enter then submits as before
    expect(alert).to_have_text("")
    page.keyboard.press("Enter")
    expect(page.locator("#item [role=status]")).to_have_text("Saved. Here is the next one.")
    assert Judgment.objects.count() == 1


# Everything that reaches past the right edge without a scrolling box of its own in between.
WIDE = """() => {
  const wide = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.right <= window.innerWidth + 0.5) continue;
    let inner = false;
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      if (["auto", "scroll", "hidden"].includes(getComputedStyle(up).overflowX)) inner = true;
    }
    if (!inner) wide.push(`${el.tagName}.${el.className} (right edge ${Math.round(box.right)})`);
  }
  return wide.slice(0, 5);
}"""


# The right edge of what shows of a table: its own, or that of the box that scrolls it.
SCROLL_BOX_RIGHT = """(table) => {
  for (let up = table; up && up !== document.body; up = up.parentElement) {
    if (["auto", "scroll"].includes(getComputedStyle(up).overflowX)) {
      return up.getBoundingClientRect().right;
    }
  }
  return table.getBoundingClientRect().right;
}"""


# The researcher's and the admin's every page: in the slow tier (`make test-slow`, CI runs it).
@pytest.mark.parametrize(
    "role",
    ["annotator", *(pytest.param(r, marks=pytest.mark.slow) for r in ("researcher", "admin"))],
)
def test_no_page_scrolls_sideways_on_a_phone(page, log_in, demo, role):
    users, pages = demo
    page.set_viewport_size(PHONE)
    log_in(users[role])
    axe = Axe()
    problems = []
    for path in pages[role]:
        answer = page.goto(path)
        assert answer.status == 200, (path, answer.status)
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            problems.append(f"{path}: {width} px wide: {page.evaluate(WIDE)}")
        log_out = page.get_by_role("button", name="Log out")
        expect(log_out).to_be_visible()
        box = log_out.bounding_box()
        if box["x"] < 0 or box["x"] + box["width"] > PHONE["width"] or box["y"] < 0:
            problems.append(f"{path}: 'Log out' off screen at {box}")
        for table in page.locator("table.grid").all():
            right = table.evaluate(SCROLL_BOX_RIGHT)
            if right > PHONE["width"]:
                problems.append(f"{path}: a table reaches {right} px")
        # A box that scrolls can be scrolled from the keyboard (it takes focus).
        scrolling = axe.run(page, options={"runOnly": ["scrollable-region-focusable"]})
        for violation in scrolling.response["violations"]:
            problems += [f"{path}: {n['target']} scrolls, no focus" for n in violation["nodes"]]
    assert problems == []


def test_the_scenario_filters_stack_below_the_table_on_a_phone(page, log_in, demo):
    """Issue 23 point 5: on a phone the list comes first, its filters after it."""
    users, _ = demo
    page.set_viewport_size(PHONE)
    log_in(users["researcher"])
    page.goto(reverse("scenarios:list"))
    filters, table = page.locator(".filters").bounding_box(), page.locator("table.grid")
    rows = table.bounding_box()
    assert rows["y"] + rows["height"] <= filters["y"], (filters, rows)
    assert rows["width"] <= PHONE["width"] and filters["width"] <= PHONE["width"]
    assert table.evaluate("(el) => el.scrollWidth > el.clientWidth"), (
        "the table did not need to scroll"
    )
    table.evaluate("(el) => { el.scrollLeft = el.scrollWidth; }")
    assert table.evaluate("(el) => el.scrollLeft") > 0  # it scrolls inside its own box
    assert page.evaluate("window.scrollX") == 0
    expect(page.get_by_role("navigation").get_by_role("link", name="Leaderboard")).to_be_visible()


# Inline elements broken over lines: an inline box split by a line break has several rects.
BROKEN = """(selector) => [...document.querySelectorAll(selector)]
  .filter((el) => el.getClientRects().length > 1)
  .map((el) => el.textContent)"""


@SIZES
def test_scenario_ids_and_badges_stay_on_one_line(page, log_in, demo, size):
    """Issue 15 point 9: "demo-/001" and "risk:/low" broke over two lines in the list."""
    users, _ = demo
    page.set_viewport_size(size)
    log_in(users["researcher"])
    page.goto(reverse("scenarios:list"))
    ids, badges = "table.scenarios td.id a", "table.scenarios .flag, table.scenarios .pill"
    assert page.locator(ids).count() > 10 and page.locator(badges).count() > 10
    assert page.evaluate(BROKEN, ids) == []
    assert page.evaluate(BROKEN, badges) == []
