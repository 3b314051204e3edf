"""Scenario filters shared by the list page, the export and the REST API."""

import django_filters
from django import forms
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from h2htalk import display
from scenarios.models import Persona, Scenario, Tag
from scenarios.taxonomy import LANGUAGES, Dimension, RiskLevel, Subtask

# The choices in the page's language (h2htalk.display's labels; the codes are the taxonomy's).
FLAG_CHOICES = [
    ("implicit_need", _("Implicit need")),
    ("evolving_need", _("Evolving need")),
    ("risk", _("Any safety risk")),
]


def _labelled(codes, labels):
    return [(code, labels[code]) for code in codes]


CHECKBOXES = forms.CheckboxSelectMultiple


class ScenarioFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_search", label=_("Search"))
    dimension = django_filters.MultipleChoiceFilter(
        choices=_labelled(Dimension.values, display.DIMENSION_LABELS),
        widget=CHECKBOXES,
        label=_("Dimension"),
    )
    subtask = django_filters.MultipleChoiceFilter(
        choices=_labelled(Subtask.values, display.SUBTASK_LABELS),
        widget=CHECKBOXES,
        label=_("Subtask"),
    )
    state = django_filters.MultipleChoiceFilter(
        choices=Scenario.State.choices, widget=CHECKBOXES, label=_("State")
    )
    language = django_filters.MultipleChoiceFilter(
        choices=_labelled([code for code, _name in LANGUAGES], display.LANGUAGE_LABELS),
        widget=CHECKBOXES,
        label=_("Language"),
    )
    risk_level = django_filters.MultipleChoiceFilter(
        choices=_labelled(RiskLevel.values, display.RISK_LABELS),
        widget=CHECKBOXES,
        label=_("Risk level"),
    )
    # The schema type is declared: drf-spectacular cannot follow "tags__name" + to_field_name.
    tags = extend_schema_field(OpenApiTypes.STR)(
        django_filters.ModelMultipleChoiceFilter(
            field_name="tags__name",
            to_field_name="name",
            queryset=Tag.objects.all(),
            label=_("Tags"),
            method="filter_tags",
            widget=CHECKBOXES,  # ticked, never Ctrl-clicked
        )
    )
    persona = django_filters.ModelChoiceFilter(queryset=Persona.objects.all(), label=_("Persona"))
    flags = django_filters.MultipleChoiceFilter(
        choices=FLAG_CHOICES, method="filter_flags", label=_("Flags"), widget=CHECKBOXES
    )
    external_id = django_filters.CharFilter(lookup_expr="exact", label=_("External id"))

    class Meta:
        model = Scenario
        fields = ["q", "dimension", "subtask", "state", "language", "tags", "flags"]

    def filter_search(self, queryset, name, value):
        """Every whitespace-separated term must occur somewhere in the scenario's text."""
        for term in value.lower().split():
            queryset = queryset.filter(search_text__contains=term)
        return queryset

    def filter_tags(self, queryset, name, tags):
        """Any of the tags; a semi-join, so no DISTINCT over every column."""
        if not tags:
            return queryset
        links = Scenario.tags.through.objects.filter(tag__in=tags).values("scenario_id")
        return queryset.filter(pk__in=links)

    def filter_flags(self, queryset, name, values):
        conditions = Q()
        for value in values:
            if value == "risk":
                conditions &= ~Q(risk_level=RiskLevel.NONE)
            else:
                conditions &= Q(**{value: True})
        return queryset.filter(conditions)


def describe_errors(filterset) -> str:
    """The filter's errors in one sentence a person reads: each filter by its label and the
    value it was given ("State: "xx" is not one of its choices"), never the form's raw text."""
    parts = []
    for name, errors in filterset.errors.items():
        field = filterset.form.fields.get(name)
        label = str(field.label) if field is not None and field.label else name
        given = filterset.data.getlist(name) if hasattr(filterset.data, "getlist") else []
        codes = {e.code for e in errors.as_data()}
        if codes & {"invalid_choice", "invalid_pk_value"} and given:
            values = ", ".join(f"“{value}”" for value in given)
            parts.append(
                _("%(label)s: %(values)s is not one of its choices")
                % {"label": label, "values": values}
            )
        else:
            parts.append(f"{label}: {' '.join(str(e) for e in errors)}")
    return _("The scenario filter cannot be used. %(problems)s.") % {"problems": "; ".join(parts)}
