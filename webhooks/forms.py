from django import forms
from django.utils.translation import gettext_lazy as _

from . import services
from .events import EVENTS
from .models import Endpoint
from .subscriptions import campaign_choices


class EndpointForm(forms.ModelForm):
    url = forms.URLField(
        label=_("URL"),
        max_length=500,
        assume_scheme="https",
        widget=forms.URLInput(attrs={"placeholder": "https://example.org/hooks"}),
    )
    events = forms.MultipleChoiceField(
        label=_("Events"), choices=EVENTS, widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = Endpoint
        fields = ["url", "description", "campaign", "events", "active"]

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["campaign"].queryset = campaign_choices(user)
        self.fields["campaign"].empty_label = _("All campaigns I manage")

    def clean_url(self):
        return services.clean_url(self.cleaned_data["url"])

    def clean_events(self):
        return services.clean_events(self.cleaned_data["events"])

    def clean_campaign(self):
        return services.clean_campaign(self.user, self.cleaned_data.get("campaign"))
