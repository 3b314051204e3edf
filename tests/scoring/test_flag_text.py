"""Annotator flags and notes read in the page's language (issue 23: the agreement report's
"fast: median time …" was English on a Chinese page). The stats module gives each as an item
beside its English text; the pages render the items; both say the same in English."""

import re

import pytest
from django.template import Context, Template
from django.utils import translation
from django.utils.html import escape

from h2htalk.stats.agreement.annotators import annotator_report, english
from scoring.agreement.flag_text import describe, flag_text
from tests.test_agreement import simulate


@pytest.fixture(autouse=True)
def no_language_left_active():
    """`translation.override` ends in `deactivate_all` when no language was active; later
    tests in this process expect the default language again."""
    yield
    translation.deactivate()


ITEMS = [
    {"kind": "consensus", "share": 0.31, "n": 40, "median": 0.72, "threshold": 0.55},
    {
        "kind": "gold",
        "correct": 3,
        "n": 12,
        "share": 0.25,
        "confidence": 0.99,
        "upper": 0.58,
        "floor": 0.6,
    },
    {"kind": "position", "share": 0.9, "n": 30, "p": 0.00001, "low": 0.35, "high": 0.65},
    {"kind": "fast", "seconds": 0.4, "source": "client", "limit": 5.0},
    {"kind": "quicker", "seconds": 6.2, "source": "mixed", "pool": 30.0},
]


@pytest.mark.parametrize("item", ITEMS, ids=[item["kind"] for item in ITEMS])
def test_the_page_text_in_english_is_the_stored_text(item):
    with translation.override("en"):
        assert describe(item) == english(item)


@pytest.mark.parametrize("item", ITEMS, ids=[item["kind"] for item in ITEMS])
def test_in_chinese_no_english_words_remain(item):
    with translation.override("zh-hans"):
        text = describe(item)
    words = re.findall(r"[A-Za-z]{2,}", text)
    assert not words, text


def test_every_flag_of_a_simulated_report_reads_the_same_in_english_and_translates():
    judgments, _ = simulate(seed=1, n_gold=150)
    judgments = judgments.copy()
    judgments.loc[judgments["annotator"] == "h5", "time_on_task_ms"] = 2_000
    table = annotator_report(judgments)
    kinds = {item["kind"] for items in table["flag_items"] for item in items}
    assert {"consensus", "gold", "fast"} <= kinds, kinds
    template = Template("{{ items|flag_text:english }}")
    for name, row in table.iterrows():
        context = Context({"items": row["flag_items"], "english": row["flag"]})
        with translation.override("en"):
            assert template.render(context) == escape(row["flag"]), name
        with translation.override("zh-hans"):
            shown = template.render(context)
        assert not re.findall(r"\b[A-Za-z]{3,}\b", shown), shown
    assert table.at["h5", "flag"].startswith("fast: median time 2.0 s")
    with translation.override("zh-hans"):
        assert flag_text(table.at["h5", "flag_items"]).startswith("过快：中位用时 2.0 秒")
    assert flag_text([], "stored text") == "stored text"  # reports stored before items
