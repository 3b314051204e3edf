"""What researchers define: the rule, and the practice items of the qualification and
refresher sets (one at a time, or imported from JSON lines, all or nothing).

A practice item is a comparison of two responses to one scenario with its known answer and an
explanation. It is given by a comparison of the campaign (`comparison`: its id; the known
answer keyed by its response A and B, as on the gold page) or by two responses of one scenario
(`response_a`, `response_b`: ids; the known answer keyed by them). Stored in the canonical
order of Comparison (response A's companion has the lower id), the answer flipped to match.
Write explanations about the content, not the sides: each annotator sees the two responses in
a layout drawn for them.
"""

import json

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from h2htalk.uploads import LineProblem, text_lines
from scenarios.models import Response

from .models import PracticeItem, PracticeSet

EXPLANATION_MAX = 5000
FIELDS = ("practice_set", "comparison", "response_a", "response_b", "known_preference")
FIELDS += ("explanation",)


class ItemInvalid(Exception):
    """{field: message} for one item."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors.items()))


class ImportRefused(Exception):
    """Problems of an import, each "line N, field: message"; nothing was stored."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def _integer(value, field: str, errors: dict) -> int | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool):
        errors[field] = _("must be a whole number")
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        errors[field] = _("must be a whole number")
        return None
    if isinstance(value, float) and number != value:
        errors[field] = _("must be a whole number")
        return None
    return number


def clean_item(campaign, data: dict) -> dict:
    """The PracticeItem fields for `data` (see the module), or ItemInvalid naming the field."""
    errors: dict[str, str] = {}
    unknown = sorted(set(data) - set(FIELDS))
    for field in unknown:
        errors[field] = _("unknown field")
    practice_set = data.get("practice_set") or PracticeSet.QUALIFICATION
    if practice_set not in PracticeSet.values:
        errors["practice_set"] = _("must be qualification or refresher")
    known = _integer(data.get("known_preference"), "known_preference", errors)
    if known is None and "known_preference" not in errors:
        errors["known_preference"] = _("is required (-2 … 2)")
    elif known is not None and not -2 <= known <= 2:
        errors["known_preference"] = _("must be between -2 and 2")
    explanation = data.get("explanation")
    if not isinstance(explanation, str) or not explanation.strip():
        errors["explanation"] = _("is required: it is shown after the annotator answered")
    elif len(explanation) > EXPLANATION_MAX:
        errors["explanation"] = _("is limited to 5,000 characters")
    pair = _pair(campaign, data, errors)
    if errors:
        raise ItemInvalid(errors)
    a, b = pair
    if a.companion_id > b.companion_id:  # canonical order: the answer turns with the pair
        a, b, known = b, a, -known
    return {
        "campaign": campaign,
        "practice_set": practice_set,
        "scenario_id": a.scenario_id,
        "response_a": a,
        "response_b": b,
        "known_preference": known,
        "explanation": explanation.strip(),
    }


def _pair(campaign, data: dict, errors: dict) -> tuple[Response, Response] | None:
    comparison = _integer(data.get("comparison"), "comparison", errors)
    if comparison is not None:
        found = (
            campaign.comparisons.select_related("response_a", "response_b")
            .filter(pk=comparison)
            .first()
        )
        if found is None:
            errors["comparison"] = _("no such comparison in this campaign")
            return None
        return found.response_a, found.response_b
    if "comparison" in errors:
        return None
    ids = [_integer(data.get(f), f, errors) for f in ("response_a", "response_b")]
    if None in ids:
        if not errors.keys() & {"response_a", "response_b"}:
            errors["comparison"] = _("give a comparison, or response_a and response_b")
        return None
    responses = Response.objects.in_bulk(ids)
    for field, pk in zip(("response_a", "response_b"), ids, strict=True):
        if pk not in responses:
            errors[field] = _("no such response")
    if errors:
        return None
    a, b = responses[ids[0]], responses[ids[1]]
    if a.scenario_id != b.scenario_id:
        errors["response_b"] = _("must answer the same scenario as response_a")
    elif a.companion_id == b.companion_id:
        errors["response_b"] = _("must come from another companion than response_a")
    return None if errors else (a, b)


def add_item(campaign, data: dict) -> PracticeItem:
    """Store one practice item (ItemInvalid when it does not fit or is already there)."""
    fields = clean_item(campaign, data)
    try:
        with transaction.atomic():
            return PracticeItem.objects.create(**fields)
    except IntegrityError as error:
        raise ItemInvalid({"comparison": _("is already a practice item of this set")}) from error


def import_items(campaign, stream) -> int:
    """Store the practice items of a JSON-lines stream (one object per line, the fields of
    `clean_item`), all or none: ImportRefused lists every problem by line and field."""
    problems, rows, seen = [], [], set()
    for number, line in text_lines(stream):
        if isinstance(line, LineProblem):
            problems.append(_("line %(n)s, %(field)s: %(message)s") % _line(number, *line))
            continue
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(_("line %(n)s, (json): %(message)s") % _line(number, "", error.msg))
            continue
        if not isinstance(data, dict):
            message = _("each line must be a JSON object")
            problems.append(_("line %(n)s, (json): %(message)s") % _line(number, "", message))
            continue
        try:
            fields = clean_item(campaign, data)
        except ItemInvalid as invalid:
            for field, message in invalid.errors.items():
                problems.append(
                    _("line %(n)s, %(field)s: %(message)s") % _line(number, field, message)
                )
            continue
        identity = (fields["practice_set"], fields["response_a"].pk, fields["response_b"].pk)
        taken = PracticeItem.objects.filter(
            campaign=campaign,
            practice_set=identity[0],
            response_a_id=identity[1],
            response_b_id=identity[2],
        ).exists()
        if identity in seen or taken:
            message = _("is already a practice item of this set")
            problems.append(
                _("line %(n)s, %(field)s: %(message)s") % _line(number, "comparison", message)
            )
            continue
        seen.add(identity)
        rows.append(fields)
    if problems:
        raise ImportRefused(problems)
    if not rows:
        raise ImportRefused([_("The file holds no practice item.")])
    with transaction.atomic():
        PracticeItem.objects.bulk_create(PracticeItem(**fields) for fields in rows)
    return len(rows)


def _line(number: int, field: str, message: str) -> dict:
    return {"n": number, "field": field, "message": message}


def delete_item(campaign, pk) -> bool:
    """Remove a practice item; answers already given to it go with it (they never counted)."""
    deleted, _rows = PracticeItem.objects.filter(campaign=campaign, pk=pk).delete()
    return bool(deleted)
