"""Issue 23 points 1–3 in Chromium at 1440×900 and 390×844: the import preview of several
release files, the bulk review banner that says why nothing changed, and the campaign builder's
picker with its live count, ending on the campaign's page with its build."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import Campaign
from scenarios.models import Scenario
from tests.annotation import factories
from tests.conftest import SHARED_DATA, require_shared

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
SHOTS = Path("/work/wt/notes/shots")
SUCCESS_GREEN = "rgb(229, 244, 234)"


def shoot(page, name: str) -> None:
    """A screenshot for the closing note, when the notes folder exists (never required)."""
    if SHOTS.is_dir():
        page.screenshot(path=str(SHOTS / name), full_page=True)


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def assert_fits(page, size) -> None:
    assert page_width(page) <= size["width"], f"{page_width(page)} px wide at {size['width']}"


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1440x900", "390x844"])
def test_import_preview_of_several_release_files(researcher_page, size):
    files = [
        require_shared(SHARED_DATA / f"{name}.jsonl")
        for name in ("dialogue_emotion", "dialogue_schedule", "recollection_initialize")
    ]
    page = researcher_page
    page.set_viewport_size(size)
    page.goto("/scenarios/import/")
    page.get_by_label("Files").set_input_files(files)
    page.get_by_role("button", name="Preview").click()
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    expect(page.locator("#job-badge")).to_have_text("Preview · ready")
    expect(page.locator("#job-count")).to_contain_text("(100%)")
    sections = page.locator("section.import-file")
    expect(sections).to_have_count(3)
    for index, (path, lines) in enumerate(zip(files, (99, 76, 41), strict=True)):
        section = sections.nth(index)
        expect(section.locator(".file-name")).to_contain_text(
            f"{path.name} · release · {lines} rows"
        )
        expect(section.locator(".file-holds")).to_contain_text("reference answers only, no inputs")
        expect(section.locator(".file-holds")).to_contain_text(f"All {lines} lines")
        expect(section.locator(".file-needs li")).to_have_count(3)
        expect(section.locator("table.sample tbody tr")).to_have_count(3)
    first = sections.first.locator("table.sample tbody tr").first
    expect(first.locator("td").nth(2)).to_have_text("q001")
    expect(first.locator("td").nth(3)).to_have_text("Draft")
    assert_fits(page, size)
    if size == DESKTOP:
        shoot(page, "import-preview-1440.png")
    else:
        shoot(page, "import-preview-390.png")

    page.locator("#confirm-import").click()
    expect(page.locator("#job-badge")).to_have_text("Imported")
    assert Scenario.objects.count() == 99 + 76 + 41


def test_wrong_type_file_gets_one_sentence(researcher_page, tmp_path):
    png = tmp_path / "scan.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20)
    page = researcher_page
    page.goto("/scenarios/import/")
    page.get_by_label("Files").set_input_files(str(png))
    page.get_by_role("button", name="Preview").click()
    expect(page.locator(".file-error")).to_have_text(
        "This is not a JSONL or CSV file: it looks like a PNG image."
    )
    expect(page.locator("table.errors")).to_have_count(0)
    expect(page.locator("#job-stopped")).to_have_text("failed here")


@pytest.fixture
def drafts(researcher):
    return [
        Scenario.objects.create(
            subtask="dialogue_base",
            external_id=f"q{i:03d}",
            reference_response="好的",
            language="zh",
        )
        for i in range(1, 5)
    ]


def test_bulk_approve_on_drafts_is_not_green_and_shows_the_way(researcher_page, drafts):
    page = researcher_page
    page.goto("/scenarios/")
    expect(page.locator("#bulk-help summary")).to_contain_text("only approved scenarios are rated")
    page.locator("select[name=scope]").select_option("all")
    page.locator("select[name=action]").select_option("approve")
    page.get_by_role("button", name="Apply").click()
    banner = page.locator(".messages li")
    expect(banner).to_have_count(1)
    expect(banner).to_contain_text("Nothing changed. Approve skipped 4 scenarios (Draft 4)")
    expect(banner).to_contain_text("choose “Submit for review” first, then “Approve”")
    assert "warning" in banner.get_attribute("class")
    colour = banner.evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour != SUCCESS_GREEN
    shoot(page, "bulk-approve-drafts-1440.png")

    for action in ("submit", "approve"):
        page.locator("select[name=scope]").select_option("all")
        page.locator("select[name=action]").select_option(action)
        page.get_by_role("button", name="Apply").click()
        expect(page.locator(".messages li.success")).to_contain_text("4 scenarios changed.")
    assert set(Scenario.objects.values_list("state", flat=True)) == {"approved"}


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1440x900", "390x844"])
def test_campaign_builder_counts_refuses_zero_and_lands_on_the_campaign(
    researcher_page, researcher, size
):
    made = factories.campaign(researcher, [], n_scenarios=3, state=Campaign.State.DRAFT)
    Scenario.objects.create(subtask="itinerary_basic", reference_response="x", language="zh")
    companions = list(made.companions.order_by("name"))
    page = researcher_page
    page.set_viewport_size(size)
    page.goto("/campaigns/new/")
    page.get_by_label("Name").fill("Builder study")
    numbers = page.locator("#set-count")
    expect(numbers.locator("#set-scenarios")).to_have_text("3")  # approved ones, by default
    expect(numbers.locator("#set-comparisons")).to_have_text("0")
    expect(numbers.locator("#set-refused")).to_contain_text("Choose at least two companions")

    for companion in companions:
        page.get_by_label(companion.name).check()
    page.locator("input[name=runs]").first.check()
    expect(numbers.locator("#set-comparisons")).to_have_text("9")
    expect(numbers.locator("#set-companions")).to_have_text("3")
    expect(numbers.locator("#set-refused")).to_have_count(0)

    page.locator("#pick-subtask").get_by_label("Itinerary · day overview").check()
    expect(numbers.locator("#set-scenarios")).to_have_text("0")
    expect(numbers.locator("#set-refused")).to_contain_text("No scenario matches")
    page.locator("#pick-state").get_by_label("Draft").check()
    expect(numbers.locator("#set-scenarios")).to_have_text("1")
    expect(numbers.locator("#set-refused")).to_contain_text(
        "no responses from the chosen companions"
    )
    assert_fits(page, size)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#set-errors")).to_contain_text("This set gives 0 comparisons")
    assert not Campaign.objects.filter(name="Builder study").exists()

    page.locator("#pick-subtask").get_by_label("Itinerary · day overview").uncheck()
    expect(numbers.locator("#set-comparisons")).to_have_text("9")
    if size == DESKTOP:
        shoot(page, "campaign-builder-1440.png")
    else:
        shoot(page, "campaign-builder-390.png")
    with page.expect_navigation(timeout=30_000):  # the build runs in the request (eager)
        page.get_by_role("button", name="Save").click(no_wait_after=True)
    campaign = Campaign.objects.get(name="Builder study")
    expect(page).to_have_url(re.compile(rf"/campaigns/{campaign.pk}/$"))
    expect(page.locator("#build-badge")).to_have_text("Built")
    expect(page.locator("#build-status")).to_contain_text("9 new comparisons, 9 in the campaign")
    assert campaign.comparisons.count() == 9
    assert_fits(page, size)
