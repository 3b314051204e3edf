"""Django's own messages that its Simplified Chinese catalogue lacks (Django 5.2 reworded them),
marked here so that `make messages` keeps them in ours (locale/, which Django reads first).

Never evaluated: the marks only tell makemessages which msgids to collect; Django's own code
translates them at run time with the same msgid.
"""

from django.utils.translation import ngettext_lazy

DJANGO_MESSAGES = (
    # django.contrib.auth.password_validation.MinimumLengthValidator.get_error_message
    ngettext_lazy(
        "This password is too short. It must contain at least %d character.",
        "This password is too short. It must contain at least %d characters.",
        8,
    ),
)
