"""Joining through a study link: the participant's ids read from the address, the participant
created or resumed, and logged in (see the package for the trust model).

A join is refused (`JoinRefused`, with the status and sentence the page shows) when a
parameter is missing or malformed (400), when the participant id already joined from another
session with other parameters (403), when someone with another role is logged in in this
browser (409), and when the address joined too often (429: the login throttle's per-address
slots, h2htalk.auth). Resuming in the same browser spends no slot.
"""

import secrets
import unicodedata

from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from h2htalk import auth
from h2htalk.roles import ANNOTATOR

from .links import VALUE_MAX, params
from .models import Participant, StudyLink

SESSION_KEY = "study"  # {"participant": pk, "campaign": pk}: set when the participant joins
THROTTLE_KIND = "study-join"


class JoinRefused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def read_ids(link: StudyLink, query) -> dict[str, str]:
    """The participant's ids from the query string, as given; JoinRefused(400) naming the
    parameter that is missing, repeated, too long or holds control characters."""
    ids = {}
    for field, name in params(link):
        values = query.getlist(name)
        value = values[0].strip() if len(values) == 1 else ""
        if len(values) > 1:
            raise JoinRefused(400, _("The parameter %(name)s is given twice.") % {"name": name})
        if not value and field == "participant_id":
            raise JoinRefused(
                400,
                _("This study link needs your participant id in the parameter %(name)s.")
                % {"name": name},
            )
        if len(value) > VALUE_MAX or any(unicodedata.category(c)[0] == "C" for c in value):
            raise JoinRefused(
                400,
                _("The parameter %(name)s is not a valid id (at most %(n)d printable characters).")
                % {"name": name, "n": VALUE_MAX},
            )
        ids[field] = value
    return ids


def join(request, link: StudyLink) -> Participant:
    """The participant these ids name in the link's campaign (created on their first visit),
    logged in in this browser."""
    ids = read_ids(link, request.GET)
    resumed = _same_browser(request, link, ids["participant_id"])
    if resumed is not None:
        return resumed
    user = request.user
    if user.is_authenticated and not hasattr(user, "study_participant"):
        raise JoinRefused(
            409,
            _("You are logged in as %(name)s. Log out first to join this study as a participant.")
            % {"name": user.username},
        )
    address = auth.client_address(request)
    try:
        auth.spend_address_slot(
            THROTTLE_KIND,
            address,
            settings.STUDY_JOIN_ADDRESS_LIMIT,
            settings.STUDY_JOIN_WINDOW_SECONDS,
        )
    except auth.Locked as locked:
        raise JoinRefused(429, auth.lockout_message(locked.seconds)) from None
    participant = _find_or_create(link, ids, address)
    login(request, participant.user, backend="h2htalk.auth.ThrottledModelBackend")
    request.session[SESSION_KEY] = {"participant": participant.pk, "campaign": link.campaign_id}
    return participant


def _same_browser(request, link: StudyLink, participant_id: str) -> Participant | None:
    """The participant this browser's session already holds, if the ids name them."""
    held = request.session.get(SESSION_KEY) or {}
    if not request.user.is_authenticated or held.get("campaign") != link.campaign_id:
        return None
    participant = getattr(request.user, "study_participant", None)
    if participant is None or participant.pk != held.get("participant"):
        return None
    return participant if participant.participant_id == participant_id else None


def _find_or_create(link: StudyLink, ids: dict, address: str) -> Participant:
    found = Participant.objects.filter(
        campaign=link.campaign_id, participant_id=ids["participant_id"]
    ).first()
    if found is None:
        try:
            with transaction.atomic():
                return _create(link, ids, address)
        except IntegrityError:  # joined at the same moment in another request
            found = Participant.objects.get(
                campaign=link.campaign_id, participant_id=ids["participant_id"]
            )
    if any(getattr(found, field) != value for field, value in ids.items()):
        raise JoinRefused(
            403,
            _(
                "This participant id has already joined this study in another session. Continue "
                "in the browser you started in, or contact the researchers."
            ),
        )
    return found


def _create(link: StudyLink, ids: dict, address: str) -> Participant:
    """A participant and their account: a random username (the only name the participant and
    other raters see), no password, the annotator role, in this campaign's pool only."""
    user = get_user_model().objects.create_user(f"p-{secrets.token_hex(6)}")
    user.groups.add(Group.objects.get(name=ANNOTATOR))
    link.campaign.annotators.add(user)
    return Participant.objects.create(
        link=link, campaign=link.campaign, user=user, address=address[:64], **ids
    )
