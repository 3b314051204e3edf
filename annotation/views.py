"""The annotator's pages: the campaign list and the blind pairwise rating page.

Blindness: everything rendered here is addressed by the campaign id and the assignment's random
key only. The two responses are "Response A" (left) and "Response B" (right) in the layout drawn
for the assignment; no companion, response, comparison or run is named or numbered, and no other
annotator's vote is read. Campaign text written by researchers (name, description, guidelines)
and the responses pass through `blind_text`, which hides the names of the campaign's companions
and runs should they appear there.

Submit and skip answer htmx requests with the next item plus the progress (out of band); without
JavaScript they redirect to the rating page (post/redirect/get).
"""

import re

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from h2htalk.roles import ANNOTATOR, role_required
from scenarios.models import CompanionModel, GenerationRun

from . import queue
from .access import rating_campaign_or_404, rating_campaigns
from .forms import RatingForm, SkipForm
from .markdown import render_markdown
from .models import Assignment, Campaign

HIDDEN_NAME = "[name hidden]"


# ---------------------------------------------------------------- blindness helpers


def blind_names(campaign: Campaign) -> list[str]:
    """Names that would unblind an item: the campaign's companions (name, model id) and runs."""
    names = set()
    for name, model_id in CompanionModel.objects.filter(campaigns=campaign).values_list(
        "name", "model_id"
    ):
        names.update((name, model_id))
    names.update(GenerationRun.objects.filter(campaigns=campaign).values_list("name", flat=True))
    return sorted((n.strip() for n in names if n and len(n.strip()) >= 2), key=len, reverse=True)


# Scripts written without spaces between words (kana, CJK ideographs, Hangul): their characters
# end a word, so "我是Qwen2.5-7B，" or "我是小暖呀" still hide the name.
_NO_SPACE_SCRIPTS = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003ffff"
)
_WORD_CHAR = rf"[^\W{_NO_SPACE_SCRIPTS}]"  # a letter, digit or _ that would extend the name


def blind_text(text: str, names: list[str]) -> str:
    """`text` with every whole-word occurrence of these names replaced (case-insensitive).

    Whole word: not touching a letter, digit or underscore, where characters of scripts without
    spaces (Chinese, Japanese, Korean) do not count, so a name inside Chinese text is found.
    """
    if not text or not names:
        return text or ""
    alternatives = "|".join(re.escape(n) for n in names)
    pattern = rf"(?<!{_WORD_CHAR})(?:{alternatives})(?!{_WORD_CHAR})"
    return re.sub(pattern, HIDDEN_NAME, text, flags=re.IGNORECASE)


# ---------------------------------------------------------------- page pieces


def _campaign_context(user, campaign: Campaign, names: list[str]) -> dict:
    progress = queue.progress_for(user, campaign)
    return {
        "campaign": campaign,
        "campaign_name": blind_text(campaign.name, names),
        "campaign_description": blind_text(campaign.description, names),
        "progress": progress,
        "percent": _percent(progress),
    }


def _percent(progress) -> int:
    if not progress.campaign_target:
        return 0
    return min(100, round(100 * progress.campaign_done / progress.campaign_target))


def _memory(entries) -> list[dict]:
    out = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str):
            out.append({"content": entry})
        elif isinstance(entry, dict) and entry.get("content"):
            out.append(entry)
    return out


def _dicts(entries) -> list[dict]:
    return [e for e in (entries if isinstance(entries, list) else []) if isinstance(e, dict)]


def _load(assignment: Assignment) -> Assignment:
    """The assignment with what the page shows, in one query (no prompts, no companions)."""
    return (
        Assignment.objects.select_related(
            "comparison__scenario__persona", "comparison__response_a", "comparison__response_b"
        )
        .only(
            "key",
            "left_is_a",
            "state",
            "lease_expires_at",
            "comparison__scenario",
            "comparison__response_a",
            "comparison__response_b",
            "comparison__scenario__persona",
            "comparison__scenario__subtask",
            "comparison__scenario__language",
            "comparison__scenario__history",
            "comparison__scenario__memory",
            "comparison__scenario__schedule",
            "comparison__scenario__user_message",
            "comparison__scenario__persona__name",
            "comparison__scenario__persona__summary",
            "comparison__response_a__text",
            "comparison__response_b__text",
        )
        .get(pk=assignment.pk)
    )


