"""Display names and human units (h2htalk/display.py) and the statistic meanings
(h2htalk/meanings.py), as functions and as the template filters every template has."""

import math

import pytest
from django.template import Context, Template
from django.utils import translation

from annotation.models import RATING_DIMENSIONS
from h2htalk import display
from h2htalk.meanings import MEANINGS, meaning_rows
from h2htalk.stats.agreement.labels import LABEL_LEVELS
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
from scenarios.taxonomy import MEMORY_IMPORTANCE, Dimension, Subtask
from tests.scenarios import factories


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.4, "0.4 s"),
        (45.54, "45.5 s"),
        (59.94, "59.9 s"),
        (59.96, "1 min"),
        (90, "1 min 30 s"),
        (125, "2 min 5 s"),
        (3599.6, "1 h"),
        (3840, "1 h 4 min"),
        (None, "—"),
        (math.nan, "—"),
        ("", "—"),
    ],
)
def test_duration_reads_as_seconds_minutes_hours(seconds, shown):
    assert display.duration(seconds) == shown


def test_milliseconds_read_as_the_same_durations():
    assert display.duration_ms(45540) == "45.5 s"
    assert display.duration_ms(125_000) == "2 min 5 s"
    assert display.duration_ms(None) == "—"


@pytest.mark.parametrize(
    ("share", "shown"),
    [
        (0.259, "26%"),
        (0, "0%"),
        (1, "100%"),
        (0.004, "0.4%"),  # not "0%" for a share that is not nothing
        (0.998, "99.8%"),  # nor "100%" for one that is not everything
        (None, "—"),
        (math.inf, "—"),
    ],
)
def test_percent(share, shown):
    assert display.percent(share) == shown


def test_a_share_keeps_its_base_and_shows_the_count_when_it_is_whole():
    assert display.share_of(21 / 81, 81, "comparison") == "21 of 81 comparisons (26%)"
    assert display.share_of(0.259, 81, "comparison") == "26% of 81 comparisons"  # 20.98: no count
    assert display.share_of(0.5, 1, "comparison") == "50% of 1 comparison"
    assert display.share_of(1, 1, "vote") == "1 of 1 vote (100%)"
    assert display.share_of(2 / 3, 3) == "2 of 3 (67%)"
    assert display.share_of(None, 81, "comparison") == "—"
    assert display.plural("reply") == "replies" and display.plural("day") == "days"


def test_every_agreement_label_has_a_name_that_is_not_its_code():
    codes = [*LABEL_LEVELS, *(f"rating_{d}" for d, _ in RATING_DIMENSIONS)]
    codes += [f"{side}_{d}" for side in "ab" for d, _ in RATING_DIMENSIONS]
    names = [display.label_name(code) for code in codes]
    assert all(name != code for name, code in zip(names, codes, strict=True))
    assert len(set(names)) == len(names)  # one name per concept, none shared
    assert display.label_name("preference5") == "5-point preference"
    assert display.label_name("a_fluency") == "Fluency rating of A"
    assert display.label_name("rating_safety") == "Safety (SAP) rating"
    assert display.label_name("something_else") == "something_else"


def test_groups_are_named_as_the_taxonomy_names_them():
    for subtask, label in Subtask.choices:
        assert display.group_name(subtask) == label
    for dimension, label in Dimension.choices:
        assert display.group_name(dimension) == label
    assert display.group_name("overall") == "All comparisons"


def test_a_scenario_is_named_by_its_id_and_subtask_name():
    scenario = Scenario(pk=7, subtask="itinerary_middle", external_id="demo-014")
    assert display.scenario_name(scenario) == "demo-014 · Itinerary · up to 5 timed items"
    scenario.external_id = ""
    assert display.scenario_name(scenario) == "7 · Itinerary · up to 5 timed items"


def test_memory_importance_in_words():
    assert [display.importance_name(v) for v in (0, 1, 2)] == [
        "~a week",
        "~three months",
        "long-term",
    ]
    assert display.importance_name(None) == "—"
    assert display.importance_name(7) == "7"
    assert set(MEMORY_IMPORTANCE) == {0, 1, 2}


def test_timestamp_of_a_document():
    assert display.timestamp("2026-12-05T07:46:21.500567+00:00") == "2026-12-05 07:46 UTC"
    assert display.timestamp("2026-12-05T08:46:21+01:00") == "2026-12-05 07:46 UTC"
    assert display.timestamp("yesterday") == "yesterday"


@pytest.mark.django_db
def test_generation_summary_says_imported_instead_of_zero_tokens():
    scenario = factories.scenario()
    companion = CompanionModel.objects.create(name="c1")
    imported = GenerationRun.objects.create(name="files", kind=GenerationRun.Kind.IMPORT)
    generated = GenerationRun.objects.create(name="calls", kind=GenerationRun.Kind.GENERATE)
    bare = Response(run=imported, scenario=scenario, companion=companion, text="hi")
    with translation.override("en"):  # (its words follow the page's language)
        assert display.generation_summary(bare) == "imported"
    full = Response(
        run=generated,
        scenario=scenario,
        companion=companion,
        text="hi",
        completion_tokens=212,
        latency_ms=3410,
        finish_reason="stop",
    )
    assert display.generation_summary(full) == "212 tokens · 3.4 s · stop"
    full.completion_tokens, full.finish_reason = 0, ""
    assert display.generation_summary(full) == "3.4 s"
    full.latency_ms = None
    assert display.generation_summary(full) == "no generation data"


def render(text: str, **context) -> str:
    return Template(text).render(Context(context))


def test_filters_and_tags_need_no_load():
    assert render("{{ v|duration_ms }}", v=45540) == "45.5 s"
    assert render("{{ v|duration }}", v=125) == "2 min 5 s"
    assert render("{{ v|percent }}", v=0.259) == "26%"
    assert render("{{ v|share_of:n }}", v=0.5, n=4) == "2 of 4 (50%)"
    assert render('{% share v n "comparison" %}', v=0.5, n=4) == "2 of 4 comparisons (50%)"
    assert render("{{ v|label_name }}", v="winner3") == "3-way winner (A / tie / B)"
    assert render("{{ v|subtask_name }}", v="dialogue_base") == "Dialogue · base"
    assert render("{{ v|importance }}", v=2) == "long-term"
    assert render("{{ v|flag_name }}", v="implicit_need") == "implicit need"


def test_every_meaning_is_one_line_and_the_tags_render_it():
    for key, (name, text) in MEANINGS.items():
        name, text = str(name), str(text)  # (lazy: in the page's language)
        assert name and text and "\n" not in text, key
        assert len(text) < 260, key  # a line, not a paragraph
    table = render('{% meanings "alpha" "log_loss" %}')
    assert 'data-meaning="alpha"' in table and 'data-meaning="log_loss"' in table
    assert str(MEANINGS["alpha"][1]) in table.replace("&#x27;", "'")
    inline = render('{% meaning "ece" %}')
    assert 'data-meaning="ece"' in inline
    with pytest.raises(KeyError):
        meaning_rows(["no_such_statistic"])
