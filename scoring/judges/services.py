"""What the judge pages and the judge API do beyond rendering: starting a run, copying a
configuration, and the tables of a run's page. Kept here so the page and the API start runs the
same way and the views stay thin."""

from django.db import transaction
from django.db.models import Count, Q

from scoring.judges import judging, parsing
from scoring.judges.forms import JudgeConfigForm
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict
from scoring.tasks import queue_judge_run

FAILURES_SHOWN = 100
Parse = JudgeVerdict.Parse


def start_run(run: JudgeRun, responses) -> JudgeRun:
    """Save a new run with its responses (None: the campaign's pairs) and queue it, together:
    a run is never visible without its responses."""
    with transaction.atomic():
        run.save()
        if responses is not None:
            run.responses.set(responses)
        queue_judge_run(run)
    return run


def copy_initial(source: JudgeConfig) -> dict:
    """The form's initial values for a copy of a configuration (a locked judge is changed by
    copying it)."""
    initial = {
        name: getattr(source, name) for name in JudgeConfigForm._meta.fields if name != "name"
    }
    initial["name"] = f"{source.name} (copy)"[:100]
    return initial


def configs_with_counts():
    """Every configuration with its number of runs and verdicts."""
    return JudgeConfig.objects.annotate(
        n_runs=Count("runs", distinct=True), n_verdicts=Count("runs__verdicts")
    )


def runs_with_counts(judge_id: int | None):
    """Runs (of one judge, if given) with their verdict, unparseable and error counts."""
    runs = JudgeRun.objects.select_related("judge", "campaign", "created_by").annotate(
        n_verdicts=Count("verdicts"),
        n_unparseable=Count("verdicts", filter=Q(verdicts__parse=Parse.FAILED)),
        n_errors=Count("verdicts", filter=Q(verdicts__parse=Parse.ERROR)),
    )
    return runs if judge_id is None else runs.filter(judge_id=judge_id)


def run_context(run: JudgeRun) -> dict:
    """What the run page and its polled progress partial show."""
    return {
        "run": run,
        "progress": judging.progress_of(run),
        "active": run.state in judging.ACTIVE,
    }


def run_detail_context(run: JudgeRun) -> dict:
    """The run page: progress, the first failures with their raw outputs, and the summaries of
    whichever modes the run holds verdicts of (an imported run may hold both)."""
    context = run_context(run)
    verdicts = run.verdicts.select_related(
        "response__scenario",
        "response__companion",
        "first__scenario",
        "first__companion",
        "second__companion",
    ).order_by("pk")
    context["unparseable"] = verdicts.filter(parse=Parse.FAILED)[:FAILURES_SHOWN]
    context["errors"] = verdicts.filter(parse=Parse.ERROR)[:FAILURES_SHOWN]
    context["shown"] = FAILURES_SHOWN
    if (
        run.judge.mode == JudgeConfig.Mode.PAIRWISE
        or run.verdicts.filter(first__isnull=False).exists()
    ):
        context["pairwise_summary"] = judging.pairwise_summary(run)
    if (
        run.judge.mode == JudgeConfig.Mode.SINGLE
        or run.verdicts.filter(response__isnull=False).exists()
    ):
        context["single_summary"] = judging.single_summary(run)
    context["dimensions"] = parsing.DIMENSIONS
    return context
