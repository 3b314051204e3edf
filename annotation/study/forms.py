"""The researcher's form for a campaign's study link."""

from django import forms
from django.utils.translation import gettext_lazy as _

from .links import PARAM_NAME, PRESETS
from .models import StudyLink

PARAM_FIELDS = ("participant_param", "study_param", "session_param")


def _url_field(label):
    return forms.URLField(label=label, required=False, max_length=500, assume_scheme="https")


class StudyLinkForm(forms.ModelForm):
    completion_url = _url_field(_("completion URL"))
    screenout_url = _url_field(_("screen-out URL"))

    class Meta:
        model = StudyLink
        fields = [
            "platform",
            *PARAM_FIELDS,
            "completion_code",
            "completion_url",
            "screenout_code",
            "screenout_url",
            "quota",
            "time_limit_minutes",
            "consent",
            "consent_zh_hans",
            "instructions",
            "instructions_zh_hans",
        ]
        widgets = {
            name: forms.Textarea(attrs={"rows": 4})
            for name in ("consent", "consent_zh_hans", "instructions", "instructions_zh_hans")
        }

    def clean_quota(self):
        quota = self.cleaned_data["quota"]
        if quota < 1:
            raise forms.ValidationError(_("A participant makes at least one judgment."))
        return quota

    def clean(self):
        data = super().clean()
        platform = data.get("platform")
        names = tuple(data.get(field, "") for field in PARAM_FIELDS)
        if platform in PRESETS and names in PRESETS.values():  # a preset left as it was
            names = PRESETS[platform]
            data.update(zip(PARAM_FIELDS, names, strict=True))
        for field, name in zip(PARAM_FIELDS, names, strict=True):
            if name and not PARAM_NAME.match(name):
                self.add_error(
                    field, _("Letters, digits, dot, dash and underscore only (at most 40).")
                )
        used = [name for name in names if name]
        if len(set(used)) != len(used):
            self.add_error("session_param", _("Each parameter needs its own name."))
        if not names[0]:
            self.add_error("participant_param", _("The participant id parameter is required."))
        return data