def _item_context(
    assignment: Assignment | None,
    names: list[str],
    *,
    closed: str = "",
    rating_form: RatingForm | None = None,
    skip_form: SkipForm | None = None,
    error: str = "",
    errors: list[str] | None = None,
    notice: str = "",
    skip_open: bool = False,
) -> dict:
    item = {"closed": closed, "error": error, "errors": errors or [], "notice": notice}
    if assignment is None or closed:
        return {"item": item}
    assignment = _load(assignment)
    comparison = assignment.comparison
    scenario = comparison.scenario
    a, b = comparison.response_a.text, comparison.response_b.text
    left, right = (a, b) if assignment.left_is_a else (b, a)
    item.update(
        {
            "key": assignment.key,
            "scenario": scenario,
            "persona": scenario.persona,
            "history": _dicts(scenario.history),
            "memory": _memory(scenario.memory),
            "schedule": _dicts(scenario.schedule),
            "left": blind_text(left, names),
            "right": blind_text(right, names),
            "rating_form": rating_form or RatingForm(),
            "skip_form": skip_form or SkipForm(),
            "skip_open": skip_open,
        }
    )
    return {"item": item}


def _next_item_context(user, campaign: Campaign, names: list[str], **extra) -> dict:
    try:
        assignment = queue.next_assignment(user, campaign)
    except queue.QueueError as error:
        return _item_context(None, names, closed=str(error), **extra)
    return _item_context(assignment, names, **extra)


def _own_assignment(request, key) -> tuple[Assignment, Campaign]:
    """The user's assignment by key and its campaign; 404 (never 403) for anything else."""
    assignment = (
        Assignment.objects.select_related("comparison__campaign")
        .filter(key=key, annotator=request.user)
        .first()
    )
    if assignment is None:
        raise Http404("No such item.")
    campaign = rating_campaign_or_404(request.user, assignment.comparison.campaign_id)
    return assignment, campaign


def _page_context(request, campaign: Campaign, names: list[str], item: dict) -> dict:
    context = _campaign_context(request.user, campaign, names)
    context.update(item)
    # "Left for me" counts the item on screen too (progress_for leaves out what was handed out).
    context["left_for_me"] = context["progress"].left_for_me + (1 if item["item"].get("key") else 0)
    return context


def _swap(request, campaign: Campaign, names: list[str], item: dict):
    """htmx answer: the item partial, and the progress out of band."""
    context = _page_context(request, campaign, names, item)
    context["oob"] = True
    return render(request, "annotation/_swap.html", context)


def _full_page(request, campaign: Campaign, names: list[str], item: dict):
    context = _page_context(request, campaign, names, item)
    context["guidelines"] = render_markdown(blind_text(campaign.guidelines, names))
    context["guidelines_open"] = context["progress"].done_total == 0
    return render(request, "annotation/rate.html", context)


def _answer_invalid(request, campaign, names, assignment, **item_kwargs):
    """The same item again with what was entered and why it was refused."""
    item = _item_context(assignment, names, **item_kwargs)
    if request.htmx:
        return _swap(request, campaign, names, item)
    return _full_page(request, campaign, names, item)


def _answer_next(request, campaign, names, *, notice="", error=""):
    """After a submit or skip: the next item (htmx), or back to the rating page."""
    if request.htmx:
        item = _next_item_context(request.user, campaign, names, notice=notice, error=error)
        if notice and not item["item"].get("key"):  # nothing follows: no "here is the next one"
            item["item"]["notice"] = notice.split(".")[0] + "."
        return _swap(request, campaign, names, item)
    if error:
        messages.error(request, error)
    elif notice:
        messages.success(request, notice.split(".")[0] + ".")
    return redirect("annotation:rate", campaign_id=campaign.pk)


def _answer_not_open(request, campaign, names, message: str):
    """Submit or skip on a campaign that is not open: 409, nothing stored, and the page says
    the campaign is not open (htmx: the item is replaced by that panel)."""
    item = _item_context(None, names, closed=message)
    if request.htmx:
        response = _swap(request, campaign, names, item)
    else:
        response = _full_page(request, campaign, names, item)
    response.status_code = 409
    return response


def _form_errors(form) -> list[str]:
    found = []
    for name, errors in form.errors.items():
        label = form.fields[name].label if name in form.fields else ""
        for message in errors:
            found.append(message if not label or name == "preference" else f"{label}: {message}")
    return found


