"""The details of a judgment beside its preference: "both unacceptable", reasons, confidence.

"Both unacceptable" is its own outcome, given *instead of* a preference (on the page: U, then
Enter). It is stored as `both_unacceptable` with both preference columns 0, the tie point, and
that is the one definition every statistic reads: Bradley–Terry counts it as a tie (half a win
to each side: neither response was preferred, and leaving it out would hide from the ranking
that a companion pair was equally bad), the 5-point ordinal α and the A / tie / B nominal α put
it on the tie point, and the agreement page adds a nominal label with it as a category of its
own (``outcome4``: A / tie / B / both unacceptable, mirrored as A ↔ B with the other two fixed,
`h2htalk.stats.agreement.labels`). A tie and "both unacceptable" are both symmetric, so every
figure stays the same when the screen sides are swapped or the companions renumbered.
Judgments stored before this (when "both unacceptable" was a checkbox beside a preference)
keep their preference.

Reasons: the campaign's checklist of why the preferred response is better (`Campaign.
reason_choices`, [{"key", "label"}], keys made from the labels). A judgment stores the keys it
ticked, said of the preferred response, never of a screen side or a companion; so reasons are
refused on a tie or with "both unacceptable" (no response is preferred). Confidence: 1 (unsure)
to 3 (sure), optional, asked when the campaign says so (`Campaign.ask_confidence`).
"""

from django.utils.text import slugify
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

CONFIDENCE_CHOICES = [
    (1, gettext_lazy("Unsure")),
    (2, gettext_lazy("Fairly sure")),
    (3, gettext_lazy("Sure")),
]
MAX_REASONS = 9  # one digit key each on the rating page
MAX_LABEL = 80


class DetailError(ValueError):
    """A reason, confidence or outcome the campaign does not take (the message says why)."""


def reason_key(label: str) -> str:
    """The stable key of a reason label (kept in judgments; any script)."""
    return slugify(label, allow_unicode=True)[:40] or "reason"


def parse_reasons(entries) -> list[dict]:
    """The campaign's checklist from labels (text lines or a list) or {"key", "label"} dicts;
    DetailError when there are too many, a label is too long or two keys are equal."""
    if isinstance(entries, str):
        entries = entries.splitlines()
    if not isinstance(entries, list | tuple):
        raise DetailError(_("Reasons are a list of labels (or of {key, label})."))
    choices = []
    for entry in entries:
        if isinstance(entry, dict):
            label = str(entry.get("label", "")).strip()
            key = reason_key(str(entry.get("key") or label))
        else:
            label = str(entry).strip()
            key = reason_key(label)
        if not label:
            continue
        if len(label) > MAX_LABEL:
            raise DetailError(_("A reason is limited to %(n)d characters.") % {"n": MAX_LABEL})
        choices.append({"key": key, "label": label})
    if len(choices) > MAX_REASONS:
        raise DetailError(_("At most %(n)d reasons (one key each).") % {"n": MAX_REASONS})
    keys = [choice["key"] for choice in choices]
    if len(set(keys)) != len(keys):
        raise DetailError(_("Two reasons have the same key; make their labels differ."))
    return choices


def reasons_text(choices) -> str:
    """The checklist as the campaign form shows it: one label a line."""
    return "\n".join(choice["label"] for choice in choices or [])


def clean_details(campaign, preference: int | None, unacceptable: bool, reasons, confidence):
    """(screen preference, reason keys in the campaign's order, confidence) as stored, or
    DetailError. `preference`: −2..2 as shown, None only with `unacceptable`."""
    if unacceptable:
        if preference not in (None, 0):
            raise DetailError(
                _("“Both unacceptable” is given instead of a preference: choose one or the other.")
            )
        preference = 0
    elif preference not in (-2, -1, 0, 1, 2):
        raise DetailError(_("Choose a preference from A much better to B much better."))
    keys = [choice["key"] for choice in campaign.reason_choices or []]
    given = set(reasons or [])
    unknown = sorted(given - set(keys))
    if unknown:
        raise DetailError(_("Unknown reason %(key)s.") % {"key": repr(unknown[0])[:60]})
    if given and (unacceptable or preference == 0):
        raise DetailError(
            _(
                "Reasons say why the preferred response is better: give them only with a preference for one response."
            )
        )
    if confidence is not None:
        if not campaign.ask_confidence:
            raise DetailError(_("This campaign does not ask for confidence."))
        if isinstance(confidence, bool) or confidence not in (1, 2, 3):
            raise DetailError(_("Confidence must be 1, 2 or 3."))
    return preference, [key for key in keys if key in given], confidence
