"""Stored XSS, checked in a real Chromium: hostile text in every user-editable field that pages
render stays text on every page that shows it.

The payloads (`<script>`, an `<img onerror>`, an attribute break-out `"><svg onload>`, a
`</textarea>` break-out, an `alert()`, `javascript:` links in Markdown) all set `window.__xss`
(or open a dialog) if they ever run. Each visited page must load with `window.__xss` undefined,
no dialog, no event-handler attribute or `javascript:` URL anywhere in the DOM, no script
element carrying a payload, and (conftest) no console error or failed request (an injected
`<img src=x>` would fetch /x). Where a field is shown, the payload must be there as text: the
page's text or a form control's value holds it character for character.

Two tests, each visiting many pages: the annotator's rating pages and their htmx partials (an
invalid skip echoes what was typed; a skip and a submit bring the next item), and every
researcher page (scenarios, personas, companions, runs, responses, import reports, campaigns
with monitoring and gold, agreement, judges, calibration, releases, the browsable API) plus the
admin's user list.
"""

import json
import re
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db.models import F, Value
from django.db.models.functions import Concat
from playwright.sync_api import expect

from annotation.models import Assignment, Comparison, Judgment
from h2htalk.models import Job
from scenarios import services
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
from scenarios.tasks import run_response_import, run_scenario_import
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict, Release
from scoring.tasks import run_judge_import
from tests.conftest import make_user
from tests.scenarios import factories
from tests.scoring.test_calibration_support import stored_judge
from tests.scoring.test_release_pipeline import make_release, rated_world

SCRIPT = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=2">'
ATTR = '"><svg onload="window.__xss=3">'
CLOSE = "</textarea><script>window.__xss=4</script>"
ALERT = "<img src=x onerror=alert(5)>"


def text(label: str) -> str:
    """Every payload after a label (for text columns without a length limit)."""
    return f"{label} {SCRIPT} {IMG} {ATTR} {CLOSE} {ALERT}"


def short(label: str) -> str:
    """Two payloads after a label: fits 100-character names (companions, judges)."""
    return f"{label} {IMG}{ATTR}"


def name(label: str) -> str:
    """Three payloads after a label: fits 120-character names (personas, runs, campaigns)."""
    return f"{label} {SCRIPT}{IMG}{ATTR}"


GUIDELINES = "\n\n".join(
    [
        "Prefer the **warmer** reply.",
        "[open me](javascript:window.__xss=6) and [this too](JaVaScRiPt:alert(7))",
        SCRIPT,
        IMG,
        '<a href="javascript:window.__xss=8">raw link</a> <p onclick="window.__xss=9">p</p>',
        "![tracker](https://example.invalid/pixel.png)",
        CLOSE,
    ]
)

INERT = """() => {
  const found = [];
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase();
      const value = attr.value.replace(/[\\s\\u0000-\\u001f]+/g, "").toLowerCase();
      if (name.startsWith("on")) found.push(`<${el.tagName} ${attr.name}="${attr.value}">`);
      else if (["href", "src", "action", "formaction", "xlink:href", "data"].includes(name)
               && value.startsWith("javascript:")) found.push(`<${el.tagName} ${name}="${attr.value}">`);
    }
    if (el.tagName === "SCRIPT" && /__xss|alert\\(/.test(el.textContent)) {
      found.push(`<script>${el.textContent}</script>`);
    }
  }
  return found;
}"""

SHOWN = """() => [document.body.textContent,
  ...Array.from(document.querySelectorAll("input, textarea"), (el) => el.value)].join("\\n")"""


