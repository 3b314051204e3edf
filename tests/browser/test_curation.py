"""A researcher's curation flows in a real Chromium: list, bulk, edit, review, import, personas."""

import json
import re

import pytest
from playwright.sync_api import expect

from h2htalk.display import scenario_name
from scenarios.models import Persona, Scenario
from scenarios.taxonomy import Subtask
from tests.browser.conftest import assert_static_loaded
from tests.conftest import SHARED_DATA, require_shared
from tests.scenarios import factories

SCRIPT = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=2">'
ATTR = '"><svg onload="window.__xss=3">'


def result_count(page):
    return page.locator("#result-count")


def mark_page(page):
    """A JS value that lives exactly as long as this document: a full reload loses it."""
    page.evaluate("window.__marker = 1")


def assert_same_document(page):
    assert page.evaluate("window.__marker") == 1, "the page was reloaded instead of swapped"


def test_login_form_lands_researcher_on_scenarios(page, log_in, researcher):
    page.goto("/scenarios/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/scenarios/$"))
    page.get_by_label("Username").fill(researcher.username)
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_text("did not match")).to_be_visible()

    log_in(researcher)
    expect(page).to_have_url(re.compile(r"/scenarios/$"))
    expect(page.get_by_role("heading", name="Scenarios", exact=True)).to_be_visible()
    expect(page.locator(".topbar .who")).to_have_text(researcher.username)


@pytest.fixture
def sixty(researcher):
    lin = factories.persona("Lin")
    made = [factories.scenario(researcher, tags=["work"], persona=lin) for _ in range(24)]
    for i in range(18):
        made.append(
            factories.scenario(
                researcher,
                subtask="itinerary_basic",
                language="zh",
                user_message=f"明天去杭州，第{i}天",
                tags=["travel"],
            )
        )
    for i in range(18):
        made.append(
            factories.scenario(
                researcher,
                subtask="recollection_refine",
                user_message=f"I keep forgetting my sister's birthday ({i})"
                + (" near the lighthouse" if i % 6 == 0 else ""),
                tags=["family", "memory"] if i % 2 else ["family"],
                implicit_need=True,
            )
        )
    assert len(made) == 60
    return made


def test_list_search_filter_and_pagination_swap_without_reload(sixty, researcher_page):
    page = researcher_page
    expect(result_count(page)).to_have_text("60 scenarios")
    expect(page.get_by_text("Page 1 of 2")).to_be_visible()
    expect(page.locator("table.scenarios tbody tr")).to_have_count(50)
    mark_page(page)

    # Pagination through htmx, with the URL pushed.
    page.locator("nav.pager [data-page=next]").first.click()
    expect(page.get_by_text("Page 2 of 2")).to_be_visible()
    expect(page).to_have_url(re.compile(r"[?&]page=2(&|$)"))
    expect(page.locator("table.scenarios tbody tr")).to_have_count(10)
    assert_same_document(page)
    page.locator("nav.pager [data-page=previous]").first.click()
    expect(page.get_by_text("Page 1 of 2")).to_be_visible()
    expect(page).to_have_url(re.compile(r"[?&]page=1(&|$)"))

    # Search as you type (keyup, debounced).
    search = page.get_by_label("Search")
    search.press_sequentially("lighthouse")
    expect(result_count(page)).to_have_text("3 scenarios")
    expect(page).to_have_url(re.compile(r"[?&]q=lighthouse(&|$)"))
    rows = page.locator("table.scenarios tbody tr")
    expect(rows).to_have_count(3)
    for text in rows.all_inner_texts():
        assert "lighthouse" in text
    expect(page.locator(".pager")).to_have_count(0)
    assert_same_document(page)

    search.press_sequentially(" 杭州")  # every term must match: nothing does
    expect(result_count(page)).to_have_text("0 scenarios")
    expect(page.get_by_text("No scenario matches these filters.")).to_be_visible()
    search.fill("")
    search.press("Backspace")  # a keyup on the now empty box
    expect(result_count(page)).to_have_text("60 scenarios")

    # Subtask checkboxes.
    page.get_by_label(Subtask.ITINERARY_BASIC.label, exact=True).check()
    expect(result_count(page)).to_have_text("18 scenarios")
    expect(page).to_have_url(re.compile(r"[?&]subtask=itinerary_basic(&|$)"))
    page.get_by_label(Subtask.RECOLLECTION_REFINE.label, exact=True).check()
    expect(result_count(page)).to_have_text("36 scenarios")
    page.get_by_label(Subtask.ITINERARY_BASIC.label, exact=True).uncheck()
    expect(result_count(page)).to_have_text("18 scenarios")
    expect(page.locator("table.scenarios tbody .pill").first).to_have_text(
        Subtask.RECOLLECTION_REFINE.label
    )
    assert_same_document(page)

    # The pushed URL is a real address: loading it renders the same filtered list.
    page.reload()
    assert page.evaluate("window.__marker") is None
    expect(result_count(page)).to_have_text("18 scenarios")
    expect(page.get_by_label(Subtask.RECOLLECTION_REFINE.label, exact=True)).to_be_checked()
    expect(page.get_by_label(Subtask.ITINERARY_BASIC.label, exact=True)).not_to_be_checked()
    assert_static_loaded(page)


