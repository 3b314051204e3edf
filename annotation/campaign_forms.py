"""Forms of the researchers' campaign pages."""

from django import forms
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import QueryDict
from django.utils.functional import lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from h2htalk.formfields import ModelMultipleChoiceField
from h2htalk.roles import ANNOTATOR, RESEARCHER
from scenarios.filters import ScenarioFilter, describe_errors
from scenarios.models import CompanionModel, GenerationRun, Scenario

from . import scenario_set
from .models import Campaign, Judgment
from .rating_details import MAX_REASONS, DetailError, parse_reasons, reasons_text

DEFAULT_SCENARIO_QUERY = "state=approved"
# The settings that decide which comparisons exist. Once a judgment exists they are frozen:
# the judgments already given belong to that design.
PAIRING_FIELDS = ["scenario_query", "companions", "runs", "pairing", "pairs_per_scenario", "seed"]
PAIRING_RULE = _(
    "Once the campaign has judgments, its comparison settings (scenarios, companions, runs, "
    "pairing, pairs per scenario, seed) cannot change: the judgments already given belong to "
    "those comparisons. Start a new campaign for a different design; the other settings "
    "(name, texts, k, gold share, lease, people) can change at any time."
)


def reasons_help() -> str:
    """The reasons field's help, in the page's language (built when shown: it has a number)."""
    return gettext(
        "The checklist annotators tick to say why the response they prefer is better, one "
        "per line (at most %(n)d), e.g. “more empathetic”, “safer”, “remembers better”, "
        "“better plan”. Empty: no reasons asked. Keep a label once judgments use it: its "
        "key is made from it."
    ) % {"n": MAX_REASONS}


def normalise_query(raw: str) -> str:
    """A scenario-list query string from what was pasted (a query string or a whole URL)."""
    query = raw.strip()
    if "?" in query:
        query = query.split("?", 1)[1]
    params = QueryDict(query, mutable=True)
    params.pop("page", None)
    return params.urlencode() or DEFAULT_SCENARIO_QUERY


def query_key(query: str) -> tuple:
    """A query string's filters, whatever their order (to see whether a set changed)."""
    return tuple(sorted((key, tuple(sorted(values))) for key, values in QueryDict(query).lists()))


def annotator_choices() -> QuerySet:
    """Who may be in a campaign's annotator pool: users with the annotator role."""
    users = get_user_model().objects.order_by("username")
    return users.filter(groups__name=ANNOTATOR).distinct()


def member_choices(owner) -> QuerySet:
    """Who may be a member of `owner`'s campaign: the other researchers."""
    users = get_user_model().objects.order_by("username")
    researchers = users.filter(groups__name=RESEARCHER).distinct()
    return researchers.exclude(pk=getattr(owner, "pk", None))


def initial_data() -> dict:
    """What the new-campaign page's form starts with, as form data (the API's defaults)."""
    form = CampaignForm()
    data = {name: form.get_initial_for_field(field, name) for name, field in form.fields.items()}
    return {name: value for name, value in data.items() if value is not None}


def stored_data(campaign: Campaign) -> dict:
    """The campaign's stored settings as CampaignForm data (what its edit page starts from)."""
    data = {name: getattr(campaign, name) for name in CampaignForm.Meta.fields}
    for name in ("companions", "runs", "members", "annotators"):
        data[name] = list(getattr(campaign, name).values_list("pk", flat=True))
    return data


class ReasonsField(forms.CharField):
    """The reason checklist: one label a line on the page (keys made from the labels), or a
    list of labels or {"key", "label"} from the API; stored as [{"key", "label"}]."""

    widget = forms.Textarea(attrs={"rows": 4})

    def prepare_value(self, value):
        return reasons_text(value) if isinstance(value, list) else value

    def to_python(self, value):
        if isinstance(value, str):
            value = super().to_python(value)
        try:
            return parse_reasons(value or [])
        except DetailError as error:
            raise forms.ValidationError(str(error)) from error