class Inspector:
    """Visits pages and checks each one; remembers the dialogs a page opened."""

    def __init__(self, page):
        self.page = page
        self.dialogs = []
        self.visited = []
        page.on("dialog", self._on_dialog)

    def _on_dialog(self, dialog):
        self.dialogs.append(f"{dialog.type}: {dialog.message} on {self.page.url}")
        dialog.dismiss()

    def check(self, where: str, shows=()):
        page = self.page
        page.wait_for_load_state("load")
        assert page.evaluate("typeof window.__xss") == "undefined", f"a payload ran on {where}"
        assert self.dialogs == [], self.dialogs
        injected = page.evaluate(INERT)
        assert injected == [], f"markup from a payload on {where}: {injected}"
        shown = page.evaluate(SHOWN)
        for expected in shows:
            assert expected in shown, f"{expected!r} is not shown as text on {where}"
        self.visited.append(where)

    def visit(self, path: str, shows=()):
        response = self.page.goto(path)
        assert response is not None and response.status == 200, (path, response and response.status)
        self.check(path, shows)


# ---------------------------------------------------------------- the hostile world


def hostile_world(researcher, django_user_model):
    """A rated campaign, a release, judges, calibrated judges, runs, imports and a curated
    scenario, with a payload in every text field a user (or an imported file) can set."""
    User = get_user_model()
    User.objects.filter(pk=researcher.pk).update(username=f"res{ATTR}")
    researcher.refresh_from_db()
    raters = [
        make_user(django_user_model, username, "annotator")
        for username in (f"r1{IMG}", f"r2{ATTR}", f"r3{SCRIPT}", f"r4{ALERT}")
    ]
    companion_names = (short("Alpha"), short("Beta"), short("Gamma"))
    world = rated_world(
        researcher,
        raters,
        n_scenarios=8,
        votes_per_comparison=3,  # the fourth rater (the one in the browser) has items left
        names=companion_names,
        prefix="xss",
    )
    campaign = world.campaign
    campaign.name = name("Campaign")
    campaign.description = text("description")
    campaign.guidelines = GUIDELINES
    campaign.save()
    CompanionModel.objects.filter(pk__in=[c.pk for c in world.companions]).update(
        notes=text("notes"), model_id=f"m {IMG}"
    )
    persona = factories.persona(
        name("Lin"),
        summary=text("summary"),
        character=text("character"),
        sap_block=text("sap"),
    )
    history = [
        {"role": "user", "content": text("earlier")},
        {"role": "assistant", "content": text("answer")},
    ]
    memory = [{"content": text("memory"), "category": IMG, "importance": 1}]
    schedule = [{"time": f"9{ATTR}", "activity": text("meeting")}]
    Scenario.objects.filter(tags__name="xss").update(
        persona=persona,
        history=history,
        memory=memory,
        schedule=schedule,
        user_message=text("final"),
    )
    Response.objects.filter(run__campaigns=campaign).update(
        text=Concat(F("text"), Value(" " + text("reply")))
    )
    run = campaign.runs.get()
    run.name, run.message = name("import run"), text("run message")
    run.save()
    first = campaign.comparisons.order_by("pk").first()
    Comparison.objects.filter(pk=first.pk).update(gold_note=text("gold note"))
    world.judge.name = name("cal judge")
    world.judge.save()

    release = make_release(world, name=name("Release"), description=text("release"), n_boot=100)
    assert release.state == Release.State.READY, release.message

    # A calibrated judge with a full report (held-out tables, reliability diagram), whose
    # imported document names things too.
    fitted = stored_judge(campaign, researcher, name=name("fitted judge"))
    document = fitted.document
    document["judge"]["config"] = short("config")
    document["training"]["campaign"]["name"] = name("doc campaign")
    for entry in document.get("heldout", {}).get("system", {}).get("companions", []):
        entry["name"] = short(f"sim {entry['name']}")
    document["composite"]["note"] = text("composite note")
    fitted.document = document
    fitted.save()

    # A curated draft scenario: every scenario field, review comments, revisions.
    scenario = factories.scenario(
        researcher,
        external_id=f"x{ATTR}{SCRIPT}",
        persona=persona,
        user_message=text("hello"),
        reference_response=text("reference"),
        history=history,
        memory=memory,
        schedule=schedule,
        source=text("source"),
        tags=[IMG, SCRIPT],
    )
    services.transition(scenario, researcher, "submit")
    services.transition(scenario, researcher, "request_changes", text("comment"))
    services.add_comment(scenario, researcher, text("second comment"))
    scenario.refresh_from_db()
    before = services.snapshot(scenario)
    scenario.user_message = text("edited")
    services.update_scenario(scenario, researcher, before, tags=[IMG, SCRIPT, ATTR[:50]])

    # A generation run over it: one answer, one failure.
    generated = GenerationRun.objects.create(
        name=name("gen run"), state=GenerationRun.State.COMPLETED, message=text("gen message")
    )
    generated.scenarios.add(scenario)
    generated.companions.set(world.companions[:2])
    Response.objects.create(
        run=generated, scenario=scenario, companion=world.companions[0], text=text("generated")
    )
    Response.objects.create(
        run=generated,
        scenario=scenario,
        companion=world.companions[1],
        status=Response.Status.FAILED,
        error=text("failure"),
        attempts=3,
    )

    # An LLM judge with a run: one parsed verdict, one unparseable, one failed request.
    judge = JudgeConfig.objects.create(
        name=short("judge"),
        base_url="http://127.0.0.1:9/v1",
        model_id=f"jm {IMG}",
        api_key_env="XSS_JUDGE_KEY",
        rubric=text("rubric"),
    )
    judge_run = JudgeRun.objects.create(
        name=name("judge run"),
        judge=judge,
        campaign=campaign,
        state=JudgeRun.State.COMPLETED,
        message=text("judge message"),
        created_by=researcher,
    )
    answers = list(Response.objects.filter(run=run).order_by("pk")[:3])
    JudgeVerdict.objects.create(
        run=judge_run,
        response=answers[0],
        parse=JudgeVerdict.Parse.STRICT,
        scores={"empathy": 7},
        rationale=text("rationale"),
        raw_output=text("raw ok"),
    )
    JudgeVerdict.objects.create(
        run=judge_run,
        response=answers[1],
        parse=JudgeVerdict.Parse.FAILED,
        raw_output=text("raw output"),
        error=text("parse error"),
    )
    JudgeVerdict.objects.create(
        run=judge_run, response=answers[2], parse=JudgeVerdict.Parse.ERROR, error=text("http")
    )

    # Import previews of hostile files (their names, fields and values end up in the report).
    imports = {}
    lines = [
        {"subtask": "dialogue_emotion", "external_id": f"i{IMG}", "user_message": text("u")},
        {"subtask": SCRIPT, "external_id": IMG, "user_message": "x", "state": ATTR},
        {"subtask": "dialogue_emotion", IMG: ATTR},
    ]
    imports["scenarios"] = run_import(
        researcher,
        "scenario_import",
        run_scenario_import,
        f"scen {IMG}.jsonl",
        lines,
        {"format": "auto", "default_subtask": "", "initial_state": "draft"},
    )
    lines = [
        {
            "subtask": "dialogue_emotion",
            "external_id": "q001",
            "companion": short("new"),
            "text": "a",
        },
        {"subtask": SCRIPT, "external_id": IMG, "companion": ATTR, "text": text("t")},
    ]
    imports["responses"] = run_import(
        researcher,
        "response_import",
        run_response_import,
        f"resp {IMG}.jsonl",
        lines,
        {"run_name": name("imported")},
    )
    lines = [
        {"mode": "single", "subtask": SCRIPT, "external_id": IMG, "run": ATTR, "companion": IMG},
        {"mode": ALERT, IMG: 1},
    ]
    imports["verdicts"] = run_import(
        researcher,
        "judge_import",
        run_judge_import,
        f"verd {IMG}.jsonl",
        lines,
        {"judge": short("imp judge"), "run_name": name("imp run")},
    )
    return {
        "world": world,
        "raters": raters,
        "rater": raters[3],
        "persona": persona,
        "scenario": scenario,
        "generated": generated,
        "release": release,
        "fitted": fitted,
        "judge": judge,
        "judge_run": judge_run,
        "imports": imports,
    }


