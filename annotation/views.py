"""The annotator's pages: the campaign list and the blind pairwise rating page.

Blindness: everything rendered here is addressed by the campaign id and the assignment's random
key only, and the item is `annotation.blinding.item_payload`, the same payload the rating API
serializes. The two responses are "Response A" (left) and "Response B" (right) in the layout
drawn for the assignment; no companion, response, comparison or run is named or numbered, and no
other annotator's vote is read. Campaign text written by researchers (name, description,
guidelines) comes from `blinding.campaign_texts`, with the campaign's companion and run names
hidden.

Submit and skip answer htmx requests with the next item plus the progress (out of band); without
JavaScript they redirect to the rating page (post/redirect/get).
"""

from collections.abc import Callable
from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from h2htalk.roles import ANNOTATOR, role_required

from . import care, queue
from .access import rating_campaign_or_404, rating_campaigns
from .blinding import blind_names, blind_reasons, campaign_texts, item_payload
from .campaigns import progress_percent
from .forms import CareForm, RatingForm, SkipForm
from .markdown import render_markdown
from .models import Assignment, Campaign
from .progress import progress_for
from .qualification import phase
from .study import flow as study_flow

# ---------------------------------------------------------------- page pieces


def _campaign_context(user, campaign: Campaign, names: list[str], on_screen: bool) -> dict:
    """The campaign's blind texts and the user's progress; `on_screen`: an item is handed out
    to the user, which "left for me" counts too (progress_for leaves out what was handed out)."""
    progress = progress_for(user, campaign)
    texts = campaign_texts(campaign, names)
    return {
        "campaign": campaign,
        "campaign_name": texts["name"],
        "campaign_description": texts["description"],
        "guidelines_source": texts["guidelines"],
        "guidelines_language": texts["guidelines_language"],
        "support_source": texts["support"],
        "support_language": texts["support_language"],
        "progress": progress,
        "percent": round(progress_percent(progress.campaign_done, progress.campaign_target)),
        "left_for_me": progress.left_for_me + (1 if on_screen else 0),
    }


def campaign_rating_form(campaign: Campaign, names: list[str], data=None, **kwargs) -> RatingForm:
    """The rating form of this campaign: its reasons (names hidden) and confidence."""
    reasons = blind_reasons(campaign, names)
    return RatingForm(data, campaign=campaign, reasons=reasons, **kwargs)


def _item_context(
    assignment: Assignment | None,
    names: list[str],
    *,
    campaign: Campaign | None = None,
    closed: str = "",
    rating_form: RatingForm | None = None,
    skip_form: SkipForm | None = None,
    error: str = "",
    errors: list[str] | None = None,
    notice: str = "",
    skip_open: bool = False,
    note_read: str = "",
) -> dict:
    """`note_read`: the key of an item whose content note the rater read (continue without
    JavaScript); any other item with a content note shows the note first."""
    item = {"closed": closed, "error": error, "errors": errors or [], "notice": notice}
    if assignment is None or closed:
        return {"item": item}
    item.update(item_payload(assignment, names))
    item["note_first"] = bool(item["content_note"]) and note_read != str(assignment.key)
    item.update(
        {
            "rating_form": rating_form or campaign_rating_form(campaign, names),
            "skip_form": skip_form or SkipForm(),
            "skip_open": skip_open,
        }
    )
    return {"item": item}


def _next_item_context(user, campaign: Campaign, names: list[str], **extra) -> dict:
    try:
        assignment = queue.next_assignment(user, campaign)
    except queue.NotAdmitted:
        raise  # the callers send the annotator to the practice page
    except queue.QueueError as error:
        return _item_context(None, names, closed=str(error), **extra)
    return _item_context(assignment, names, campaign=campaign, **extra)


def _next_or_stop(request, campaign: Campaign, names: list[str], **extra) -> tuple[dict, str]:
    """The next item, or where a study participant goes instead (`annotation.study.flow`)."""
    stop = study_flow.stop_url(request, campaign)
    if stop:
        return {}, stop
    item = _next_item_context(request.user, campaign, names, **extra)
    return item, study_flow.stop_url(request, campaign, item["item"]) or ""


def _page_context(request, campaign: Campaign, names: list[str], item: dict) -> dict:
    on_screen = bool(item["item"].get("key"))
    return {**_campaign_context(request.user, campaign, names, on_screen), **item}


def _swap(request, campaign: Campaign, names: list[str], item: dict):
    """htmx answer: the item partial, and the progress out of band."""
    context = _page_context(request, campaign, names, item)
    context["oob"] = True
    return render(request, "annotation/_swap.html", context)


def _full_page(request, campaign: Campaign, names: list[str], item: dict):
    context = _page_context(request, campaign, names, item)
    context["guidelines"] = render_markdown(context["guidelines_source"])
    context["guidelines_open"] = _guidelines_first_visit(request, campaign, context["progress"])
    context["support"] = render_markdown(context["support_source"])
    return render(request, "annotation/rate.html", context)


