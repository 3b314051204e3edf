"""The planner's form: the inputs of h2htalk.stats.planner.Setting, and an earlier campaign to
take the agreement, the tie rate and the time per item from."""

from django import forms
from django.utils.translation import gettext_lazy as _

from annotation.access import managed_campaigns
from annotation.models import Campaign

EFFECTS = (
    ("adjacent", _("separate adjacent companions δ Elo apart")),
    ("flag_gap", _("mark a companion that struggles on a scenario flag (a flag gap)")),
)


class PlanForm(forms.Form):
    effect = forms.ChoiceField(
        label=_("Plan for"),
        choices=EFFECTS,
        required=False,
        help_text=_(
            "A flag gap: a companion's Elo on scenarios without the flag (e.g. an explicit "
            "need) minus with it, beyond the field's, as the release's *Where companions "
            "struggle* marks it."
        ),
    )
    earlier = forms.ModelChoiceField(
        label=_("Take agreement, ties and time per item from"),
        queryset=None,
        required=False,
        empty_label=_("no earlier campaign (enter them)"),
        help_text=_("Its regular judgments, as its agreement report counts them."),
    )
    n_companions = forms.IntegerField(label=_("Companions"), min_value=2, max_value=40)
    overlap = forms.IntegerField(
        label=_("Annotators per comparison (k)"), min_value=1, max_value=20
    )
    pairs_per_scenario = forms.IntegerField(
        label=_("Pairs per scenario"),
        min_value=1,
        max_value=780,
        required=False,
        help_text=_("Empty: every pair of companions on every scenario."),
    )
    min_elo = forms.FloatField(
        label=_("Smallest Elo difference that matters (δ)"), min_value=1, max_value=800
    )
    alpha = forms.FloatField(
        label=_("Expected agreement: Krippendorff's α (A / tie / B)"),
        min_value=0.001,
        max_value=0.999,
        help_text=_("The agreement report's nominal α on the winner (mirrored comparisons)."),
    )
    tie_rate = forms.FloatField(label=_("Share of ties"), min_value=0, max_value=0.9)
    seconds_per_item = forms.FloatField(
        label=_("Median seconds per item"), min_value=1, max_value=3600
    )
    power = forms.FloatField(label=_("Power"), min_value=0.5, max_value=0.99)
    sigma = forms.FloatField(
        label=_("Response-effect sd σ (logits)"),
        min_value=0,
        max_value=12,
        required=False,
        help_text=_(
            "Filled in from an earlier campaign (what its α and ties mean once its own "
            "companions' differences are accounted for). When set, it replaces α above; "
            "empty: σ is set from α."
        ),
    )
    tau = forms.FloatField(
        label=_("Tie threshold τ (logits)"),
        min_value=0,
        max_value=50,
        required=False,
        help_text=_("With σ, from the earlier campaign; replaces the share of ties."),
    )

    flag_share = forms.FloatField(
        label=_("Share of scenarios carrying the flag"),
        min_value=0.05,
        max_value=0.95,
        required=False,
        help_text=_("Flag gap only (empty: 0.5)."),
    )
    min_gap = forms.FloatField(
        label=_("Smallest flag gap beyond the field that matters (Elo)"),
        min_value=1,
        max_value=800,
        required=False,
        help_text=_("Flag gap only, on the release's scale (empty: 100)."),
    )
    weakened = forms.IntegerField(
        label=_("Companions with that gap"),
        min_value=1,
        max_value=19,
        required=False,
        help_text=_("Flag gap only: fewer than half of the companions (empty: 1)."),
    )

    def clean_effect(self):
        return self.cleaned_data.get("effect") or "adjacent"

    def __init__(self, *args, campaign=None, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        choices = managed_campaigns(user) if user is not None else Campaign.objects.none()
        if campaign is not None:
            choices = choices.exclude(pk=campaign.pk)
        self.fields["earlier"].queryset = choices.order_by("-created_at")
