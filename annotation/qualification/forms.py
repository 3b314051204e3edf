"""The annotator's practice form: the rating page's preference, 1–5 by keyboard."""

from django import forms
from django.utils.translation import gettext_lazy

from ..forms import PREFERENCE_LABELS, _required_radios
from ..models import PREFERENCE_CHOICES


class PracticeForm(forms.Form):
    preference = _required_radios(
        forms.TypedChoiceField,
        gettext_lazy("Which response is better?"),
        [(value, PREFERENCE_LABELS[value]) for value, _ in PREFERENCE_CHOICES],
        gettext_lazy("Choose a preference from A much better to B much better."),
        coerce=int,
    )

    def preference_choices(self):
        """The preference radios with their keyboard key (1–5), as on the rating page."""
        return [(str(n), radio) for n, radio in enumerate(self["preference"], start=1)]