def _guidelines_first_visit(request, campaign: Campaign, progress) -> bool:
    """Open the guidelines on the annotator's first visit to the campaign's rating page only:
    afterwards (remembered in their session, and whenever they have judged there) they start
    collapsed, so both responses of an item start above the fold (G opens them)."""
    seen = f"guidelines_seen_{campaign.pk}"
    if not campaign.guidelines or progress.done_total or request.session.get(seen):
        return False
    request.session[seen] = True
    return True


def _answer_invalid(request, campaign, names, assignment, **item_kwargs):
    """The same item again with what was entered and why it was refused."""
    item = _item_context(
        assignment, names, campaign=campaign, note_read=str(assignment.key), **item_kwargs
    )
    if request.htmx:
        return _swap(request, campaign, names, item)
    return _full_page(request, campaign, names, item)


def _answer_next(request, campaign, names, *, notice="", error="", short=""):
    """After a submit or skip: the next item (htmx), or back to the rating page. `short`: the
    notice without "here is the next one" (used when none follows, and after a redirect)."""
    notice, short = str(notice), str(short or notice)
    if request.htmx:
        try:
            item, stop = _next_or_stop(request, campaign, names, notice=notice, error=error)
        except queue.NotAdmitted:
            return _to_practice(request, campaign, short)
        if stop:
            return HttpResponseClientRedirect(stop)
        if notice and not item["item"].get("key"):  # nothing follows: no "here is the next one"
            item["item"]["notice"] = short
        return _swap(request, campaign, names, item)
    if error:
        messages.error(request, error)
    elif notice:
        messages.success(request, short)
    return redirect("annotation:rate", campaign_id=campaign.pk)


def _to_practice(request, campaign, notice: str = ""):
    """To the practice page (htmx: a full navigation, HX-Redirect), saying what was saved."""
    if notice:
        messages.success(request, notice)
    url = reverse("annotation:qualify", args=[campaign.pk])
    if request.htmx:
        return HttpResponse(headers={"HX-Redirect": url})
    return redirect(url)


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
    rows = [
        _campaign_context(
            request.user,
            campaign,
            blind_names(campaign),
            on_screen=queue.current_assignment(request.user, campaign) is not None,
        )
        | {"phase": phase(campaign, request.user)}
        for campaign in rating_campaigns(request.user).order_by("-created_at", "pk")
    ]
    return render(request, "annotation/home.html", {"rows": rows})


@transaction.atomic  # one transaction per request: the queue's locks end with it
@role_required(ANNOTATOR)
def rate(request, campaign_id):
    """The rating page: the current item (or a new one), guidelines, progress."""
    campaign = rating_campaign_or_404(request.user, campaign_id)
    names = blind_names(campaign)
    note_read = request.GET.get("continue", "")
    try:
        item, stop = _next_or_stop(request, campaign, names, note_read=note_read)
    except queue.NotAdmitted:
        return _to_practice(request, campaign)
    if stop:
        return redirect(stop)
    return _full_page(request, campaign, names, item)


@role_required(ANNOTATOR)
def support(request, campaign_id):
    """The campaign's support text on a page of its own (the rating page opens it in a dialog;
    this is where its link leads without JavaScript)."""
    campaign = rating_campaign_or_404(request.user, campaign_id)
    texts = campaign_texts(campaign, blind_names(campaign))
    context = {
        "campaign": campaign,
        "campaign_name": texts["name"],
        "support": render_markdown(texts["support"]),
        "support_language": texts["support_language"],
    }
    return render(request, "annotation/support.html", context)


@transaction.atomic
@role_required(ANNOTATOR)
def care_settings(request):
    """The risk categories the rater opts out of, in every campaign; `next`: where to go back."""
    back = request.POST.get("next") or request.GET.get("next") or ""
    ours = url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure())
    if not (ours and back.startswith("/")):  # a path of this site (`redirect` reads view names)
        back = ""
    form = CareForm(request.POST or None, initial={"opted_out": care.opted_out(request.user)})
    if request.method == "POST" and form.is_valid():
        passed_on = care.set_opted_out(request.user, form.cleaned_data["opted_out"])
        saved = _("Saved: your choice applies in every campaign from the next item on.")
        if passed_on:
            saved += " " + ngettext(
                "The item you held of those kinds went to someone else.",
                "The %(n)d items you held of those kinds went to someone else.",
                passed_on,
            ) % {"n": passed_on}
        messages.success(request, saved)
        return redirect(back or reverse("annotation:care"))
    return render(request, "annotation/care.html", {"form": form, "back": back})


