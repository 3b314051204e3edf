import json

from django import forms
from django.utils.translation import gettext_lazy

from h2htalk.formfields import MultipleFileField
from scenarios import validation
from scenarios.models import Persona, Scenario
from scenarios.services import AUTHORED_FIELDS

JSON_HELP = "JSON. Leave as [] when empty."


class PrettyJSONField(forms.JSONField):
    """A JSON textarea that shows non-ASCII text (Chinese) as is, indented."""

    widget = forms.Textarea(attrs={"rows": 6, "class": "mono"})

    def prepare_value(self, value):
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, indent=1)


class ScenarioForm(forms.ModelForm):
    history = PrettyJSONField(required=False, help_text='[{"role": "user", "content": "…"}]')
    memory = PrettyJSONField(
        required=False, help_text='[{"content": "…", "category": "…", "importance": 0}]'
    )
    schedule = PrettyJSONField(required=False, help_text='[{"time": "09:00", "activity": "…"}]')
    tags_text = forms.CharField(
        label="Tags", required=False, help_text="Separated by commas or semicolons."
    )

    class Meta:
        model = Scenario
        fields = list(AUTHORED_FIELDS)
        widgets = {
            "user_message": forms.Textarea(attrs={"rows": 3}),
            "reference_response": forms.Textarea(attrs={"rows": 4}),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
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


class PersonaForm(forms.ModelForm):
    class Meta:
        model = Persona
        fields = ["name", "summary", "character", "language", "sap_enabled", "sap_block"]
        widgets = {
            "character": forms.Textarea(attrs={"rows": 5}),
            "sap_block": forms.Textarea(attrs={"rows": 10}),
        }


class ReviewForm(forms.Form):
    action = forms.CharField()
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class ImportForm(forms.Form):
    FORMAT_CHOICES = [
        ("auto", "Detect from the file"),
        ("jsonl", "Platform JSONL"),
        ("csv", "Platform CSV"),
        ("release", 'H2HTalk release file ({"response": …} per line)'),
        ("sharegpt", "ShareGPT messages (from/value)"),
    ]
    file = MultipleFileField(
        label=gettext_lazy("Files"),
        help_text=gettext_lazy(
            "One or more .jsonl or .csv files, or one .zip holding them: one preview for all, "
            "and all of them are imported or none."
        ),
    )
    format = forms.ChoiceField(choices=FORMAT_CHOICES, initial="auto")
    default_subtask = forms.ChoiceField(
        required=False,
        choices=[("", "— from the file —"), *Scenario._meta.get_field("subtask").choices],
        help_text="For rows (or release files) that do not name their subtask.",
    )
    initial_state = forms.ChoiceField(
        choices=Scenario.State.choices,
        initial=Scenario.State.DRAFT,
        help_text="State of new scenarios whose row does not name one.",
    )