def test_bulk_submit_selected_rows(researcher_page, researcher):
    made = [factories.scenario(researcher) for _ in range(4)]
    page = researcher_page
    page.reload()
    expect(result_count(page)).to_have_text("4 scenarios")
    for scenario in (made[1], made[3]):
        page.get_by_label(f"select {scenario_name(scenario)}", exact=True).check()
    page.get_by_label("bulk action").select_option(label="Submit for review")
    page.get_by_role("button", name="Apply").click()

    expect(page.locator(".messages")).to_contain_text("Submit for review: 2 scenarios changed.")
    states = dict(Scenario.objects.values_list("pk", "state"))
    assert states == {
        made[0].pk: "draft",
        made[1].pk: "in_review",
        made[2].pk: "draft",
        made[3].pk: "in_review",
    }
    expect(page.locator("table.scenarios .state-in_review")).to_have_count(2)


def test_edit_with_invalid_json_then_valid_and_view_diff(researcher_page, researcher):
    scenario = factories.scenario(
        researcher,
        user_message="old words here",
        history=[{"role": "user", "content": "first turn"}],
    )
    page = researcher_page
    page.reload()
    page.get_by_role("link", name=scenario.external_id, exact=True).click()
    expect(page).to_have_url(re.compile(rf"/scenarios/{scenario.pk}/$"))
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/scenarios/{scenario.pk}/edit/$"))

    history = page.get_by_label("History")
    broken = '[{"role": "user", "content": "unclosed"'
    history.fill(broken)
    page.get_by_label("User message").fill("new words here")
    page.get_by_role("button", name="Save").click()

    expect(page.get_by_role("alert")).to_have_text("Please fix the fields marked below.")
    history_field = page.locator(".field.has-error").filter(has=page.get_by_label("History"))
    expect(history_field.locator("#error-history")).to_contain_text("valid JSON")
    expect(page.locator(".field.has-error")).to_have_count(1)
    expect(history).to_have_value(broken)  # what was typed is kept for fixing
    scenario.refresh_from_db()
    assert scenario.user_message == "old words here"
    assert scenario.history == [{"role": "user", "content": "first turn"}]
    assert scenario.revisions.count() == 1

    history.fill('[{"role": "user", "content": "second turn"}]')
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(rf"/scenarios/{scenario.pk}/$"))
    expect(page.locator(".messages")).to_have_text("Saved.")
    expect(page.locator(".chat")).to_contain_text("second turn")
    scenario.refresh_from_db()
    assert scenario.user_message == "new words here"
    assert scenario.history == [{"role": "user", "content": "second turn"}]

    page.get_by_role("link", name="History", exact=True).click()
    rows = page.locator("table.grid tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("user_message")
    rows.filter(has_text="user_message").get_by_role("link", name="diff").click()
    expect(page).to_have_url(re.compile(rf"/scenarios/{scenario.pk}/history/2/$"))
    diff = page.locator("section.diff")
    expect(diff.get_by_text("-old words here", exact=True)).to_be_visible()
    expect(diff.get_by_text("+new words here", exact=True)).to_be_visible()
    expect(diff.filter(has_text="history")).to_contain_text('"content": "first turn"')
    expect(diff.filter(has_text="history")).to_contain_text('"content": "second turn"')


def test_review_request_changes_then_approve(researcher_page, researcher):
    scenario = factories.scenario(researcher)
    page = researcher_page
    page.goto(f"/scenarios/{scenario.pk}/")
    state = page.locator("#scenario-state")
    expect(state).to_have_text("Draft")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)

    page.get_by_role("button", name="Submit for review").click()
    expect(state).to_have_text("In review")

    page.get_by_role("button", name="Request changes").click()  # no comment: refused
    expect(page.locator(".messages .error")).to_contain_text("comment is required")
    expect(state).to_have_text("In review")

    page.get_by_label("Comment").fill("Make the reference warmer.")
    page.get_by_role("button", name="Request changes").click()
    expect(state).to_have_text("Draft")
    expect(page.locator("ol.comments")).to_contain_text("Make the reference warmer.")
    scenario.refresh_from_db()
    assert scenario.state == "draft"
    assert scenario.comments.get().body == "Make the reference warmer."

    page.get_by_role("button", name="Submit for review").click()
    expect(state).to_have_text("In review")
    page.get_by_role("button", name="Approve").click()
    expect(state).to_have_text("Approved")
    expect(page.locator("ol.comments")).to_contain_text("Make the reference warmer.")
    scenario.refresh_from_db()
    assert scenario.state == "approved" and scenario.reviewer == researcher