def run_import(user, kind, task, filename, lines, params) -> Job:
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    path = default_storage.save(f"imports/xss/{filename}", ContentFile(body.encode()))
    job = Job.objects.create(
        kind=kind,
        created_by=user,
        params={"path": path, "filename": filename, "dry_run": True, **params},
    )
    task(job.pk)
    job.refresh_from_db()
    assert job.is_finished, (job.state, job.message)
    return job


@pytest.fixture
def hostile(researcher, django_user_model, monkeypatch):
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "xss")
    return hostile_world(researcher, django_user_model)


# ---------------------------------------------------------------- the annotator's pages


def wait_for_new_item(page, old_action):
    expect(page.locator("#rating-form")).not_to_have_attribute("action", old_action)


def test_rating_pages_and_partials_keep_payloads_as_text(page, log_in, hostile):
    rater, campaign = hostile["rater"], hostile["world"].campaign
    persona = hostile["persona"]
    inspector = Inspector(page)

    log_in(rater)
    expect(page).to_have_url(re.compile(r"/rate/$"))
    inspector.check("/rate/", shows=[rater.username, campaign.name, text("description")])

    item_texts = [
        campaign.name,
        persona.name,
        persona.summary,
        text("earlier"),
        text("answer"),
        text("memory"),
        IMG,  # the memory's category
        f"9{ATTR}",
        text("meeting"),
        text("final"),
        text("reply"),
    ]
    page.get_by_role("link", name="Start rating").click()
    expect(page).to_have_url(re.compile(rf"/rate/{campaign.pk}/$"))
    inspector.check("rating page", shows=[*item_texts, "Prefer the warmer reply.", "open me"])
    guidelines = page.locator(".rate-guidelines .md")
    expect(guidelines.locator("strong")).to_have_text("warmer")  # Markdown still works
    expect(guidelines.locator("img, script, svg, textarea")).to_have_count(0)
    for href in guidelines.locator("a").evaluate_all("links => links.map(a => a.href)"):
        assert href == "" or href.startswith(("http:", "https:", "mailto:")), href
    expect(page.locator('[data-response="A"]')).to_contain_text(text("reply"))
    expect(page.locator('[data-response="B"]')).to_contain_text(text("reply"))

    # An invalid skip (no reason) answers with the same item, echoing what was typed: the
    # rationale inside a <textarea>, the note inside an <input value="...">.
    rationale, note = text("why"), text("note")
    action = page.locator("#rating-form").get_attribute("action")
    page.locator("textarea[name=rationale]").fill(rationale)
    page.keyboard.press("Escape")
    page.keyboard.press("s")
    expect(page.locator("[data-skip-panel]")).to_have_attribute("open", "")
    page.locator("input[name=skip_note]").fill(note)
    page.locator("input[name=skip_note]").blur()  # its change event would disable the button
    page.evaluate("document.querySelector('[data-skip-confirm]').disabled = false")
    page.locator("[data-skip-confirm]").click()
    expect(page.locator("#form-errors")).to_contain_text("Choose why you skip this item.")
    assert page.locator("#rating-form").get_attribute("action") == action  # the same item
    expect(page.locator("textarea[name=rationale]")).to_have_value(rationale)
    expect(page.locator("input[name=skip_note]")).to_have_value(note)
    inspector.check("invalid skip partial", shows=[rationale, note, *item_texts])

    # A real skip with that note, then a submitted judgment with a hostile rationale.
    page.get_by_label("Other").check()
    page.locator("[data-skip-confirm]").click()
    wait_for_new_item(page, action)
    expect(page.locator("#item [role=status]")).to_have_text("Skipped. Here is the next one.")
    inspector.check("partial after a skip", shows=item_texts)

    action = page.locator("#rating-form").get_attribute("action")
    page.locator("label.pref", has_text="Tie").click()
    page.locator("textarea[name=rationale]").fill(rationale)
    page.locator("[data-submit]").click()
    wait_for_new_item(page, action)
    expect(page.locator("#item [role=status]")).to_have_text("Saved. Here is the next one.")
    inspector.check("partial after a submit", shows=item_texts)
    expect(page.locator('[data-progress="today"]')).to_have_text("1")

    # What was typed was stored as it was (escaping happens on output only).
    assert Judgment.objects.get(annotator=rater).rationale == rationale
    skipped = Assignment.objects.get(annotator=rater, state=Assignment.State.SKIPPED)
    assert skipped.skip_reason == f"other: {note}"

    page.reload()
    inspector.check("rating page after reload", shows=item_texts)
    inspector.visit("/rate/", shows=[campaign.name])
    assert len(inspector.visited) == 7


