"""Builders and a scripted judge for the LLM-judge tests (no tests in here)."""

import json
import re

from annotation.models import Campaign, Comparison
from scenarios.models import CompanionModel, GenerationRun, Response
from scoring.judges.parsing import DIMENSIONS
from scoring.models import JudgeConfig, JudgeRun
from scoring.tasks import queue_judge_run
from tests.scenarios import factories

# Distinctive names: a prompt containing one of them would leak who wrote a response.
COMPANIONS = ("Zephyr-Alpha-77", "Quokka-Beta-13", "Marlin-Gamma-42")
BLOCK = re.compile(r"===== (Reply|Response 1|Response 2) =====\n(.*?)\n===== end of \1 =====", re.S)


def blocks(body: dict) -> dict[str, str]:
    """The response texts the judge was shown, by block title."""
    return dict(BLOCK.findall(body["messages"][-1]["content"]))


def scores_json(values, rationale="fine", **extra) -> str:
    if isinstance(values, int):
        values = dict.fromkeys(DIMENSIONS, values)
    return json.dumps({"scores": values, "rationale": rationale, **extra})


def companions(names=COMPANIONS):
    return [
        CompanionModel.objects.get_or_create(name=name, defaults={"provider": "imported"})[0]
        for name in names
    ]


def response_run(texts_by_scenario, names=COMPANIONS[:1], run_name="responses", **scenario_fields):
    """An imported response run: one scenario per entry, one response per companion.

    `texts_by_scenario` is a list whose entries are a text (every companion answers it) or a
    list of texts (one per companion)."""
    models = companions(names)
    run = GenerationRun.objects.create(name=run_name, kind=GenerationRun.Kind.IMPORT)
    scenarios = []
    for texts in texts_by_scenario:
        scenario = factories.scenario(state="approved", **scenario_fields)
        scenarios.append(scenario)
        texts = texts if isinstance(texts, list | tuple) else [texts] * len(models)
        for model, text in zip(models, texts, strict=True):
            Response.objects.create(run=run, scenario=scenario, companion=model, text=text)
    return run, scenarios


def campaign_of(owner, run, name="judge campaign"):
    """A campaign comparing every pair of companions on every scenario of the run."""
    campaign = Campaign.objects.create(name=name, owner=owner, state=Campaign.State.OPEN)
    responses = list(run.responses.select_related("companion").order_by("scenario", "companion"))
    by_scenario: dict[int, list[Response]] = {}
    for response in responses:
        by_scenario.setdefault(response.scenario_id, []).append(response)
    for scenario_id, group in by_scenario.items():
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                Comparison.objects.create(
                    campaign=campaign, scenario_id=scenario_id, response_a=a, response_b=b
                )
    campaign.runs.set([run])
    campaign.companions.set({r.companion for r in responses})
    return campaign


def judge_config(server, mode="single", **fields):
    values = {
        "name": f"{mode} judge",
        "mode": mode,
        "base_url": server.base_url,
        "model_id": "judge-model-1",
        "rubric": "You are a strict judge. (test rubric)",
        "temperature": 0.0,
        "samples": 1,
        "timeout_seconds": 5,
        "max_concurrency": 4,
    }
    values.update(fields)
    return JudgeConfig.objects.create(**values)


def judge_run(config, *, responses=None, campaign=None, name=None, **fields):
    run = JudgeRun.objects.create(
        name=name or f"run of {config.name}", judge=config, campaign=campaign, **fields
    )
    if responses is not None:
        run.responses.set(responses)
    return run


def start(run, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        queue_judge_run(run)
    run.refresh_from_db()
    return run