def test_import_preview_then_confirm(researcher_page):
    release = require_shared(SHARED_DATA / "dialogue_emotion.jsonl")
    page = researcher_page
    page.get_by_role("navigation").get_by_role("link", name="Import").click()
    page.get_by_label("File").set_input_files(release)
    page.get_by_role("button", name="Preview").click()

    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    preview_url = page.url
    report = page.locator("section.report")
    expect(report.locator("h2")).to_have_text(
        "Preview (nothing written yet): dialogue_emotion.jsonl"
    )
    expect(page.locator("#count-rows")).to_have_text("99")
    expect(page.locator("#count-created")).to_have_text("99")
    expect(page.locator("#count-errors")).to_have_text("0")
    assert Scenario.objects.count() == 0

    page.get_by_role("button", name="Import 99 new and 0 changed scenarios").click()
    expect(page).not_to_have_url(preview_url)
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    expect(page.locator("#job-progress .state")).to_have_text("Imported")
    expect(report.locator("h2")).to_have_text("Imported: dialogue_emotion.jsonl")
    expect(page.locator("#count-created")).to_have_text("99")
    expect(page.locator("#confirm-import")).to_have_count(0)
    assert Scenario.objects.filter(subtask="dialogue_emotion").count() == 99
    assert Scenario.objects.count() == 99

    page.get_by_role("link", name="Go to the scenarios").click()
    expect(result_count(page)).to_have_text("99 scenarios")


def test_user_text_is_escaped_on_every_page(researcher_page, researcher):
    persona = factories.persona(f"Lin {IMG}")
    scenario = factories.scenario(
        researcher,
        external_id=f"x{ATTR}",
        persona=persona,
        user_message=f"hello {SCRIPT} and {IMG}",
        reference_response=f"reply {IMG} {SCRIPT}",
        history=[{"role": "user", "content": f"earlier {SCRIPT}{IMG}"}],
        tags=[IMG, "plain"],
    )
    page = researcher_page

    def check(path):
        page.goto(path)
        page.wait_for_load_state("load")
        assert page.evaluate("typeof window.__xss") == "undefined", f"script ran on {path}"
        assert page.locator("main script, main img, main svg").count() == 0, path

    check("/scenarios/")
    row = page.locator("table.scenarios tbody tr")
    expect(row.locator("td.text")).to_have_text(f"hello {SCRIPT} and {IMG}")
    expect(row.locator(".tag").first).to_have_text(IMG)
    expect(row.get_by_role("link", name=f"x{ATTR}", exact=True)).to_be_visible()
    expect(row.get_by_role("cell", name=persona.name)).to_be_visible()

    check(f"/scenarios/{scenario.pk}/")
    expect(page.locator(".bubble.user.final")).to_contain_text(f"hello {SCRIPT} and {IMG}")
    expect(page.locator(".bubble.reference")).to_have_text(f"reply {IMG} {SCRIPT}")
    expect(page.locator(".chat .bubble").first).to_contain_text(f"earlier {SCRIPT}{IMG}")
    expect(page.locator(".facts .tag").first).to_have_text(IMG)
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"x{ATTR}")

    check(f"/scenarios/{scenario.pk}/edit/")
    expect(page.get_by_label("User message")).to_have_value(f"hello {SCRIPT} and {IMG}")
    expect(page.get_by_label("Reference response")).to_have_value(f"reply {IMG} {SCRIPT}")
    expect(page.get_by_label("History")).to_have_value(re.compile(re.escape(SCRIPT)))
    expect(page.get_by_label("Tags")).to_have_value(re.compile(re.escape(IMG)))
    expect(page.get_by_label("External id")).to_have_value(f"x{ATTR}")

    check(f"/scenarios/{scenario.pk}/history/")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"History of x{ATTR}")

    check(f"/scenarios/{scenario.pk}/history/1/")
    diff = page.locator("section.diff")
    expect(diff.filter(has_text="user_message")).to_contain_text(f"+hello {SCRIPT} and {IMG}")
    expect(diff.filter(has_text="tags")).to_contain_text(json.dumps(IMG))  # a JSON list
    expect(diff.filter(has_text="history")).to_contain_text(SCRIPT)

    check("/scenarios/personas/")
    expect(page.get_by_role("link", name=persona.name, exact=True)).to_be_visible()


def test_persona_with_sap_switched_off_shows_ablation(researcher_page):
    factories.persona("Control", sap_enabled=True)
    page = researcher_page
    page.get_by_role("navigation").get_by_role("link", name="Personas").click()
    page.get_by_role("link", name="New persona").click()
    page.get_by_label("Name").fill("Ablation Lin")
    page.get_by_label("Summary").fill("Same friend, no safety block")
    sap = page.get_by_label("SAP block on")
    expect(sap).to_be_checked()
    sap.uncheck()
    page.get_by_role("button", name="Save").click()

    expect(page).to_have_url(re.compile(r"/scenarios/personas/$"))
    expect(page.locator(".messages")).to_have_text("Persona saved.")
    rows = page.locator("table.grid tbody tr")
    expect(rows.filter(has_text="Ablation Lin").locator("td").nth(3)).to_have_text("off (ablation)")
    expect(rows.filter(has_text="Control").locator("td").nth(3)).to_have_text("on")
    assert Persona.objects.get(name="Ablation Lin").sap_enabled is False
    assert Persona.objects.get(name="Control").sap_enabled is True