def _submit_forms(data, campaign, names) -> tuple[RatingForm, dict]:
    """The bound rating form, and both forms to show again should it be refused."""
    form = campaign_rating_form(campaign, names, data)
    return form, {"rating_form": form, "skip_form": SkipForm(initial=_skip_initial(data))}


def _rather_not_forms(data, campaign, names) -> tuple[forms.Form, dict]:
    """ "I'd rather not" asks nothing: its form is empty and always valid."""
    return forms.Form(data), {}


def _skip_forms(data, campaign, names) -> tuple[SkipForm, dict]:
    """The bound skip form, and both forms to show again (skip part open) should it be refused."""
    form = SkipForm(data)
    rating = campaign_rating_form(campaign, names, initial=_rating_initial(data))
    return form, {"rating_form": rating, "skip_form": form, "skip_open": True}


def _store_submit(user, item, form: RatingForm):
    return queue.submit(user, item.key, form.submission(), item=item)


def _store_rather_not(user, item, form):
    return queue.skip(user, item.key, care.RATHER_NOT, item=item)


def _store_skip(user, item, form: SkipForm):
    data = form.cleaned_data
    return queue.skip(user, item.key, data["skip_reason"], data["skip_note"], item=item)


@dataclass(frozen=True)
class _Answer:
    """What differs between submitting and skipping an item."""

    action: str  # "submit" or "skip" (queue.REPLAY_STATE, queue.not_open_message)
    replay_notice: str
    stored_notice: str
    forms: Callable  # (POST data, campaign, names) -> (bound form, item fields to show again)
    store: Callable  # (user, item from queue.rated_item, valid form) -> stored in the queue


SUBMIT = _Answer(
    "submit",
    gettext_lazy("Saved."),
    gettext_lazy("Saved. Here is the next one."),
    _submit_forms,
    _store_submit,
)
SKIP = _Answer(
    "skip",
    gettext_lazy("Skipped."),
    gettext_lazy("Skipped. Here is the next one."),
    _skip_forms,
    _store_skip,
)


RATHER_NOT = _Answer(
    "skip",
    gettext_lazy("Passed on."),
    gettext_lazy("Passed on to someone else, no questions asked. Here is the next one."),
    _rather_not_forms,
    _store_rather_not,
)


def _answer(request, key, answer: _Answer):
    """Store a submit or skip once its form is valid, then answer with the next item; an open
    item whose form is refused is shown again with what was entered and why."""
    try:
        assignment, campaign = queue.rated_item(request.user, key)
    except queue.NotYours as error:
        raise Http404(_("No such item.")) from error
    names = blind_names(campaign)
    try:
        queue.check_open(assignment, campaign, answer.action)
    except queue.CampaignNotOpen as error:
        return _answer_not_open(request, campaign, names, str(error))
    form, again = answer.forms(request.POST, campaign, names)
    if not form.is_valid():
        if assignment.state == Assignment.State.OPEN:
            again["errors"] = _form_errors(form)
            return _answer_invalid(request, campaign, names, assignment, **again)
        if assignment.state == queue.REPLAY_STATE[answer.action]:  # a replay: nothing to fix
            return _answer_next(request, campaign, names, notice=answer.replay_notice)
        error = queue.already_message(assignment.state)
        return _answer_next(request, campaign, names, error=error)
    try:
        answer.store(request.user, assignment, form)
    except queue.NotYours as error:
        raise Http404(_("No such item.")) from error
    except queue.CampaignNotOpen as error:
        return _answer_not_open(request, campaign, names, str(error))
    except queue.QueueError as error:
        return _answer_next(request, campaign, names, error=str(error))
    notice, short = answer.stored_notice, answer.replay_notice
    return _answer_next(request, campaign, names, notice=notice, short=short)


@require_POST
@transaction.atomic
@role_required(ANNOTATOR)
def submit(request, key):
    """Store the judgment for this item (the key makes it idempotent), then the next item."""
    return _answer(request, key, SUBMIT)


@require_POST
@transaction.atomic
@role_required(ANNOTATOR)
def skip(request, key):
    """Skip this item with a reason (it does not count), then the next item."""
    return _answer(request, key, SKIP)


@require_POST
@transaction.atomic
@role_required(ANNOTATOR)
def rather_not(request, key):
    """ "I'd rather not": pass an item with a content note on, without penalty."""
    return _answer(request, key, RATHER_NOT)


def _rating_initial(data) -> dict:
    """What was entered in the rating part, to show again unvalidated (no error messages)."""
    initial = {}
    for name in [*RatingForm().fields, "confidence"]:
        if name in data:
            initial[name] = data.get(name)
    initial["both_unacceptable"] = data.get("both_unacceptable") in ("on", "true", "1")
    if "reasons" in data:
        initial["reasons"] = data.getlist("reasons")
    return initial


def _skip_initial(data) -> dict:
    return {name: data.get(name) for name in SkipForm.base_fields if name in data}
