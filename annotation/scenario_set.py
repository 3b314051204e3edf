"""The scenario set of a campaign: chosen with a picker on the campaign builder, stored as a
scenario-list query string (`Campaign.scenario_query`, as before: the API and older campaigns
keep theirs), and counted before saving (scenarios, companions with responses, comparisons).

The count uses the build's own pairing (annotation.pairing), so the number shown is the number
of comparisons the build makes.
"""

import itertools
from dataclasses import dataclass, field

from django import forms
from django.db.models import Count
from django.http import QueryDict
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from scenarios.filters import FLAG_CHOICES, ScenarioFilter
from scenarios.models import CompanionModel, GenerationRun, Persona, Scenario, Tag
from scenarios.taxonomy import LANGUAGES, Subtask

from .models import Campaign
from .pairing import burn_in_scenarios, choose_pairs, responses_of

DEFAULT_QUERY = "state=approved"
PREFIX = "set"
CHECKBOXES = forms.CheckboxSelectMultiple
# The list filters the picker offers, in the order a query string is written.
PICKED = ("subtask", "state", "language", "flags", "tags", "persona")


class ScenarioSetForm(forms.Form):
    """The picker: list filters as checkboxes (none ticked in a group: no condition)."""

    picker = forms.CharField(widget=forms.HiddenInput, required=False, initial="1")
    subtask = forms.MultipleChoiceField(
        label=gettext_lazy("Subtasks"), choices=Subtask.choices, required=False, widget=CHECKBOXES
    )
    state = forms.MultipleChoiceField(
        label=gettext_lazy("Review states"),
        choices=Scenario.State.choices,
        required=False,
        widget=CHECKBOXES,
        help_text=gettext_lazy(
            "Annotators are only given approved scenarios: comparisons of others wait until "
            "they are approved."
        ),
    )
    language = forms.MultipleChoiceField(
        label=gettext_lazy("Languages"), choices=LANGUAGES, required=False, widget=CHECKBOXES
    )
    flags = forms.MultipleChoiceField(
        label=gettext_lazy("Flags (all ticked must hold)"),
        choices=FLAG_CHOICES,
        required=False,
        widget=CHECKBOXES,
    )
    tags = forms.ModelMultipleChoiceField(
        label=gettext_lazy("Tags (any of them)"),
        queryset=Tag.objects.order_by("name"),
        to_field_name="name",
        required=False,
        widget=CHECKBOXES,
    )
    persona = forms.ModelChoiceField(
        label=gettext_lazy("Persona"),
        queryset=Persona.objects.order_by("name"),
        required=False,
        empty_label=gettext_lazy("any persona"),
    )
    extra = forms.CharField(widget=forms.HiddenInput, required=False)

    def query(self) -> str:
        """The chosen set as a scenario-list query string (call after is_valid)."""
        params = QueryDict(mutable=True)
        for name in PICKED:
            value = self.cleaned_data.get(name)
            if name == "tags":
                value = [tag.name for tag in value or ()]
            elif name == "persona":
                value = [str(value.pk)] if value else []
            params.setlist(name, list(value or ()))
        params.update(QueryDict(self.cleaned_data.get("extra") or ""))
        return params.urlencode()


def initial_of(query: str) -> dict:
    """The picker's initial values from a stored query string; filters the picker does not
    offer (search, dimension, risk level …) ride along in `extra`."""
    params = QueryDict(query)
    initial = {name: params.getlist(name) for name in PICKED if name != "persona"}
    initial["persona"] = params.get("persona") or None
    extra = QueryDict(mutable=True)
    for key in params:
        if key not in PICKED and key != "page":
            extra.setlist(key, params.getlist(key))
    initial["extra"] = extra.urlencode()
    return initial


def picker_form(data, query: str) -> ScenarioSetForm:
    """The picker bound to `data` when the page sent it, else showing `query`."""
    if data is not None and f"{PREFIX}-picker" in data:
        return ScenarioSetForm(data, prefix=PREFIX)
    return ScenarioSetForm(prefix=PREFIX, initial=initial_of(query))


def scenarios_of(query: str):
    """The scenarios a query string selects (None: it is not a valid filter)."""
    filterset = ScenarioFilter(QueryDict(query), queryset=Scenario.objects.all())
    return filterset.qs if filterset.is_valid() else None


@dataclass
class SetCount:
    """What a campaign's settings would build, and why nothing when it is 0."""

    scenarios: int = 0
    approved: int = 0
    companions: list[str] = field(default_factory=list)  # chosen ones with responses
    scenarios_with_pairs: int = 0
    comparisons: int = 0
    not_approved_elsewhere: int = 0  # would match, but are not in the chosen states
    reason: str = ""

    @property
    def refused(self) -> bool:
        return self.comparisons == 0


def count_set(
    query: str,
    companion_ids,
    run_ids,
    pairing: str = Campaign.Pairing.ALL_PAIRS,
    pairs_per_scenario: int = 1,
    seed: int = 0,
) -> SetCount:
    """Count what the build of these settings makes (annotation.tasks.run_campaign_build)."""
    result = SetCount()
    scenarios = scenarios_of(query)
    if scenarios is None:
        result.reason = _("The scenario filter is not valid.")
        return result
    by_state = dict(scenarios.order_by().values_list("state").annotate(n=Count("pk")))
    result.scenarios = sum(by_state.values())
    result.approved = by_state.get(Scenario.State.APPROVED, 0)
    result.not_approved_elsewhere = _waiting_for_approval(query, result.scenarios)
    companions = list(CompanionModel.objects.filter(pk__in=list(companion_ids)))
    runs = list(GenerationRun.objects.filter(pk__in=list(run_ids)))
    if not result.scenarios:
        result.reason = _("No scenario matches these filters.")
        return result
    if len(companions) < 2 or not runs:
        result.reason = _("Choose at least two companions and a response run.")
        return result
    responses = responses_of(scenarios, companions, runs)
    answering = {c for answers in responses.values() for c in answers}
    result.companions = sorted(c.name for c in companions if c.pk in answering)
    by_scenario = {s: sorted(c) for s, c in responses.items() if len(c) >= 2}
    result.scenarios_with_pairs = len(by_scenario)
    if pairing == Campaign.Pairing.ADAPTIVE:
        by_scenario = burn_in_scenarios(by_scenario, pairs_per_scenario, seed)
    if pairing == Campaign.Pairing.ALL_PAIRS:
        result.comparisons = sum(
            len(list(itertools.combinations(c, 2))) for c in by_scenario.values()
        )
    else:
        result.comparisons = len(choose_pairs(by_scenario, pairing, pairs_per_scenario, seed))
    if not result.comparisons:
        result.reason = _no_pairs_reason(len(result.companions))
    return result


def _no_pairs_reason(answering: int) -> str:
    if answering == 0:
        return _(
            "These scenarios have no responses from the chosen companions in the chosen runs: "
            "import or generate responses first, or choose other companions or runs."
        )
    return _(
        "These scenarios have no responses from two of the chosen companions on the same "
        "scenario in the chosen runs, so no pair can be compared."
    )


def _waiting_for_approval(query: str, matched: int) -> int:
    """How many more scenarios the set would hold if it did not require approval."""
    params = QueryDict(query, mutable=True)
    if params.getlist("state") != [Scenario.State.APPROVED]:
        return 0
    params.pop("state")
    every_state = scenarios_of(params.urlencode())
    return 0 if every_state is None else every_state.count() - matched


def refusal(count: SetCount) -> str:
    """The error of a set that builds no comparison."""
    return _("This set gives 0 comparisons: %(reason)s") % {"reason": count.reason}
