"""What the scenario list says after a bulk state change: what changed, and when something
was skipped, why and what to do instead (a change of nothing is a warning, never a success)."""

from django.contrib import messages
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from h2htalk.roles import ADMIN, has_role
from scenarios.models import Scenario
from scenarios.services import ACTION_HELP, ACTION_LABELS, SKIP_REVIEW, TRANSITIONS


def _states(counts: dict) -> str:
    labels = dict(Scenario.State.choices)
    return ", ".join(f"{labels.get(state, state)} {n:,}" for state, n in sorted(counts.items()))


def _way_forward(action: str, skipped: dict, user) -> str:
    """The path that works for the skipped scenarios, if there is one."""
    if action == "approve" and Scenario.State.DRAFT in skipped:
        text = _(
            "Drafts are approved in two steps: choose “Submit for review” first, then “Approve”."
        )
        if has_role(user, ADMIN):
            text += " " + _(
                "As an admin you may instead choose “Approve, skipping review”: each revision "
                "records that the review was skipped."
            )
        return text
    return ""


def outcome(action: str, counts: dict, user) -> list[tuple[int, str]]:
    """(messages level, text) for the bulk change's result."""
    label = ACTION_LABELS[action]
    changed, skipped = counts["changed"], counts["skipped"]
    said = []
    if changed:
        said.append(
            (
                messages.SUCCESS,
                ngettext(
                    "%(action)s: %(n)s scenario changed.",
                    "%(action)s: %(n)s scenarios changed.",
                    changed,
                )
                % {"action": label, "n": f"{changed:,}"},
            )
        )
    if not skipped and not changed:
        said.append(
            (messages.WARNING, _("%(action)s: no scenario was chosen.") % {"action": label})
        )
    if skipped:
        sources = ", ".join(str(Scenario.State(s).label) for s in TRANSITIONS[action][0])
        text = ngettext(
            "%(action)s skipped %(n)s scenario (%(states)s): it applies only to: %(sources)s.",
            "%(action)s skipped %(n)s scenarios (%(states)s): it applies only to: %(sources)s.",
            skipped,
        ) % {
            "action": label,
            "n": f"{skipped:,}",
            "states": _states(counts["skipped_states"]),
            "sources": sources,
        }
        if not changed:
            text = _("Nothing changed.") + " " + text
        way = _way_forward(action, counts["skipped_states"], user)
        said.append((messages.WARNING, f"{text} {way}".strip()))
    return said


def help_rows(user) -> list[tuple[str, str]]:
    """(label, what it does) of every action the user may apply: the bulk bar's explanation."""
    rows = []
    for name, label in ACTION_LABELS.items():
        if name == SKIP_REVIEW and not has_role(user, ADMIN):
            continue
        rows.append((label, ACTION_HELP[name]))
    return rows
