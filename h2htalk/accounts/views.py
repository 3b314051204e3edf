"""The users page (/manage/, admins): roles, deactivation, onboarding from a CSV upload; and
the page where a user sets their password from a one-time link (anyone holding the link)."""

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.views import PasswordResetConfirmView
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse_lazy
from django.utils.translation import gettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from h2htalk.roles import ADMIN, ROLES, role_required

from . import links, onboarding, users
from .forms import NewPasswordForm, UsersFileForm


def _manage_page(request, form=None, errors=(), status=200):
    context = {
        "users": users.listing(),
        "roles": ROLES,
        "form": form or UsersFileForm(),
        "errors": errors,
    }
    return render(request, "admin_home.html", context, status=status)


@role_required(ADMIN)
def admin_home(request):
    return _manage_page(request)


@require_POST
@role_required(ADMIN)
def set_roles(request, user_id):
    user = get_object_or_404(get_user_model(), pk=user_id)
    users.set_roles(user, request.POST.getlist("roles"))
    return redirect("admin_home")


@require_POST
@role_required(ADMIN)
def set_active(request, user_id):
    user = get_object_or_404(get_user_model(), pk=user_id)
    try:
        users.set_active(user, request.POST.get("active") == "1", by=request.user)
    except users.AccountError as error:
        messages.error(request, str(error))
    return redirect("admin_home")


@require_POST
@role_required(ADMIN)
def revoke_links(request, user_id):
    """Make every set-password link the user was given unusable."""
    user = get_object_or_404(get_user_model(), pk=user_id)
    if links.revoke(user):
        messages.success(request, gettext("Every link of %(name)s is revoked.") % {"name": user})
    else:
        messages.info(
            request, gettext("%(name)s has set a password: no open link.") % {"name": user}
        )
    return redirect("admin_home")


@require_POST
@require_POST  # it changes the user's password: never on a GET
@role_required(ADMIN)
@never_cache  # the link is shown once and kept nowhere
def new_link(request, user_id):
    """A fresh one-time link for the user (an active one): every earlier link of theirs, and
    the password they have, stop working (`links.password_link` rotates)."""
    user = get_object_or_404(get_user_model(), pk=user_id, is_active=True)
    context = {
        "person": user,
        "link": links.fresh_link(user, request.build_absolute_uri("/")),
        "expiry": links.expiry(),
    }
    return render(request, "accounts/new_link.html", context)


@require_POST
@role_required(ADMIN)
@never_cache  # the links are shown once and kept nowhere
def create_users(request):
    form = UsersFileForm(request.POST, request.FILES)
    if not form.is_valid():
        return _manage_page(request, form, status=400)
    try:
        rows = onboarding.read_csv(form.cleaned_data["file"])
        outcomes = onboarding.create_users(rows, request.build_absolute_uri("/"))
    except onboarding.OnboardingError as error:
        return _manage_page(request, form, errors=error.errors, status=error.status)
    context = {
        "outcomes": outcomes,
        "with_link": [outcome for outcome in outcomes if outcome.link],
        "created": sum(outcome.status == onboarding.CREATED for outcome in outcomes),
        "links_csv": onboarding.links_csv(outcomes),
        "expiry": links.expiry(),
    }
    return render(request, "accounts/created.html", context)


class SetPasswordView(PasswordResetConfirmView):
    """Django's reset-confirm view (token check, the token moved out of the URL into the
    session, the password validators) in the site's layout; deactivated users are refused."""

    template_name = "accounts/set_password.html"
    form_class = NewPasswordForm
    success_url = reverse_lazy("login")

    def get_user(self, uidb64):
        user = super().get_user(uidb64)
        return user if user is not None and user.is_active else None

    def form_valid(self, form):
        messages.success(self.request, gettext("Your password is set: log in with it."))
        return super().form_valid(form)
