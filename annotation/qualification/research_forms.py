"""The researchers' qualification forms: the rule, one practice item, an import file."""

from django import forms
from django.utils.translation import gettext_lazy as _

from . import items
from .models import PracticeSet, QualificationRule

KNOWN_CHOICES = [
    (-2, _("Response A much better")),
    (-1, _("Response A better")),
    (0, _("Tie")),
    (1, _("Response B better")),
    (2, _("Response B much better")),
]


class RuleForm(forms.ModelForm):
    requires_qualification = forms.BooleanField(
        label=_("Require qualification"),
        required=False,
        help_text=_(
            "Annotators pass the qualification set before they rate; the drift watch sends "
            "them to the refresher set."
        ),
    )

    class Meta:
        model = QualificationRule
        fields = [
            "min_accuracy",
            "min_direction",
            "attempts",
            "window",
            "min_in_window",
            "min_gold_accuracy",
            "min_consensus",
        ]

    def save_for(self, campaign) -> QualificationRule:
        rule = self.save(commit=False)
        rule.campaign = campaign
        rule.save()
        campaign.requires_qualification = self.cleaned_data["requires_qualification"]
        campaign.save(update_fields=["requires_qualification"])
        return rule


class PracticeItemForm(forms.Form):
    """One item from a comparison of the campaign (its number, as on the gold page)."""

    practice_set = forms.ChoiceField(label=_("Set"), choices=PracticeSet.choices)
    comparison = forms.IntegerField(
        label=_("Comparison"), min_value=1, help_text=_("Its number, as on the gold items page.")
    )
    known_preference = forms.TypedChoiceField(
        label=_("Known answer"), choices=KNOWN_CHOICES, coerce=int, widget=forms.RadioSelect
    )
    explanation = forms.CharField(
        label=_("Explanation"),
        max_length=items.EXPLANATION_MAX,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_(
            "Shown after the annotator answered. Speak of the content, not of sides: each "
            "annotator sees the two responses in a layout drawn for them."
        ),
    )

    def __init__(self, *args, campaign=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign = campaign

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            self.item_fields = items.clean_item(self.campaign, dict(data))
        except items.ItemInvalid as invalid:
            for field, message in invalid.errors.items():
                self.add_error(field if field in self.fields else None, message)
        return data


class ImportForm(forms.Form):
    file = forms.FileField(
        label=_("Practice items (JSON lines)"),
        help_text=_(
            'One object per line: {"practice_set", "comparison" or "response_a" and '
            '"response_b", "known_preference" (-2 … 2), "explanation"}.'
        ),
    )