class CampaignForm(forms.ModelForm):
    # On the page the picker (scenario_set.ScenarioSetForm) writes this; the API may send a
    # query string (or the list's URL) here.
    scenario_query = forms.CharField(
        label=_("Scenarios"), required=False, max_length=1000, widget=forms.HiddenInput
    )
    companions = ModelMultipleChoiceField(
        queryset=CompanionModel.objects.order_by("name"),
        widget=forms.CheckboxSelectMultiple,
        help_text=_("At least two: every comparison is two of them on one scenario."),
        label=_("Companions"),
    )
    runs = ModelMultipleChoiceField(
        label=_("Response runs"),
        queryset=GenerationRun.objects.order_by("-created_at"),
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Where the responses come from; with several, the newest run's answer wins."),
    )
    pairing = forms.ChoiceField(
        choices=Campaign.Pairing.choices,
        widget=forms.RadioSelect,
        initial=Campaign.Pairing.ALL_PAIRS,
        help_text=_(
            "Adaptive: built like random pairs; after a burn-in, new comparisons go to the "
            "companion pairs whose order is least certain."
        ),
        label=_("Pairing"),
    )
    pairs_per_scenario = forms.IntegerField(
        min_value=1,
        max_value=50,
        initial=1,
        help_text=_("For random and adaptive pairing."),
        label=_("Pairs per scenario"),
    )
    overlap = forms.IntegerField(
        label=_("Annotators per comparison (k)"),
        min_value=1,
        max_value=10,
        initial=3,
        help_text=_("Judgments each comparison gets (1–10)."),
    )
    gold_share = forms.FloatField(
        min_value=0.0,
        max_value=0.5,
        initial=0.0,
        help_text=_(
            "Share of items an annotator sees that are gold (0–0.5). Mark gold items on "
            "the campaign's gold page."
        ),
        label=_("Gold share"),
    )
    lease_minutes = forms.IntegerField(
        min_value=1,
        max_value=24 * 60,
        initial=15,
        help_text=_("An unanswered item returns to the queue after this long."),
        label=_("Lease minutes"),
    )
    seed = forms.IntegerField(
        min_value=0,
        max_value=2**31 - 1,
        initial=0,
        help_text=_("Seed for pairing."),
        label=_("Seed"),
    )
    reason_choices = ReasonsField(
        label=_("Reasons"),
        required=False,
        help_text=lazy(reasons_help, str)(),
    )
    ask_confidence = forms.BooleanField(
        label=_("Ask for confidence"),
        required=False,
        help_text=_("Annotators may say how sure they are: 1 unsure, 2 fairly sure, 3 sure."),
    )
    high_risk_daily_cap = forms.IntegerField(
        label=_("High-risk items per rater per day"),
        min_value=0,
        max_value=1000,
        required=False,
        help_text=_("Empty: no cap. 0: raters are never handed high-risk items."),
    )
    break_after_minutes = forms.IntegerField(
        label=_("Break prompt after (minutes)"),
        min_value=1,
        max_value=24 * 60,
        required=False,
        help_text=_(
            "Empty: no prompt. After this many minutes of continuous rating the rating page "
            "suggests a short break; the rater may go on."
        ),
    )
    members = ModelMultipleChoiceField(
        queryset=None,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Other researchers who may see and manage this campaign."),
        label=_("Members"),
    )
    annotators = ModelMultipleChoiceField(
        label=_("Annotator pool"),
        queryset=None,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Users with the annotator role who rate in this campaign."),
    )

    class Meta:
        model = Campaign
        fields = [
            "name",
            "description",
            "guidelines",
            "guidelines_zh_hans",
            "scenario_query",
            "companions",
            "runs",
            "pairing",
            "pairs_per_scenario",
            "overlap",
            "gold_share",
            "lease_minutes",
            "seed",
            "reason_choices",
            "ask_confidence",
            "high_risk_daily_cap",
            "break_after_minutes",
            "support_text",
            "support_text_zh_hans",
            "members",
            "annotators",
        ]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "guidelines": forms.Textarea(attrs={"rows": 10, "class": "mono"}),
            "guidelines_zh_hans": forms.Textarea(
                attrs={"rows": 10, "class": "mono", "lang": "zh-hans"}
            ),
            "support_text": forms.Textarea(attrs={"rows": 4, "class": "mono"}),
            "support_text_zh_hans": forms.Textarea(
                attrs={"rows": 4, "class": "mono", "lang": "zh-hans"}
            ),
        }
        labels = {
            "name": _("Name"),
            "description": _("Description"),
            "guidelines": _("Guidelines"),
            "guidelines_zh_hans": _("Guidelines in Simplified Chinese"),
        }

    def __init__(self, *args, owner=None, **kwargs):
        super().__init__(*args, **kwargs)
        owner = self.instance.owner if self.instance.pk else owner
        self.fields["members"].queryset = member_choices(owner)
        self.fields["annotators"].queryset = annotator_choices()
        if not self.instance.pk:
            self.initial.setdefault("scenario_query", DEFAULT_SCENARIO_QUERY)
        shown = normalise_query(str(self.initial.get("scenario_query") or ""))
        if self.instance.pk:
            shown = normalise_query(self.instance.scenario_query)
        self.scenario_set = scenario_set.picker_form(self.data if self.is_bound else None, shown)
        self.set_count = None
        if self.instance.pairing != Campaign.Pairing.FIXED:  # only routing makes fixed ones
            self.fields["pairing"].choices = [
                choice
                for choice in self.fields["pairing"].choices
                if choice[0] != Campaign.Pairing.FIXED
            ]
        self.judgment_count = (
            Judgment.objects.filter(comparison__campaign=self.instance).count()
            if self.instance.pk
            else 0
        )
        self.pairing_locked = self.judgment_count > 0
        self._stored = self._pairing_values(self.instance) if self.instance.pk else None

    @staticmethod
    def _pairing_values(campaign) -> dict:
        return {
            "scenario_query": query_key(normalise_query(campaign.scenario_query)),
            "companions": set(campaign.companions.values_list("pk", flat=True)),
            "runs": set(campaign.runs.values_list("pk", flat=True)),
            "pairing": campaign.pairing,
            "pairs_per_scenario": campaign.pairs_per_scenario,
            "seed": campaign.seed,
        }

    def clean_scenario_query(self):
        picker = self.scenario_set
        if picker.is_bound:
            if not picker.is_valid():
                raise forms.ValidationError(_("Check the scenario filters below."))
            if not picker.cleaned_data["state"]:
                raise forms.ValidationError(_("Tick at least one review state."))
            query = picker.query()
        else:
            query = normalise_query(self.cleaned_data.get("scenario_query") or "")
        filterset = ScenarioFilter(QueryDict(query), queryset=Scenario.objects.all())
        if not filterset.is_valid():
            raise forms.ValidationError(describe_errors(filterset))
        if not filterset.qs.exists():
            raise forms.ValidationError(_("No scenario matches this filter."))
        return query

    def clean_companions(self):
        companions = self.cleaned_data["companions"]
        if len(companions) < 2:
            raise forms.ValidationError(gettext("Choose at least two companions to compare."))
        return companions

    def clean(self):
        cleaned = super().clean()
        changed = self.changed_pairing_fields()
        if self.pairing_locked and changed:
            for field in changed:
                self.add_error(
                    field,
                    f"Cannot change: the campaign already has {self.judgment_count} judgment(s).",
                )
            raise forms.ValidationError(PAIRING_RULE)
        self._refuse_empty_set(cleaned)
        return cleaned

    def _refuse_empty_set(self, cleaned: dict) -> None:
        """A build that would make no comparison is refused, with the reason, on the set."""
        needed = ("scenario_query", "companions", "runs", "pairing", "pairs_per_scenario", "seed")
        if any(name not in cleaned for name in needed) or not self.needs_build:
            return
        if cleaned["pairing"] == Campaign.Pairing.FIXED:
            return
        self.set_count = scenario_set.count_set(
            cleaned["scenario_query"],
            [c.pk for c in cleaned["companions"]],
            [r.pk for r in cleaned["runs"]],
            cleaned["pairing"],
            cleaned["pairs_per_scenario"],
            cleaned["seed"],
        )
        if self.set_count.refused:
            self.add_error("scenario_query", scenario_set.refusal(self.set_count))

    def changed_pairing_fields(self) -> list[str]:
        """Pairing settings whose submitted value differs from the stored one (edits only)."""
        if self._stored is None or not hasattr(self, "cleaned_data"):
            return []
        changed = []
        for field in PAIRING_FIELDS:
            if field not in self.cleaned_data:
                continue  # invalid: reported by its own error
            value = self.cleaned_data[field]
            if field in ("companions", "runs"):
                value = {item.pk for item in value}
            if field == "scenario_query":
                value = query_key(value)
            if value != self._stored[field]:
                changed.append(field)
        return changed

    @property
    def needs_build(self) -> bool:
        """A new campaign, or an edit that changed which comparisons should exist."""
        return self._stored is None or bool(self.changed_pairing_fields())


class GoldForm(forms.Form):
    """Mark one comparison gold with its known answer (keyed by the pair), or unmark it."""

    ANSWERS = [(-1, "A better"), (0, "Tie"), (1, "B better")]

    comparison = forms.IntegerField(min_value=1, label=_("Comparison"))
    action = forms.ChoiceField(
        choices=[("mark", _("Mark gold")), ("unmark", _("Unmark"))], label=_("Action")
    )
    gold_preference = forms.TypedChoiceField(
        choices=ANSWERS, coerce=int, required=False, empty_value=None, label=_("Gold preference")
    )
    gold_note = forms.CharField(required=False, max_length=2000, label=_("Gold note"))

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("action") == "mark" and cleaned.get("gold_preference") is None:
            raise forms.ValidationError(
                gettext("Choose the known answer: A better, tie or B better.")
            )
        return cleaned


class StateForm(forms.Form):
    action = forms.ChoiceField(
        choices=[("open", _("Open")), ("pause", _("Pause")), ("close", _("Close"))],
        label=_("Action"),
    )
