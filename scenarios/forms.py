import json

from django import forms
from django.utils.translation import gettext_lazy
from django.utils.translation import gettext_lazy as _

from h2htalk import display
from h2htalk.formfields import MultipleFileField
from scenarios import validation
from scenarios.models import Persona, Scenario
from scenarios.services import AUTHORED_FIELDS

JSON_HELP = _("JSON. Leave as [] when empty.")


class PrettyJSONField(forms.JSONField):
    """A JSON textarea that shows non-ASCII text (Chinese) as is, indented."""

    widget = forms.Textarea(attrs={"rows": 6, "class": "mono"})

    def prepare_value(self, value):
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, indent=1)


class ScenarioForm(forms.ModelForm):
    history = PrettyJSONField(
        required=False, help_text=_('[{"role": "user", "content": "…"}]'), label=_("History")
    )
    memory = PrettyJSONField(
        required=False,
        help_text=_('[{"content": "…", "category": "…", "importance": 0}]'),
        label=_("Memory"),
    )
    schedule = PrettyJSONField(
        required=False, help_text=_('[{"time": "09:00", "activity": "…"}]'), label=_("Schedule")
    )
    tags_text = forms.CharField(
        label=_("Tags"), required=False, help_text=_("Separated by commas or semicolons.")
    )

    class Meta:
        model = Scenario
        fields = list(AUTHORED_FIELDS)
        widgets = {
            "user_message": forms.Textarea(attrs={"rows": 3}),
            "reference_response": forms.Textarea(attrs={"rows": 4}),
        }
        labels = {
            "external_id": _("External id"),
            "subtask": _("Subtask"),
            "persona": _("Persona"),
            "language": _("Language"),
            "user_message": _("User message"),
            "reference_response": _("Reference response"),
            "implicit_need": _("Implicit need"),
            "evolving_need": _("Evolving need"),
            "risk_level": _("Risk level"),
            "source": _("Source"),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _name_choices(self.fields)
        if self.instance.pk:
            self.fields["tags_text"].initial = ", ".join(t.name for t in self.instance.tags.all())

    def _run(self, cleaner, name):
        try:
            return cleaner(self.cleaned_data.get(name))
        except validation.FieldError as error:
            raise forms.ValidationError(f"{error.field}: {error.message}") from error

    def clean_history(self):
        return self._run(validation.clean_history, "history")

    def clean_memory(self):
        return self._run(validation.clean_memory, "memory")

    def clean_schedule(self):
        return self._run(validation.clean_schedule, "schedule")

    def clean_user_message(self):
        return self._run(lambda v: validation.clean_text(v, "user_message"), "user_message")

    def clean_reference_response(self):
        return self._run(
            lambda v: validation.clean_text(v, "reference_response"), "reference_response"
        )

    def clean_tags_text(self):
        return self._run(validation.clean_tags, "tags_text")

    def clean(self):
        cleaned = super().clean()
        external_id, subtask = cleaned.get("external_id"), cleaned.get("subtask")
        if external_id and subtask:
            clash = Scenario.objects.filter(external_id=external_id, subtask=subtask)
            if self.instance.pk:
                clash = clash.exclude(pk=self.instance.pk)
            if clash.exists():
                self.add_error("external_id", f"{subtask}/{external_id} already exists.")
        return cleaned


def _name_choices(fields) -> None:
    """The taxonomy's choices in the page's language (the model's labels stay English)."""
    for name, labels in (
        ("subtask", display.SUBTASK_LABELS),
        ("risk_level", display.RISK_LABELS),
        ("language", display.LANGUAGE_LABELS),
    ):
        if name in fields:
            fields[name].choices = [
                (code, labels.get(code, label)) for code, label in fields[name].choices
            ]


class PersonaForm(forms.ModelForm):
    class Meta:
        model = Persona
        fields = ["name", "summary", "character", "language", "sap_enabled", "sap_block"]
        widgets = {
            "character": forms.Textarea(attrs={"rows": 5}),
            "sap_block": forms.Textarea(attrs={"rows": 10}),
        }
        labels = {
            "name": _("Name"),
            "summary": _("Summary"),
            "character": _("Character"),
            "language": _("Language"),
            "sap_enabled": _("SAP block on"),
            "sap_block": _("SAP block"),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _name_choices(self.fields)


class ReviewForm(forms.Form):
    action = forms.CharField(label=_("Action"))
    comment = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), label=_("Comment")
    )


class ImportForm(forms.Form):
    FORMAT_CHOICES = [
        ("auto", _("Detect from the file")),
        ("jsonl", _("Platform JSONL")),
        ("csv", _("Platform CSV")),
        ("release", _('H2HTalk release file ({"response": …} per line)')),
        ("sharegpt", _("ShareGPT messages (from/value)")),
    ]
    file = MultipleFileField(
        label=gettext_lazy("Files"),
        help_text=gettext_lazy(
            "One or more .jsonl or .csv files, or one .zip holding them: one preview for all, "
            "and all of them are imported or none."
        ),
    )
    format = forms.ChoiceField(choices=FORMAT_CHOICES, initial="auto", label=_("Format"))
    default_subtask = forms.ChoiceField(
        required=False,
        choices=[("", _("— from the file —")), *display.SUBTASK_LABELS.items()],
        help_text=_("For rows (or release files) that do not name their subtask."),
        label=_("Default subtask"),
    )
    initial_state = forms.ChoiceField(
        choices=Scenario.State.choices,
        initial=Scenario.State.DRAFT,
        help_text=_("State of new scenarios whose row does not name one."),
        label=_("Initial state"),
    )
