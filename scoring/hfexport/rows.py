"""One row per judgment: pseudonymous annotators, the scenario as chat messages, both response
texts, the preference keyed by the pair and everything the annotator gave with it.

Companion identity (names, model ids, run names) stays out unless asked for: the texts pass
through the rating page's own `blind_text`, so a name a response happens to write is hidden as
it was from the annotators."""

from dataclasses import dataclass, field

from annotation.blinding import blind_names, blind_text
from annotation.models import RATING_DIMENSIONS, AnnotatorExclusion, Campaign, Judgment
from scenarios.companions.prompts import build_messages

DIMENSIONS = [name for name, _ in RATING_DIMENSIONS]
_FIELDS = (
    "pk",
    "comparison_id",
    "annotator_id",
    "screen_preference",
    "preference",
    "both_unacceptable",
    "reasons",
    "confidence",
    "ratings",
    "rationale",
    "scenario_revision",
    "scenario_hash",
    "assignment__left_is_a",
    "comparison__is_gold",
    "comparison__gold_preference",
    "comparison__scenario_id",
    "comparison__response_a_id",
    "comparison__response_b_id",
    "comparison__response_a__companion__name",
    "comparison__response_b__companion__name",
)


@dataclass
class Texts:
    """Names to hide (empty when companions are exported) and the texts read once each."""

    hidden: list[str]
    prompts: dict[tuple[int, int], list[dict]] = field(default_factory=dict)
    responses: dict[int, str] = field(default_factory=dict)
    scenarios: dict[int, dict] = field(default_factory=dict)

    def blind(self, text: str) -> str:
        return blind_text(text, self.hidden) if self.hidden else (text or "")


def annotator_pseudonyms(campaign: Campaign) -> dict[int, str]:
    """annotator id → `annotator-NN`, numbered by each one's first judgment in the campaign:
    stable as judgments arrive (a newcomer gets the next number), the same in the campaign's
    and its releases' exports, and never a username."""
    first_seen = {}
    for annotator in (
        Judgment.objects.filter(comparison__campaign=campaign)
        .order_by("pk")
        .values_list("annotator_id", flat=True)
        .iterator(chunk_size=5000)
    ):
        first_seen.setdefault(annotator, len(first_seen) + 1)
    width = max(2, len(str(len(first_seen))))
    return {pk: f"annotator-{n:0{width}d}" for pk, n in first_seen.items()}


def exclusion_reasons(campaign: Campaign) -> dict[int, str]:
    return dict(
        AnnotatorExclusion.objects.filter(campaign=campaign).values_list("annotator_id", "reason")
    )


def prompt_messages(scenario, response_a, response_b) -> list[dict]:
    """The prompt both companions were given, as chat messages: the stored request when both
    responses were generated from the same one, else the platform's prompt for the scenario
    (imported responses store none)."""
    stored = response_a.prompt_messages
    if stored and stored == response_b.prompt_messages:
        messages = stored
    else:
        messages = build_messages(scenario)
    return [
        {"role": str(m.get("role", "")), "content": str(m.get("content", ""))}
        for m in messages
        if isinstance(m, dict)
    ]


def load_texts(judgment_rows: list[dict], hidden: list[str]) -> Texts:
    """The scenarios (with their prompts) and response texts the rows refer to, in three reads."""
    from scenarios.companions.models import Response
    from scenarios.models import Scenario

    texts = Texts(hidden=hidden)
    scenario_ids = {row["comparison__scenario_id"] for row in judgment_rows}
    response_ids = {row["comparison__response_a_id"] for row in judgment_rows} | {
        row["comparison__response_b_id"] for row in judgment_rows
    }
    responses = Response.objects.in_bulk(response_ids)
    scenarios = Scenario.objects.select_related("persona").in_bulk(scenario_ids)
    for pk, response in responses.items():
        texts.responses[pk] = texts.blind(response.text)
    for row in judgment_rows:
        pair = (row["comparison__response_a_id"], row["comparison__response_b_id"])
        if pair not in texts.prompts:
            scenario = scenarios[row["comparison__scenario_id"]]
            messages = prompt_messages(scenario, responses[pair[0]], responses[pair[1]])
            texts.prompts[pair] = [{**m, "content": texts.blind(m["content"])} for m in messages]
    for pk, scenario in scenarios.items():
        texts.scenarios[pk] = {
            "id": scenario.pk,
            "external_id": scenario.external_id,
            "subtask": scenario.subtask,
            "language": scenario.language,
        }
    return texts


def judgment_query(campaign: Campaign, ids=None):
    query = Judgment.objects.filter(comparison__campaign=campaign)
    if ids is not None:
        query = query.filter(pk__in=list(ids))
    return query.order_by("pk").values(*_FIELDS)


def _ratings(given: dict) -> dict:
    given = given if isinstance(given, dict) else {}
    return {side: {d: (given.get(side) or {}).get(d) for d in DIMENSIONS} for side in ("a", "b")}


def judgment_rows(
    campaign: Campaign, ids=None, include_companions: bool = False, progress=None
) -> list[dict]:
    """The judgments (all of the campaign's, or those with these ids) as dataset rows."""
    raw = list(judgment_query(campaign, ids))
    hidden = [] if include_companions else blind_names(campaign)
    texts = load_texts(raw, hidden)
    pseudonyms = annotator_pseudonyms(campaign)
    excluded = exclusion_reasons(campaign)
    rows = []
    for done, row in enumerate(raw, start=1):
        scenario = row["comparison__scenario_id"]
        a, b = row["comparison__response_a_id"], row["comparison__response_b_id"]
        record = {
            "judgment_id": row["pk"],
            "comparison_id": row["comparison_id"],
            "annotator": pseudonyms[row["annotator_id"]],
            "scenario": texts.scenarios[scenario],
            "prompt": texts.prompts[(a, b)],
            "response_a": texts.responses[a],
            "response_b": texts.responses[b],
            "preference": row["preference"],
            "shown_left": "a" if row["assignment__left_is_a"] else "b",
            "both_unacceptable": row["both_unacceptable"],
            "reasons": list(row["reasons"] or []),
            "confidence": row["confidence"],
            "ratings": _ratings(row["ratings"]),
            "rationale": texts.blind(row["rationale"]),
            "scenario_revision": row["scenario_revision"],
            "scenario_hash": row["scenario_hash"],
            "is_gold": row["comparison__is_gold"],
            "gold_preference": row["comparison__gold_preference"],
            "excluded": row["annotator_id"] in excluded,
            "exclusion_reason": texts.blind(excluded.get(row["annotator_id"], "")),
        }
        if include_companions:
            record["companion_a"] = row["comparison__response_a__companion__name"]
            record["companion_b"] = row["comparison__response_b__companion__name"]
        rows.append(record)
        if progress:
            progress(done, len(raw))
    return rows
