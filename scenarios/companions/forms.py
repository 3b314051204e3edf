import os

from django import forms
from django.http import QueryDict
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from h2htalk import endpoint_checks
from h2htalk.formfields import ModelMultipleChoiceField
from scenarios.filters import ScenarioFilter, describe_errors
from scenarios.models import CompanionModel, GenerationRun, Scenario

# What a researcher sets on a companion (the edit page and the API).
COMPANION_FIELDS = [
    "name",
    "provider",
    "base_url",
    "model_id",
    "api_key_env",
    "params",
    "max_concurrency",
    "timeout_seconds",
    "notes",
]


class CompanionForm(forms.ModelForm):
    base_url = forms.URLField(
        required=False,
        assume_scheme="http",
        help_text=_("Chat-completions base URL, e.g. http://127.0.0.1:8001/v1"),
        label=_("Base url"),
    )
    params = forms.JSONField(
        required=False,
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
        help_text=_('Sent with every request, e.g. {"temperature": 0.7, "max_tokens": 400}.'),
        label=_("Params"),
    )

    class Meta:
        model = CompanionModel
        fields = COMPANION_FIELDS
        widgets = {"notes": forms.Textarea(attrs={"rows": 2})}
        labels = {
            "name": _("Name"),
            "provider": _("Provider"),
            "model_id": _("Model id"),
            "api_key_env": _("API key variable"),
            "max_concurrency": _("Max concurrency"),
            "timeout_seconds": _("Timeout seconds"),
            "notes": _("Notes"),
        }

    def clean_params(self):
        return endpoint_checks.clean_params(self.cleaned_data.get("params"))

    def clean_api_key_env(self):
        return endpoint_checks.clean_key_env(self.cleaned_data["api_key_env"])

    def clean(self):
        cleaned = super().clean()
        provider = cleaned.get("provider")
        if provider != CompanionModel.Provider.IMPORTED and not (
            cleaned.get("base_url") and cleaned.get("model_id")
        ):
            raise forms.ValidationError(
                gettext("A companion that generates needs a base URL and a model id.")
            )
        return cleaned


def key_status(companion: CompanionModel) -> str:
    """Whether the key's variable is set on the server; the key itself is never shown."""
    if not companion.api_key_env:
        return "no key needed"
    return "set" if os.environ.get(companion.api_key_env) else "NOT SET"


class GenerationRunForm(forms.ModelForm):
    scenario_query = forms.CharField(
        label=_("Scenarios"),
        required=False,
        help_text=_("A filter from the scenario list (its query string); empty = all approved."),
        widget=forms.TextInput(attrs={"class": "mono"}),
    )
    companions = ModelMultipleChoiceField(
        queryset=CompanionModel.objects.exclude(provider=CompanionModel.Provider.IMPORTED),
        widget=forms.CheckboxSelectMultiple,
        label=_("Companions"),
    )

    class Meta:
        model = GenerationRun
        fields = ["name", "scenario_query", "companions", "sap_enabled", "token_budget"]
        labels = {
            "name": _("Name"),
            "sap_enabled": _("SAP block on"),
            "token_budget": _("Token budget"),
        }

    def clean_scenario_query(self):
        query = self.cleaned_data["scenario_query"].strip().lstrip("?")
        filterset = ScenarioFilter(
            QueryDict(query or "state=approved"), queryset=Scenario.objects.all()
        )
        if not filterset.is_valid():
            raise forms.ValidationError(describe_errors(filterset))
        self.selected_scenarios = filterset.qs
        if not self.selected_scenarios.exists():
            raise forms.ValidationError(gettext("No scenario matches this filter."))
        return query or "state=approved"


class ResponseImportForm(forms.Form):
    file = forms.FileField(
        help_text=_(
            "A .zip of the released evaluator layout (one folder per model, "
            "<subtask>.jsonl inside) or a platform .jsonl."
        ),
        label=_("File"),
    )
    run_name = forms.CharField(
        max_length=120,
        required=False,
        help_text=_(
            "The import run the responses go into (new or existing). Empty: named after the file."
        ),
        label=_("Run name"),
    )
