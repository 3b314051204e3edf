"""One-time links to set a password, made by Django's password-reset token machinery.

A link is `/password/set/<uidb64>/<token>/`: the user's id in base 64 and a token from
`default_token_generator`, an HMAC of the user's id, password hash, last login, email and the
moment it was made. Nothing is stored: there is no table of links to leak or clean up.
- One time: setting the password changes the hash, so the link stops working.
- Expiry: a token older than PASSWORD_RESET_TIMEOUT seconds (default 7 days) is refused.
- A new link cancels the earlier ones: issuing one to an existing user first gives them a new
  random unusable password (`rotate`), which changes the hash every earlier token was made
  from; `revoke` does only that (an admin's "revoke links" on /manage/ and the API).
New users get an unusable password, so they cannot log in until they used their link.
"""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.tokens import default_token_generator
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode


def needs_link(user) -> bool:
    """An active user who has never set a password."""
    return user.is_active and not user.has_usable_password()


def revoke(user) -> bool:
    """Make every link issued to this user so far unusable (a user who has set a password has
    no open link: that changed the hash already). Returns whether there was anything to do."""
    if user.has_usable_password():
        return False
    user.set_unusable_password()  # a new random "!…" value: every earlier token fails
    user.save(update_fields=["password"])
    return True


def password_path(user, rotate: bool = True) -> str:
    """The link's path; `rotate` (the default) first cancels every earlier link."""
    if rotate:
        revoke(user)
    uidb64 = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return reverse("password_set", kwargs={"uidb64": uidb64, "token": token})


def password_link(user, base_url: str, rotate: bool = True) -> str:
    """The absolute link (`base_url` is the site's address, e.g. https://h2h.example.org)."""
    return base_url.rstrip("/") + password_path(user, rotate)


def expiry():
    """When a link made now stops working."""
    return timezone.now() + timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)


def fresh_link(user, base_url: str) -> str:
    """A new link for any active user (an admin's "New set-password link" on /manage/): every
    earlier link and the password they had stop working, until they set one with it."""
    user.set_unusable_password()
    user.save(update_fields=["password"])
    return password_link(user, base_url, rotate=False)
