"""What an annotator may see of an item: the one payload the rating page and the rating API render.

Blindness is decided here, once, so the page and the API cannot drift apart. An item is its
assignment's random key, the scenario the companions were given (never the reference response),
and the two response texts in the layout drawn for the assignment (`left` / `right`). Nothing
names a companion, model, run, response or comparison: scenario entries are rebuilt from the
fields the page shows (an extra key stored in a memory or history entry, a response id say,
never passes), and the response texts and the campaign's own texts pass through `blind_text`,
which hides the names of the campaign's companions and runs should they appear there.
"""

import json
import re

from django.db.models import Aggregate, OuterRef, Subquery, TextField
from django.utils import translation

from h2htalk.display import subtask_label

from .care import content_note
from .models import Assignment, Campaign

HIDDEN_NAME = "[name hidden]"


class _JSONList(Aggregate):
    """The values as a JSON array, as text: json_group_array (SQLite), json_agg (PostgreSQL)."""

    function = "JSON_GROUP_ARRAY"
    output_field = TextField()

    def as_postgresql(self, compiler, connection, **extra):
        template = "%(function)s(%(expressions)s)::text"
        return self.as_sql(compiler, connection, function="JSON_AGG", template=template, **extra)


def name_lists(campaign: str = "pk") -> dict:
    """Annotations for a query whose field `campaign` is a campaign's id: the names of the
    campaign's companions, their model ids and its runs' names, as JSON lists (`blind_names`
    reads them), so the campaign and its names come in one query."""
    companions = Campaign.companions.through.objects.filter(campaign_id=OuterRef(campaign))
    runs = Campaign.runs.through.objects.filter(campaign_id=OuterRef(campaign))

    def listed(rows, field):
        return Subquery(rows.values("campaign_id").annotate(names=_JSONList(field)).values("names"))

    return {
        "companion_names": listed(companions, "companionmodel__name"),
        "companion_model_ids": listed(companions, "companionmodel__model_id"),
        "run_names": listed(runs, "generationrun__name"),
    }


def blind_names(campaign: Campaign) -> list[str]:
    """Names that would unblind an item: the campaign's companions (name, model id) and runs.

    Read from the campaign's `name_lists` annotations when it was read with them."""
    if not hasattr(campaign, "run_names"):
        campaign = Campaign.objects.annotate(**name_lists()).only("pk").get(pk=campaign.pk)
    names = set()
    for listed in (campaign.companion_names, campaign.companion_model_ids, campaign.run_names):
        names.update(n for n in json.loads(listed or "[]") if isinstance(n, str))
    return sorted((n.strip() for n in names if n and len(n.strip()) >= 2), key=len, reverse=True)


# Scripts written without spaces between words (kana, CJK ideographs, Hangul): their characters
# end a word, so "我是Qwen2.5-7B，" or "我是小暖呀" still hide the name.
_NO_SPACE_SCRIPTS = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003ffff"
)
_WORD_CHAR = rf"[^\W{_NO_SPACE_SCRIPTS}]"  # a letter, digit or _ that would extend the name


def blind_text(text: str, names: list[str]) -> str:
    """`text` with every whole-word occurrence of these names replaced (case-insensitive).

    Whole word: not touching a letter, digit or underscore, where characters of scripts without
    spaces (Chinese, Japanese, Korean) do not count, so a name inside Chinese text is found.
    """
    if not text or not names:
        return text or ""
    alternatives = "|".join(re.escape(n) for n in names)
    pattern = rf"(?<!{_WORD_CHAR})(?:{alternatives})(?!{_WORD_CHAR})"
    return re.sub(pattern, HIDDEN_NAME, text, flags=re.IGNORECASE)


def _dicts(value) -> list[dict]:
    """The dict entries of a JSON list (scenario JSON is checked on import, not trusted here)."""
    return [
        entry for entry in (value if isinstance(value, list) else []) if isinstance(entry, dict)
    ]


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _memory(value) -> list[dict]:
    """Memory entries with only what is shown (content, category, importance 0–2): text alone
    is an entry, empty ones are left out, and no other stored key reaches the annotator."""
    entries = []
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, str):
            entry = {"content": entry}
        if not isinstance(entry, dict) or not _text(entry.get("content")):
            continue
        clean = {"content": entry["content"]}
        if _text(entry.get("category")):
            clean["category"] = entry["category"]
        if entry.get("importance") in (0, 1, 2) and not isinstance(entry["importance"], bool):
            clean["importance"] = entry["importance"]
        entries.append(clean)
    return entries


