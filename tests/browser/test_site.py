"""The site around the pages: error pages, the API docs page, Chinese text (issue 15)."""

import re

from django.urls import reverse
from playwright.sync_api import expect

from tests.browser.conftest import assert_static_loaded
from tests.scenarios import factories

CHINESE_LINE = "我今天工作很累，心里有点难受，想找人说说话。"


def test_an_annotator_on_a_researcher_page_reads_why_and_goes_back(
    log_in, annotator, live_server, expected_errors
):
    page = log_in(annotator)
    home = reverse("annotation:home")
    assert page.url.endswith(home)
    denied = reverse("scenarios:list")
    expected_errors.add((403, denied))

    page.goto(denied, referer=live_server.url + home)
    assert_static_loaded(page)  # the site's layout, its css and scripts
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.locator(".reason")).to_have_text("This page needs the role: researcher")
    page.get_by_role("link", name="Back to the previous page").click()
    page.wait_for_url(re.compile(re.escape(home) + "$"))

    page.goto(denied)
    page.get_by_role("link", name="Go to your home page").click()
    page.wait_for_url(re.compile(re.escape(home) + "$"))  # the annotator's home: rating


def test_the_api_docs_page_has_the_site_navigation_and_summaries(researcher_page):
    page = researcher_page
    page.get_by_role("link", name="API", exact=True).click()
    page.wait_for_url(re.compile(re.escape(reverse("api_docs")) + "$"))
    # Swagger UI loaded the schema and lists each operation by its summary (it fetches and
    # renders the whole schema in the browser: more than expect's 5 s on a loaded machine).
    expect(page.get_by_text("List scenarios", exact=True)).to_be_visible(timeout=30_000)
    expect(page.get_by_text("Submit your judgment of an item", exact=True)).to_be_visible()
    page.locator(".topbar").get_by_role("link", name="Scenarios").click()
    page.wait_for_url(re.compile(re.escape(reverse("scenarios:list")) + "$"))


# Draws each distinct Chinese character of the element's text on a canvas in the element's
# own font family and returns, per character, how many pixels it inked and a key of its image.
GLYPH_IMAGES = """(element) => {
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 48;
  const context = canvas.getContext("2d");
  context.font = "32px " + getComputedStyle(element).fontFamily;
  const images = {};
  for (const character of new Set(element.textContent.match(/[\\u4e00-\\u9fff]/g))) {
    context.clearRect(0, 0, 48, 48);
    context.fillText(character, 4, 38);
    const alpha = [];
    const pixels = context.getImageData(0, 0, 48, 48).data;
    for (let i = 3; i < pixels.length; i += 4) alpha.push(pixels[i]);
    images[character] = {ink: alpha.filter((a) => a > 0).length, key: alpha.join(",")};
  }
  return images;
}"""


def test_chinese_text_renders_as_glyphs_not_boxes(researcher_page, researcher):
    """A Chinese scenario line shows real characters, not empty boxes ("tofu").

    Without a CJK font (Debian's fonts-noto-cjk, installed by .ci/run beside chromium) Chromium
    draws every Chinese character as the same missing-glyph box: the text is in the page and
    even has a width, so checking the text or its width would pass. What differs is the
    picture: with the font, different characters are different images. So each distinct
    character of the line is drawn on a canvas in the page's own font family (canvas text
    takes the same font fallback as the page) and the images must all differ and all have ink.
    Without the font they are all one image and this fails (it never skips: CI or not).
    """
    scenario = factories.scenario(researcher, language="zh", user_message=CHINESE_LINE)
    page = researcher_page
    page.goto(reverse("scenarios:detail", args=[scenario.pk]))
    line = page.locator(".bubble.user.final")
    expect(line).to_contain_text(CHINESE_LINE)
    images = line.evaluate(GLYPH_IMAGES)
    characters = set(re.findall(r"[\u4e00-\u9fff]", CHINESE_LINE))
    assert set(images) == characters
    assert all(image["ink"] > 0 for image in images.values()), "a character drew nothing"
    distinct = {image["key"] for image in images.values()}
    assert len(distinct) == len(characters), (
        f"{len(characters)} different Chinese characters drew only {len(distinct)} different "
        "image(s): Chromium has no CJK font (install fonts-noto-cjk)"
    )
