"""Starting and resuming generation runs (the same rules for the pages and the API), and what
the response browser shows."""

from django.core.paginator import Paginator
from django.db.models import Count

from h2htalk.params import parse_int
from scenarios.companions import generation
from scenarios.models import CompanionModel, GenerationRun, Scenario
from scenarios.tasks import queue_run


def start_run(run: GenerationRun, companions, scenarios) -> GenerationRun:
    """Save a new run (its author set) with its companions and scenarios, and queue it."""
    run.save()
    run.companions.set(companions)
    run.scenarios.set(scenarios)
    queue_run(run)
    return run


def is_going(run: GenerationRun) -> bool:
    """Queued or running with a live worker; a run whose worker was lost may be resumed."""
    return run.state in generation.ACTIVE and run.pk not in generation.stale_runs()


def resume_refusal(run: GenerationRun) -> str | None:
    """Why this run cannot be resumed now (None: it can)."""
    if run.kind != GenerationRun.Kind.GENERATE:
        return "imported runs cannot be resumed"
    if is_going(run):
        return "the run is already going"
    return None


def set_token_budget(run: GenerationRun, text: str) -> bool:
    """The resume form's new token budget (empty: unchanged); False if not a whole number."""
    text = text.strip()
    if not text:
        return True
    budget = parse_int(text)
    if budget is None:
        return False
    run.token_budget = budget
    run.save(update_fields=["token_budget"])
    return True


def browser_context(params, responses, scenario: Scenario | None) -> dict:
    """The response browser: the (filtered) responses to one scenario side by side, or without
    a scenario the page of scenarios that have such responses (50 a page)."""
    page = shown = None
    if scenario is None:
        scenarios = (
            Scenario.objects.filter(responses__in=responses)
            .annotate(n=Count("responses", distinct=True))
            .order_by("pk")
        )
        page = Paginator(scenarios, 50).get_page(params.get("page"))
    else:
        shown = (
            responses.filter(scenario=scenario)
            .select_related("companion", "run")
            .order_by("companion__name", "run__name")
        )
    query = params.copy()
    query.pop("page", None)
    return {
        "scenario": scenario,
        "responses": shown,
        "page": page,
        "runs": GenerationRun.objects.order_by("name"),
        "companions": CompanionModel.objects.all(),
        "query": query.urlencode(),
        "selected_runs": params.getlist("run"),
        "selected_companions": params.getlist("companion"),
    }