def scenario_payload(scenario) -> dict:
    """What the companions were given, field by field; never the reference response."""
    persona = scenario.persona
    return {
        "subtask": scenario.subtask,
        "language": scenario.language,
        "persona": {"name": persona.name, "summary": persona.summary} if persona else None,
        "history": [
            {"role": _text(turn.get("role")), "content": _text(turn.get("content"))}
            for turn in _dicts(scenario.history)
        ],
        "memory": _memory(scenario.memory),
        "schedule": [
            {"time": _text(item.get("time")), "activity": _text(item.get("activity"))}
            for item in _dicts(scenario.schedule)
        ],
        "user_message": scenario.user_message,
    }


# What an item shows, from its comparison: the queue reads these with the comparison.
ITEM_RELATED = ("scenario__persona", "response_a", "response_b")


def _load(assignment: Assignment) -> Assignment:
    """The assignment with what an item shows, in one query (no prompts, no companions), unless
    it was read with them."""
    comparison = assignment._state.fields_cache.get("comparison")
    if comparison is not None and all(
        name in comparison._state.fields_cache for name in ("scenario", "response_a", "response_b")
    ):
        return assignment
    return (
        Assignment.objects.select_related(*(f"comparison__{path}" for path in ITEM_RELATED))
        .only(
            "key",
            "left_is_a",
            "state",
            "lease_expires_at",
            "comparison__campaign",
            "comparison__scenario",
            "comparison__response_a",
            "comparison__response_b",
            "comparison__scenario__persona",
            "comparison__scenario__subtask",
            "comparison__scenario__language",
            "comparison__scenario__history",
            "comparison__scenario__memory",
            "comparison__scenario__schedule",
            "comparison__scenario__user_message",
            "comparison__scenario__risk_level",
            "comparison__scenario__persona__name",
            "comparison__scenario__persona__summary",
            "comparison__response_a__text",
            "comparison__response_b__text",
        )
        .get(pk=assignment.pk)
    )


def item_payload(assignment: Assignment, names: list[str]) -> dict:
    """The item as the annotator sees it, `names` (from `blind_names`) hidden in both texts.

    `subtask_label` is the subtask's display name for the page; the API leaves it out.
    `content_note`: what the rater reads before an item of a risk level (`care.content_note`);
    the level is a property of the scenario, the same whichever companions are compared.
    """
    assignment = _load(assignment)
    comparison = assignment.comparison
    a, b = comparison.response_a.text, comparison.response_b.text
    left, right = (a, b) if assignment.left_is_a else (b, a)
    return {
        "key": assignment.key,
        "campaign": comparison.campaign_id,
        "subtask_label": subtask_label(comparison.scenario.subtask),
        "scenario": scenario_payload(comparison.scenario),
        "left": blind_text(left, names),
        "right": blind_text(right, names),
        "lease_expires_at": assignment.lease_expires_at,
        "content_note": content_note(comparison.scenario.risk_level),
    }


def campaign_texts(campaign: Campaign, names: list[str]) -> dict:
    """The campaign's researcher-written texts (guidelines as Markdown source, in the
    request's language when the campaign has them in it: `guidelines_language`; the labels of
    its reason checklist; its support text, likewise per language), names hidden."""
    guidelines, language = campaign.guidelines_in(translation.get_language() or "")
    support, support_language = campaign.support_text_in(translation.get_language() or "")
    return {
        "support": blind_text(support, names),
        "support_language": support_language,
        "name": blind_text(campaign.name, names),
        "description": blind_text(campaign.description, names),
        "guidelines": blind_text(guidelines, names),
        "guidelines_language": language,
        "reasons": blind_reasons(campaign, names),
    }


def blind_reasons(campaign: Campaign, names: list[str]) -> list[dict]:
    """The campaign's reason checklist, [{"key", "label"}], names hidden in the labels."""
    return [
        {"key": reason["key"], "label": blind_text(reason["label"], names)}
        for reason in campaign.reason_choices or []
    ]
