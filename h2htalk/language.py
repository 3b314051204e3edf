"""The interface language: the switch on every page, remembered for the browser and the user.

Django's LocaleMiddleware picks the language of each request: the language cookie, else the
browser's Accept-Language, else English. The switch (`set_language`, a POST form in base.html)
sets the cookie through Django's own view and, for a logged-in user, stores the choice on their
`Profile`; at login the stored choice is applied (the cookie is set on the login's answer), and
a choice made before logging in is stored for a user who had none. Nothing is read per request.
"""

from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver
from django.utils import translation
from django.views.decorators.http import require_POST
from django.views.i18n import set_language as django_set_language

from .models import Profile

LANGUAGE_CODES = frozenset(code for code, _ in settings.LANGUAGES)


def supported(code) -> str:
    """`code` when it is one of settings.LANGUAGES, else ""."""
    return code if isinstance(code, str) and code in LANGUAGE_CODES else ""


def stored_language(user) -> str:
    """The language `user` chose ("" when none)."""
    found = Profile.objects.filter(user=user).values_list("language", flat=True).first()
    return supported(found)


def store_language(user, code: str) -> None:
    Profile.objects.update_or_create(user=user, defaults={"language": code})


@require_POST
def set_language(request):
    """Django's set_language (the cookie, then back to `next`), and the user's stored choice."""
    response = django_set_language(request)
    code = supported(request.POST.get("language"))
    if code and request.user.is_authenticated:
        store_language(request.user, code)
    return response


@receiver(user_logged_in, dispatch_uid="h2htalk.language.apply_at_login")
def apply_at_login(sender, request, user, **kwargs):
    """At login: the user's stored language for this answer and, by the cookie, the next ones;
    without one, the language the browser chose with the switch becomes theirs."""
    if request is None:
        return
    code = stored_language(user)
    if code:
        request.remembered_language = code
        translation.activate(code)
        request.LANGUAGE_CODE = code
        return
    chosen = supported(request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME))
    if chosen:
        store_language(user, chosen)


class RememberedLanguageMiddleware:
    """Sets the language cookie on the answer to a login that applied a stored language."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        code = getattr(request, "remembered_language", "")
        if code and request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) != code:
            response.set_cookie(
                settings.LANGUAGE_COOKIE_NAME,
                code,
                max_age=settings.LANGUAGE_COOKIE_AGE,
                path=settings.LANGUAGE_COOKIE_PATH,
                domain=settings.LANGUAGE_COOKIE_DOMAIN,
                secure=settings.LANGUAGE_COOKIE_SECURE,
                httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
                samesite=settings.LANGUAGE_COOKIE_SAMESITE,
            )
        return response
