"""The form that freezes a new benchmark release."""

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from annotation.access import managed_campaigns
from h2htalk.formfields import ModelMultipleChoiceField
from scenarios.models import CompanionModel
from scoring.models import CalibratedJudge, Release
from scoring.releases import errors, freezing

MIN_BOOT, MAX_BOOT = 100, 10_000


class ReleaseForm(forms.Form):
    name = forms.CharField(max_length=150, label=_("Name"))
    description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, label=_("Description")
    )
    campaign = forms.ModelChoiceField(
        queryset=None,
        help_text=_("Human judgments and the responses' runs come from here."),
        label=_("Campaign"),
    )
    companions = ModelMultipleChoiceField(
        queryset=CompanionModel.objects.all(),
        required=False,
        help_text=_(
            "Companions to rank (at least two of the campaign's); none chosen: all of "
            "the campaign's companions."
        ),
        label=_("Companions"),
    )
    anchor = forms.ModelChoiceField(
        queryset=CompanionModel.objects.all(),
        help_text=_("Win rates are reported against this companion."),
        label=_("Anchor"),
    )
    judge = forms.ModelChoiceField(
        queryset=None,
        required=False,
        empty_label=_("— no judge (humans and reference metrics only) —"),
        help_text=_("A calibrated judge scores every pair of responses on every scenario."),
        label=_("Judge"),
    )
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, initial=0, label=_("Seed"))
    n_boot = forms.IntegerField(
        label=_("Bootstrap draws"), min_value=MIN_BOOT, max_value=MAX_BOOT, initial=1000
    )
    style_control = forms.BooleanField(
        label=_("Style control"),
        required=False,
        initial=False,
        help_text=_(
            "Also rank the companions with the responses' presentation held fixed: length, "
            "Markdown lists and headers, persona actions in parentheses, emoji and question "
            "marks enter the Bradley–Terry fit as covariates (Chatbot Arena's method). Shown "
            "beside the plain human ranking, with each covariate's effect."
        ),
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        from scoring.calibration.access import visible_judges

        self.fields["campaign"].queryset = managed_campaigns(user).order_by("name")
        self.fields["judge"].queryset = (
            visible_judges(user).order_by("name", "-version")
            if user is not None
            else CalibratedJudge.objects.none()
        )

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if Release.objects.filter(name=name).exists():
            raise forms.ValidationError(gettext("A release with this name exists."))
        return name

    def clean(self):
        data = super().clean()
        campaign = data.get("campaign")
        if campaign is None or "anchor" not in data:
            return data
        try:
            data["companions"] = freezing.check_choices(
                campaign, list(data.get("companions") or []), data["anchor"], data.get("judge")
            )
        except errors.ReleaseError as error:
            raise forms.ValidationError(str(error)) from error
        return data


class VersionForm(forms.Form):
    """A new version of a computed release: more votes, more companions (versioning)."""

    name = forms.CharField(label=_("Name"), max_length=150)
    description = forms.CharField(
        label=_("Description"), widget=forms.Textarea(attrs={"rows": 2}), required=False
    )
    campaigns = ModelMultipleChoiceField(
        label=_("Other campaigns"),
        queryset=None,
        required=False,
        help_text=_(
            "New votes come from the parent's campaigns and from these (for example a campaign "
            "that compares a new companion with the anchor)."
        ),
    )
    companions = ModelMultipleChoiceField(
        label=_("Added companions"),
        queryset=CompanionModel.objects.all(),
        required=False,
        help_text=_("Companions to add to the parent's; each must be in one of the campaigns."),
    )

    def __init__(self, *args, parent=None, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.parent = parent
        self.fields["campaigns"].queryset = managed_campaigns(user).order_by("name")

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if Release.objects.filter(name=name).exists():
            raise forms.ValidationError(_("A release with this name exists."))
        return name

    def clean(self):
        from scoring.releases.versioning import check_version_choices

        data = super().clean()
        try:
            check_version_choices(
                self.parent, list(data.get("campaigns") or []), list(data.get("companions") or [])
            )
        except errors.ReleaseError as error:
            raise forms.ValidationError(str(error)) from error
        return data
