"""Forms for judge configurations, judge runs and verdict imports (pages and API share them)."""

import os

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from annotation.access import managed_campaigns
from annotation.models import Campaign
from h2htalk import endpoint_checks
from h2htalk.formfields import ModelMultipleChoiceField
from scenarios.models import CompanionModel, GenerationRun
from scoring.judges import judging, prompts
from scoring.models import JudgeConfig, JudgeRun

# What a verdict depends on: fixed once a configuration has runs (make a copy to change them),
# so every verdict of a configuration (and its bias report) comes from one judge.
LOCKED_FIELDS = ("mode", "model_id", "rubric", "temperature", "samples", "params")
PLATFORM_PARAMS = {"model", "messages", "stream", "temperature", "n"}
MAX_SAMPLES = 20


def key_status(config: JudgeConfig) -> str:
    """Whether the key's variable is set on the server; the key itself is never shown."""
    if not config.api_key_env:
        return "no key needed"
    return "set" if os.environ.get(config.api_key_env) else "NOT SET"


def is_locked(config: JudgeConfig | None) -> bool:
    return bool(config and config.pk and config.runs.exists())


class JudgeConfigForm(forms.ModelForm):
    base_url = forms.URLField(
        required=False,
        assume_scheme="http",
        help_text=_(
            "Chat-completions base URL, e.g. http://127.0.0.1:8001/v1. "
            "Empty for a judge whose verdicts are only imported."
        ),
        label=_("Base url"),
    )
    rubric = forms.CharField(
        required=False,
        widget=forms.Textarea(
            attrs={
                "rows": 16,
                "class": "mono",
                "placeholder": _("Empty: the default rubric (below)."),
            }
        ),
        help_text=_(
            "The judge's instructions (system message). Empty: the project's default "
            "rubric for the mode. The scenario, the response(s) and the JSON answer format are "
            "added by the platform."
        ),
        label=_("Rubric"),
    )
    params = forms.JSONField(
        required=False,
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 2, "class": "mono"}),
        help_text=_(
            'Sent with every request, e.g. {"max_tokens": 600, "response_format": '
            '{"type": "json_object"}}. The temperature has its own field.'
        ),
        label=_("Params"),
    )
    temperature = forms.FloatField(
        min_value=0.0, max_value=2.0, initial=0.0, label=_("Temperature")
    )
    samples = forms.IntegerField(
        min_value=1,
        max_value=MAX_SAMPLES,
        initial=1,
        help_text=_(
            "Verdicts per item (pairwise: per order). More than one needs a temperature above 0."
        ),
        label=_("Samples"),
    )

    class Meta:
        model = JudgeConfig
        fields = [
            "name",
            "mode",
            "base_url",
            "model_id",
            "api_key_env",
            "rubric",
            "temperature",
            "samples",
            "params",
            "max_concurrency",
            "timeout_seconds",
        ]
        help_texts = {
            "api_key_env": _(
                "The NAME of the environment variable holding the key (never the key)."
            ),
            "model_id": _("The `model` sent to the endpoint."),
        }
        labels = {
            "name": _("Name"),
            "mode": _("Mode"),
            "model_id": _("Model id"),
            "api_key_env": _("API key variable"),
            "max_concurrency": _("Max concurrency"),
            "timeout_seconds": _("Timeout seconds"),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.locked = is_locked(self.instance)
        if self.locked:
            for name in LOCKED_FIELDS:
                self.fields[name].disabled = True
                self.fields[name].help_text = _(
                    "Fixed: this judge has runs. Copy the configuration to change it."
                )

    def clean_api_key_env(self):
        return endpoint_checks.clean_key_env(self.cleaned_data.get("api_key_env", ""))

    def clean_params(self):
        return endpoint_checks.clean_params(self.cleaned_data.get("params"), PLATFORM_PARAMS)

    def clean(self):
        cleaned = super().clean()
        mode, rubric = cleaned.get("mode"), (cleaned.get("rubric") or "").strip()
        defaults = {prompts.DEFAULT_SINGLE_RUBRIC.strip(), prompts.DEFAULT_PAIRWISE_RUBRIC.strip()}
        if mode and (not rubric or rubric in defaults):
            cleaned["rubric"] = prompts.default_rubric(mode)  # the other mode's default: swapped
        if bool(cleaned.get("base_url")) != bool(cleaned.get("model_id")):
            raise forms.ValidationError(
                gettext("Give both a base URL and a model id (or neither, for an imported judge).")
            )
        if (cleaned.get("samples") or 1) > 1 and cleaned.get("temperature") == 0:
            self.add_error(
                "temperature", "Several samples at temperature 0 are the same verdict repeated."
            )
        return cleaned


class JudgeRunForm(forms.ModelForm):
    """A judge run: pairwise over a campaign's comparisons (both orders), or single over the
    responses of response runs (optionally only some companions) or of a campaign."""

    judge = forms.ModelChoiceField(
        queryset=JudgeConfig.objects.exclude(base_url="").exclude(model_id=""),
        help_text=_("Judges with an endpoint."),
        label=_("Judge"),
    )
    campaign = forms.ModelChoiceField(
        queryset=None,
        required=False,
        help_text=_(
            "Pairwise: its comparisons, in both orders. Single: the responses it compares."
        ),
        label=_("Campaign"),
    )
    response_runs = ModelMultipleChoiceField(
        queryset=GenerationRun.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Single mode: grade the successful responses of these runs."),
        label=_("Response runs"),
    )
    companions = ModelMultipleChoiceField(
        queryset=CompanionModel.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Single mode: only these companions' responses (none ticked: all)."),
        label=_("Companions"),
    )

    class Meta:
        model = JudgeRun
        fields = ["name", "judge", "campaign", "token_budget"]
        help_texts = {"token_budget": _("Pause once prompt + completion tokens reach this.")}
        labels = {
            "name": _("Name"),
            "token_budget": _("Token budget"),
        }

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["campaign"].queryset = (
            managed_campaigns(user) if user is not None else Campaign.objects.none()
        )
        self.selected_responses = None

    def clean(self):
        cleaned = super().clean()
        config, campaign = cleaned.get("judge"), cleaned.get("campaign")
        runs, companions = cleaned.get("response_runs"), cleaned.get("companions")
        if config is None:
            return cleaned
        if config.mode == JudgeConfig.Mode.PAIRWISE:
            if campaign is None:
                self.add_error(
                    "campaign", "A pairwise judge needs a campaign: its comparisons are judged."
                )
            elif runs or companions:
                raise forms.ValidationError(
                    gettext(
                        "A pairwise judge judges the campaign's comparisons as they are: "
                        "leave response runs and companions empty."
                    )
                )
            elif not campaign.comparisons.exists():
                self.add_error("campaign", "The campaign has no comparisons yet.")
            return cleaned
        if bool(campaign) == bool(runs):
            raise forms.ValidationError(
                gettext(
                    "A single-answer judge grades the responses of some response runs OR of a "
                    "campaign: choose one of the two."
                )
            )
        responses = judging.responses_for(runs or (), companions or (), campaign)
        if not responses.exists():
            raise forms.ValidationError(gettext("No successful response matches this choice."))
        self.selected_responses = responses
        return cleaned


class JudgeImportForm(forms.Form):
    file = forms.FileField(
        help_text=_("A .jsonl file of verdicts (schema below)."), label=_("File")
    )
    judge = forms.CharField(
        max_length=100,
        help_text=_(
            "The judge configuration they belong to (an existing name, or a new one: "
            "created without an endpoint)."
        ),
        label=_("Judge"),
    )
    run_name = forms.CharField(
        max_length=120,
        required=False,
        help_text=_(
            "The imported judge run they go into (new, or an earlier import of the same "
            "judge). Empty: named after the file."
        ),
        label=_("Run name"),
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if not upload.name.lower().endswith(".jsonl"):
            raise forms.ValidationError(gettext("Upload a .jsonl file (one verdict per line)."))
        return upload