# ---------------------------------------------------------------- views


@role_required(ANNOTATOR)
def home(request):
    """The annotator's landing page: their open campaigns with progress."""
    rows = []
    for campaign in rating_campaigns(request.user).order_by("-created_at", "pk"):
        row = _campaign_context(request.user, campaign, blind_names(campaign))
        current = queue.current_assignment(request.user, campaign)
        row["left_for_me"] = row["progress"].left_for_me + (1 if current else 0)
        rows.append(row)
    return render(request, "annotation/home.html", {"rows": rows})


@role_required(ANNOTATOR)
def rate(request, campaign_id):
    """The rating page: the current item (or a new one), guidelines, progress."""
    campaign = rating_campaign_or_404(request.user, campaign_id)
    names = blind_names(campaign)
    return _full_page(request, campaign, names, _next_item_context(request.user, campaign, names))


@require_POST
@role_required(ANNOTATOR)
def submit(request, key):
    """Store the judgment for this item (the key makes it idempotent), then the next item."""
    assignment, campaign = _own_assignment(request, key)
    names = blind_names(campaign)
    if campaign.state != Campaign.State.OPEN and assignment.state != Assignment.State.SUBMITTED:
        return _answer_not_open(request, campaign, names, queue.not_open_message(campaign))
    form = RatingForm(request.POST)
    if not form.is_valid():
        if assignment.state == Assignment.State.OPEN:
            return _answer_invalid(
                request,
                campaign,
                names,
                assignment,
                rating_form=form,
                skip_form=SkipForm(initial=_skip_initial(request.POST)),
                errors=_form_errors(form),
            )
        if assignment.state == Assignment.State.SUBMITTED:  # a replay: nothing to fix
            return _answer_next(request, campaign, names, notice="Saved.")
        return _answer_next(
            request,
            campaign,
            names,
            error=f"This item was already {assignment.get_state_display().lower()}.",
        )
    try:
        queue.submit(request.user, key, form.submission())
    except queue.NotYours as error:
        raise Http404("No such item.") from error
    except queue.CampaignNotOpen as error:
        return _answer_not_open(request, campaign, names, str(error))
    except queue.QueueError as error:
        return _answer_next(request, campaign, names, error=str(error))
    return _answer_next(request, campaign, names, notice="Saved. Here is the next one.")


@require_POST
@role_required(ANNOTATOR)
def skip(request, key):
    """Skip this item with a reason (it does not count), then the next item."""
    assignment, campaign = _own_assignment(request, key)
    names = blind_names(campaign)
    if campaign.state != Campaign.State.OPEN and assignment.state != Assignment.State.SKIPPED:
        return _answer_not_open(request, campaign, names, queue.not_open_message(campaign, "skip"))
    form = SkipForm(request.POST)
    if not form.is_valid():
        if assignment.state == Assignment.State.OPEN:
            return _answer_invalid(
                request,
                campaign,
                names,
                assignment,
                rating_form=RatingForm(initial=_rating_initial(request.POST)),
                skip_form=form,
                errors=_form_errors(form),
                skip_open=True,
            )
        if assignment.state == Assignment.State.SKIPPED:
            return _answer_next(request, campaign, names, notice="Skipped.")
        return _answer_next(
            request,
            campaign,
            names,
            error=f"This item was already {assignment.get_state_display().lower()}.",
        )
    try:
        queue.skip(
            request.user, key, form.cleaned_data["skip_reason"], form.cleaned_data["skip_note"]
        )
    except queue.NotYours as error:
        raise Http404("No such item.") from error
    except queue.CampaignNotOpen as error:
        return _answer_not_open(request, campaign, names, str(error))
    except queue.QueueError as error:
        return _answer_next(request, campaign, names, error=str(error))
    return _answer_next(request, campaign, names, notice="Skipped. Here is the next one.")


def _rating_initial(data) -> dict:
    """What was entered in the rating part, to show again unvalidated (no error messages)."""
    initial = {}
    for name in RatingForm().fields:
        if name in data:
            initial[name] = data.get(name)
    initial["both_unacceptable"] = data.get("both_unacceptable") in ("on", "true", "1")
    return initial


def _skip_initial(data) -> dict:
    return {name: data.get(name) for name in SkipForm.base_fields if name in data}
