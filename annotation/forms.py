"""The annotator's rating and skip forms (screen terms: left = "Response A", right = "Response B").

Both are rendered inside one HTML form on the rating page; their field names do not overlap,
so the submit and skip views each read their own part of the same POST.
"""

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from .care import LEVEL_DESCRIPTIONS, LEVEL_LABELS, RISK_LEVELS
from .models import PREFERENCE_CHOICES, RATING_DIMENSIONS
from .queue import SKIP_REASONS, Submission
from .rating_details import CONFIDENCE_CHOICES, DetailError, clean_details

SIDES = (("left", "A"), ("right", "B"))
# The labels the page shows, in its language (models' English labels stay for the data and API).
ASPECT_LABELS = {
    "empathy": pgettext_lazy("rating aspect", "Empathy"),
    "fluency": pgettext_lazy("rating aspect", "Fluency"),
    "memory_use": pgettext_lazy("rating aspect", "Memory use"),
    "planning": pgettext_lazy("rating aspect", "Planning"),
    "persona_consistency": pgettext_lazy("rating aspect", "Persona consistency"),
    "safety": pgettext_lazy("rating aspect", "Safety (SAP)"),
}
PREFERENCE_LABELS = {
    -2: pgettext_lazy("preference", "A much better"),
    -1: pgettext_lazy("preference", "A better"),
    0: pgettext_lazy("preference", "Tie"),
    1: pgettext_lazy("preference", "B better"),
    2: pgettext_lazy("preference", "B much better"),
}
assert set(ASPECT_LABELS) == {name for name, _ in RATING_DIMENSIONS}
assert set(PREFERENCE_LABELS) == {value for value, _ in PREFERENCE_CHOICES}
SCORE_CHOICES = [("", "–"), *((n, str(n)) for n in range(1, 6))]
MAX_CLIENT_MS = 2_147_483_647  # the column is a PositiveIntegerField


def rating_field_name(side: str, dimension: str) -> str:
    return f"{side}_{dimension}"


def _required_radios(field_class, label: str, choices, message: str, **kwargs):
    """A required radio group that says the same thing whether nothing or a wrong value came."""
    return field_class(
        label=label,
        choices=choices,
        widget=forms.RadioSelect,
        error_messages={"required": message, "invalid_choice": message},
        **kwargs,
    )


