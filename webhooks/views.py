"""Webhook pages: endpoints (list, create, edit, delete), an endpoint's deliveries log, one
delivery's attempts and re-sending it by hand. Researchers and admins (role check), objects as
`services.visible_endpoints`; the secret for its owner only."""

import json

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk import confirmation
from h2htalk.roles import RESEARCHER, role_required

from . import services
from .forms import EndpointForm
from .models import Endpoint


@role_required(RESEARCHER)
def endpoint_list(request):
    rows = services.visible_endpoints(request.user)
    return render(request, "webhooks/list.html", {"endpoints": rows})


@role_required(RESEARCHER)
def endpoint_create(request):
    form = EndpointForm(request.POST or None, user=request.user, instance=Endpoint())
    if request.method == "POST" and form.is_valid():
        form.instance.owner = request.user
        endpoint = services.save(form.instance)
        messages.success(request, _("Webhook endpoint saved."))
        return render(request, "webhooks/secret.html", {"endpoint": endpoint, "created": True})
    return render(request, "webhooks/form.html", {"form": form, "endpoint": None})


@role_required(RESEARCHER)
def endpoint_edit(request, pk):
    endpoint = services.endpoint_or_404(request.user, pk)
    form = EndpointForm(request.POST or None, user=request.user, instance=endpoint)
    if request.method == "POST" and form.is_valid():
        services.save(form.instance)
        messages.success(request, _("Webhook endpoint saved."))
        return redirect("webhooks:detail", pk=endpoint.pk)
    return render(request, "webhooks/form.html", {"form": form, "endpoint": endpoint})


@role_required(RESEARCHER)
@require_POST
def endpoint_delete(request, pk):
    endpoint = services.endpoint_or_404(request.user, pk)
    if not confirmation.confirmed(request):
        question = delete_question(endpoint)
        return confirmation.ask(request, question, reverse("webhooks:detail", args=[pk]))
    services.delete(endpoint)
    messages.success(request, _("Webhook endpoint deleted."))
    return redirect("webhooks:list")


def delete_question(endpoint) -> confirmation.Question:
    return confirmation.Question(
        _("Delete the webhook endpoint %(url)s?") % {"url": endpoint.url},
        _("No more events are sent to it, and its deliveries log is deleted with it."),
        _("Delete"),
    )


@role_required(RESEARCHER)
def endpoint_detail(request, pk):
    endpoint = services.endpoint_or_404(request.user, pk)
    may_read_secret = services.may_read_secret(request.user, endpoint)
    if request.GET.get("secret") and may_read_secret:  # asked for by its owner: shown
        return render(request, "webhooks/secret.html", {"endpoint": endpoint, "created": False})
    context = {
        "endpoint": endpoint,
        "deliveries": services.deliveries_of(endpoint)[:100],
        "may_read_secret": may_read_secret,
        "delete_prompt": delete_question(endpoint).prompt,
    }
    return render(request, "webhooks/detail.html", context)


@role_required(RESEARCHER)
def delivery_detail(request, pk):
    delivery = services.delivery_or_404(request.user, pk)
    context = {
        "delivery": delivery,
        "attempts": delivery.attempt_log.all(),
        "payload_text": json.dumps(delivery.payload, ensure_ascii=False, indent=2),
    }
    return render(request, "webhooks/delivery.html", context)


@role_required(RESEARCHER)
@require_POST
def delivery_resend(request, pk):
    delivery = services.delivery_or_404(request.user, pk)
    services.resend(delivery)
    messages.success(request, _("The delivery is being sent again."))
    return redirect("webhooks:delivery", pk=pk)