# ---------------------------------------------------------------- the researcher's pages


def test_researcher_and_admin_pages_keep_payloads_as_text(page, log_in, hostile, admin_user):
    world, scenario, persona = hostile["world"], hostile["scenario"], hostile["persona"]
    campaign, release, fitted = world.campaign, hostile["release"], hostile["fitted"]
    judge, judge_run, generated = hostile["judge"], hostile["judge_run"], hostile["generated"]
    imports = hostile["imports"]
    companions = [c.name for c in world.companions]
    raters = [r.username for r in hostile["raters"]]
    researcher = campaign.owner
    campaign_scenario = Scenario.objects.filter(tags__name="xss").order_by("pk").first()
    import_run = campaign.runs.get()
    inspector = Inspector(page)
    visit = inspector.visit

    log_in(researcher)
    inspector.check("landing page", shows=[researcher.username])

    # Scenarios: list (and a hostile search reflected into the filter form), detail, edit,
    # history, diffs; personas.
    visit(
        "/scenarios/",
        shows=[scenario.external_id, text("edited")[:100], IMG, SCRIPT, persona.name],
    )
    visit(f"/scenarios/?q={quote(ATTR)}&tags={quote(IMG)}", shows=[ATTR])
    visit(
        f"/scenarios/{scenario.pk}/",
        shows=[
            scenario.external_id,
            persona.name,
            persona.summary,
            text("earlier"),
            text("answer"),
            text("memory"),
            f"9{ATTR}",
            text("meeting"),
            text("edited"),
            text("reference"),
            text("source"),
            text("comment"),
            text("second comment"),
            researcher.username,
            ATTR[:50],
        ],
    )
    visit(
        f"/scenarios/{scenario.pk}/edit/",
        shows=[scenario.external_id, text("edited"), text("reference"), CLOSE, text("source")],
    )
    expect(page.locator("textarea[name=user_message]")).to_have_value(text("edited"))
    expect(page.locator("textarea[name=reference_response]")).to_have_value(text("reference"))
    visit(
        f"/scenarios/{scenario.pk}/history/",
        shows=[scenario.external_id, researcher.username, f"request_changes: {text('comment')}"],
    )
    for number in (1, 3, 4):
        visit(f"/scenarios/{scenario.pk}/history/{number}/", shows=[scenario.external_id])
    expect(page.locator("section.diff").first).to_contain_text(f"+{text('edited')}")
    visit("/scenarios/personas/", shows=[persona.name, persona.summary])
    visit(
        f"/scenarios/personas/{persona.pk}/",
        shows=[persona.name, persona.summary, text("character"), text("sap")],
    )
    expect(page.locator("textarea[name=sap_block]")).to_have_value(text("sap"))

    # Companions, runs, responses, and the import reports of hostile files.
    visit("/companions/", shows=[*companions, f"m {IMG}"])
    visit(f"/companions/{world.companions[0].pk}/", shows=[companions[0], text("notes")])
    expect(page.locator("textarea[name=notes]")).to_have_value(text("notes"))
    visit("/companions/runs/", shows=[import_run.name, generated.name, researcher.username])
    visit(
        f"/companions/runs/{generated.pk}/",
        shows=[generated.name, text("gen message"), companions[0], text("failure")],
    )
    visit(f"/companions/runs/{import_run.pk}/", shows=[import_run.name, text("run message")])
    visit("/companions/runs/new/")  # (imported companions are not offered)
    visit("/companions/responses/", shows=[scenario.external_id, import_run.name])
    visit(
        f"/companions/responses/?scenario={scenario.pk}",
        shows=[
            text("edited"),
            text("reference"),
            text("generated"),
            text("failure"),
            *companions[:2],
        ],
    )
    visit(
        f"/companions/responses/?scenario={campaign_scenario.pk}",
        shows=[text("final"), text("reply"), import_run.name, *companions],
    )
    job = imports["scenarios"]
    visit(
        f"/jobs/{job.pk}/",
        shows=[job.params["filename"], IMG, f"unknown subtask '{SCRIPT}'"],
    )
    job = imports["responses"]
    visit(
        f"/jobs/{job.pk}/",
        shows=[job.params["filename"], job.params["run_name"], f"unknown subtask '{SCRIPT}'"],
    )
    job = imports["verdicts"]
    visit(
        f"/judges/import/{job.pk}/",
        shows=[job.params["filename"], job.params["judge"], job.params["run_name"], ALERT],
    )

    # Campaigns: list, detail with monitoring, edit, gold items; the agreement report.
    visit("/campaigns/", shows=[campaign.name, researcher.username])
    visit(
        f"/campaigns/{campaign.pk}/",
        shows=[campaign.name, text("description"), *raters, *companions, import_run.name],
    )
    expect(page.locator("#guidelines strong")).to_have_text("warmer")
    expect(page.locator("#guidelines").locator("img, script, svg, textarea")).to_have_count(0)
    visit(
        f"/campaigns/{campaign.pk}/edit/",
        shows=[campaign.name, text("description"), CLOSE, *companions, *raters],
    )
    expect(page.locator("textarea[name=guidelines]")).to_have_value(GUIDELINES)
    visit(f"/campaigns/{campaign.pk}/gold/", shows=[text("gold note"), *companions])
    visit(f"/scoring/campaigns/{campaign.pk}/agreement/", shows=[campaign.name, *raters[:3]])
    expect(page.locator(".heatmap svg")).to_have_count(1)

    # LLM judges: list, edit (the rubric in a textarea), bias, runs, a run with bad outputs.
    visit("/judges/", shows=[judge.name, judge.model_id])
    visit(f"/judges/{judge.pk}/", shows=[judge.name, text("rubric")])
    expect(page.locator("textarea[name=rubric]")).to_have_value(text("rubric"))
    visit(f"/judges/{judge.pk}/bias/", shows=[judge.name])
    visit("/judges/runs/", shows=[judge_run.name, judge.name, campaign.name])
    visit(
        f"/judges/runs/{judge_run.pk}/",
        shows=[judge_run.name, text("judge message"), text("raw output"), text("parse error")],
    )
    visit("/judges/runs/new/", shows=[judge.name, campaign.name, import_run.name])

    # Calibration: list, the fitted judge's report (names from its document), forms.
    visit("/calibration/", shows=[fitted.name, world.judge.name, campaign.name, short("config")])
    visit(
        f"/calibration/{fitted.pk}/",
        shows=[fitted.name, name("doc campaign"), short("config"), text("composite note")],
    )
    visit("/calibration/new/", shows=[campaign.name])
    visit("/calibration/route/", shows=[campaign.name, fitted.name])

    # Releases: list, the computed leaderboard (names in tables and SVG plots), the form.
    visit(
        "/releases/",
        shows=[release.name, campaign.name, world.judge.name, companions[1]],
    )
    visit(
        f"/releases/{release.pk}/",
        shows=[release.name, text("release"), campaign.name, world.judge.name, *companions],
    )
    assert page.locator(".plot svg").count() >= 3
    visit("/releases/new/", shows=[campaign.name, *companions, world.judge.name])

    # The browsable API renders the same texts into HTML (and into its raw-data textarea).
    visit(f"/api/scenarios/{scenario.pk}/", shows=[SCRIPT])
    visit(f"/api/personas/{persona.pk}/", shows=[SCRIPT])
    visit(f"/api/companions/{world.companions[0].pk}/", shows=[SCRIPT])
    visit(f"/api/judges/configs/{judge.pk}/", shows=[SCRIPT])

    # The admin's user list shows every (hostile) username.
    page.context.clear_cookies()
    log_in(admin_user)
    visit("/manage/", shows=[researcher.username, *raters])
    assert len(inspector.visited) == 46, inspector.visited