class RatingForm(forms.Form):
    preference = _required_radios(
        forms.TypedChoiceField,
        gettext_lazy("Which response is better?"),
        [(value, PREFERENCE_LABELS[value]) for value, _ in PREFERENCE_CHOICES],
        gettext_lazy("Choose a preference from A much better to B much better."),
        coerce=int,
        empty_value=None,
        required=False,  # not with "both unacceptable" (its own outcome): checked in clean()
    )
    both_unacceptable = forms.BooleanField(
        label=gettext_lazy("Both unacceptable / unsafe"),
        required=False,
        widget=forms.CheckboxInput(attrs={"aria-keyshortcuts": "U"}),
    )
    rationale = forms.CharField(
        label=gettext_lazy("Rationale (optional)"),
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": 5000, "aria-keyshortcuts": "R"}),
    )
    # Visible time measured in the browser; a broken value is dropped, never an error.
    client_time_ms = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, campaign=None, reasons=(), **kwargs):
        """`campaign`: the one rated (its reasons and whether it asks for confidence);
        `reasons`: its reason choices as shown, [{"key", "label"}] with names hidden."""
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        self._add_detail_fields(campaign, reasons)
        for side, letter in SIDES:
            for dimension, _label in RATING_DIMENSIONS:
                aspect = ASPECT_LABELS[dimension]
                self.fields[rating_field_name(side, dimension)] = forms.TypedChoiceField(
                    label=_("%(aspect)s, Response %(side)s") % {"aspect": aspect, "side": letter},
                    choices=SCORE_CHOICES,
                    coerce=int,
                    empty_value=None,
                    required=False,
                    initial="",
                    widget=forms.RadioSelect,
                    error_messages={"invalid_choice": _("%s must be 1–5.") % aspect},
                )

    def _add_detail_fields(self, campaign, reasons) -> None:
        if reasons:
            self.fields["reasons"] = forms.MultipleChoiceField(
                label=_("Why is your preferred response better?"),
                choices=[(reason["key"], reason["label"]) for reason in reasons],
                required=False,
                widget=forms.CheckboxSelectMultiple,
            )
        if campaign is not None and campaign.ask_confidence:
            self.fields["confidence"] = forms.TypedChoiceField(
                label=_("How sure are you?"),
                choices=CONFIDENCE_CHOICES,
                coerce=int,
                empty_value=None,
                required=False,
                widget=forms.RadioSelect,
            )

    def clean(self):
        """One outcome: a preference, or "both unacceptable" instead; reasons and confidence
        as the campaign takes them (`rating_details.clean_details`, as the queue checks)."""
        data = super().clean()
        if "preference" in self.errors:
            return data
        unacceptable = data.get("both_unacceptable", False)
        if data.get("preference") is None and not unacceptable:
            self.add_error("preference", self.fields["preference"].error_messages["required"])
            return data
        if self.campaign is not None:
            try:
                clean_details(
                    self.campaign,
                    data.get("preference"),
                    unacceptable,
                    data.get("reasons"),
                    data.get("confidence"),
                )
            except DetailError as error:
                self.add_error(None, str(error))
        return data

    def clean_client_time_ms(self):
        raw = (self.cleaned_data.get("client_time_ms") or "").strip()
        try:
            value = int(float(raw))
        except ValueError:
            return None
        return min(value, MAX_CLIENT_MS) if value >= 0 else None

    def rating_rows(self):
        """[(label, (left bound field, right bound field))] for the ratings table."""
        return [
            (
                ASPECT_LABELS[name],
                (self[rating_field_name("left", name)], self[rating_field_name("right", name)]),
            )
            for name, _label in RATING_DIMENSIONS
        ]

    def preference_choices(self):
        """The preference radios with their keyboard key (1–5)."""
        return [(str(n), radio) for n, radio in enumerate(self["preference"], start=1)]

    def reason_choices(self):
        """The reason checkboxes with their key (1–9) within the reasons group."""
        if "reasons" not in self.fields:
            return []
        return [(str(n), box) for n, box in enumerate(self["reasons"], start=1)]

    def confidence_choices(self):
        if "confidence" not in self.fields:
            return []
        return [(str(n), radio) for n, radio in enumerate(self["confidence"], start=1)]

    def submission(self) -> Submission:
        data = self.cleaned_data
        ratings = {
            side: {
                name: data[rating_field_name(side, name)]
                for name, _ in RATING_DIMENSIONS
                if data.get(rating_field_name(side, name)) is not None
            }
            for side, _ in SIDES
        }
        return Submission(
            screen_preference=data["preference"],
            both_unacceptable=data["both_unacceptable"],
            ratings={side: values for side, values in ratings.items() if values},
            rationale=data["rationale"],
            client_time_ms=data["client_time_ms"],
            reasons=data.get("reasons") or [],
            confidence=data.get("confidence"),
        )


class SkipForm(forms.Form):
    # Rendered inside the rating form: a `required` reason would block submitting a rating.
    use_required_attribute = False

    skip_reason = _required_radios(
        forms.ChoiceField,
        gettext_lazy("Why do you skip this item?"),
        SKIP_REASONS,
        gettext_lazy("Choose why you skip this item."),
    )
    skip_note = forms.CharField(
        label=gettext_lazy("Note (optional)"),
        required=False,
        max_length=300,
        widget=forms.TextInput(attrs={"maxlength": 300, "autocomplete": "off"}),
    )

    def reason_choices(self):
        return [(str(n), radio) for n, radio in enumerate(self["skip_reason"], start=1)]


class CareForm(forms.Form):
    """The risk categories a rater opts out of (annotation.care), in every campaign."""

    opted_out = forms.MultipleChoiceField(
        label=gettext_lazy("Do not show me conversations of these kinds"),
        choices=[(level, LEVEL_LABELS[level]) for level in RISK_LEVELS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )

    def level_choices(self):
        """The checkboxes with what each category holds."""
        return [(box, LEVEL_DESCRIPTIONS[box.data["value"]]) for box in self["opted_out"]]
