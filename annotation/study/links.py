"""A campaign's study link: the platforms' parameter names, the address to publish, rotating
the token and closing or reopening the link. Pages, API and tests share these."""

import re

from django.urls import reverse
from django.utils import timezone

from .models import StudyLink, new_token

# platform -> (participant, study, session) parameter names the platform appends to the link.
PRESETS = {
    StudyLink.Platform.PROLIFIC: ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"),
    StudyLink.Platform.MTURK: ("workerId", "hitId", "assignmentId"),
    StudyLink.Platform.GENERIC: ("participant", "study", "session"),
}
# How each platform fills a parameter in the address it sends participants to.
PLACEHOLDERS = {
    StudyLink.Platform.PROLIFIC: "{{%%%s%%}}",  # Prolific's {{%PROLIFIC_PID%}}
    StudyLink.Platform.MTURK: "%s",  # MTurk's external question appends the values itself
    StudyLink.Platform.GENERIC: "{%s}",
}
PARAM_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,40}$")
VALUE_MAX = 100


def params(link: StudyLink) -> list[tuple[str, str]]:
    """(field, parameter name) of the link's parameters that are in use."""
    named = [
        ("participant_id", link.participant_param),
        ("study_id", link.study_param),
        ("session_id", link.session_param),
    ]
    return [(field, name) for field, name in named if name]


def join_path(link: StudyLink) -> str:
    return reverse("study:join", args=[link.token])


def published_url(link: StudyLink, base: str) -> str:
    """The address to paste into the platform, its parameters as the platform fills them in."""
    placeholder = PLACEHOLDERS.get(link.platform, "{%s}")
    query = "&".join(f"{name}={placeholder % name}" for _, name in params(link))
    if link.platform == StudyLink.Platform.MTURK:
        query = ""  # MTurk appends workerId, hitId and assignmentId to the external URL
    return f"{base}{join_path(link)}" + (f"?{query}" if query else "")


def rotate(link: StudyLink) -> StudyLink:
    """A new token: the old link answers 404 from now on (participants already in carry on)."""
    link.token = new_token()
    link.rotated_at = timezone.now()
    link.save(update_fields=["token", "rotated_at"])
    return link


def set_open(link: StudyLink, is_open: bool) -> StudyLink:
    """Close the link (404 for everyone who joins from now on) or open it again."""
    link.is_open = is_open
    link.save(update_fields=["is_open"])
    return link


def open_link_or_none(token: str) -> StudyLink | None:
    return (
        StudyLink.objects.select_related("campaign").filter(token=token, is_open=True).first()
        if token
        else None
    )
