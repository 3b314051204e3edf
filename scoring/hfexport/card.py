"""The dataset card (README.md): the Hub's YAML header (languages, licence left to the
researcher, size category, task categories, the two configs with their files and features) and
how the data was collected, from the campaign's own records. Written in English, as cards on
the Hub are; the figures are the agreement page's (scoring.agreement.services.report_for)."""

import json

import yaml
from django.template.defaultfilters import floatformat

from annotation.blinding import blind_text

JUDGMENTS_FILE = "judgments.jsonl"
PAIRS_FILE = "preference_pairs.jsonl"
ALPHA_LABELS = {
    "preference5": "5-point preference (ordinal)",
    "winner3": "A / tie / B (nominal)",
    "outcome4": "A / tie / B / both unacceptable (nominal)",
}

_MESSAGES = {"list": [{"name": "role", "dtype": "string"}, {"name": "content", "dtype": "string"}]}
_SCENARIO = {
    "struct": [
        {"name": "id", "dtype": "int64"},
        {"name": "external_id", "dtype": "string"},
        {"name": "subtask", "dtype": "string"},
        {"name": "language", "dtype": "string"},
    ]
}


def _ratings_feature(dimensions) -> dict:
    side = {"struct": [{"name": d, "dtype": "int64"} for d in dimensions]}
    return {"struct": [{"name": "a", **side}, {"name": "b", **side}]}


def judgment_features(dimensions, include_companions: bool) -> list[dict]:
    features = [
        {"name": "judgment_id", "dtype": "int64"},
        {"name": "comparison_id", "dtype": "int64"},
        {"name": "annotator", "dtype": "string"},
        {"name": "scenario", **_SCENARIO},
        {"name": "prompt", **_MESSAGES},
        {"name": "response_a", "dtype": "string"},
        {"name": "response_b", "dtype": "string"},
        {"name": "preference", "dtype": "int64"},
        {"name": "shown_left", "dtype": "string"},
        {"name": "both_unacceptable", "dtype": "bool"},
        {"name": "reasons", "list": "string"},
        {"name": "confidence", "dtype": "int64"},
        {"name": "ratings", **_ratings_feature(dimensions)},
        {"name": "rationale", "dtype": "string"},
        {"name": "scenario_revision", "dtype": "int64"},
        {"name": "scenario_hash", "dtype": "string"},
        {"name": "is_gold", "dtype": "bool"},
        {"name": "gold_preference", "dtype": "int64"},
        {"name": "excluded", "dtype": "bool"},
        {"name": "exclusion_reason", "dtype": "string"},
    ]
    if include_companions:
        features += [
            {"name": "companion_a", "dtype": "string"},
            {"name": "companion_b", "dtype": "string"},
        ]
    return features


def pair_features(include_companions: bool) -> list[dict]:
    features = [
        {"name": "comparison_id", "dtype": "int64"},
        {"name": "scenario_id", "dtype": "int64"},
        {"name": "subtask", "dtype": "string"},
        {"name": "language", "dtype": "string"},
        {"name": "prompt", **_MESSAGES},
        {"name": "chosen", **_MESSAGES},
        {"name": "rejected", **_MESSAGES},
        {"name": "chosen_response", "dtype": "string"},
        {"name": "margin", "dtype": "float64"},
        {"name": "agreement", "dtype": "float64"},
        {"name": "n_votes", "dtype": "int64"},
        {"name": "votes", "list": "int64"},
        {"name": "is_gold", "dtype": "bool"},
    ]
    if include_companions:
        features += [
            {"name": "chosen_companion", "dtype": "string"},
            {"name": "rejected_companion", "dtype": "string"},
        ]
    return features


def size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return label
    return "100K<n<1M" if n < 1_000_000 else "1M<n<10M"


def header(facts: dict, dimensions, include_companions: bool) -> str:
    """The YAML header; `license` is left for the researcher (a TODO comment says so)."""
    meta = {
        "pretty_name": facts["title"],
        "language": facts["languages"] or ["zh"],
        "license": "other",
        "license_name": "to-be-chosen",
        "size_categories": [size_category(facts["judgments"])],
        "task_categories": ["text-generation", "text-classification"],
        "tags": ["human-feedback", "preference", "pairwise-comparison", "dpo", "reward-modeling"],
        "annotations_creators": ["crowdsourced" if facts["crowdsourced"] else "expert-generated"],
        "configs": [
            {
                "config_name": "judgments",
                "data_files": [{"split": "train", "path": JUDGMENTS_FILE}],
                "default": True,
            },
            {
                "config_name": "preference_pairs",
                "data_files": [{"split": "train", "path": PAIRS_FILE}],
            },
        ],
        "dataset_info": [
            {
                "config_name": "judgments",
                "features": judgment_features(dimensions, include_companions),
            },
            {
                "config_name": "preference_pairs",
                "features": pair_features(include_companions),
            },
        ],
    }
    meta = json.loads(json.dumps(meta))  # no shared objects: YAML without &anchors
    text = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100)
    text = text.replace(
        "license: other\n",
        "license: other  # TODO(researcher): choose the licence before publishing "
        "(a Hub licence id, or keep `other` and name it in license_name / license_link)\n",
    )
    return f"---\n{text}---\n"


def _number(value) -> str:
    """As the agreement page shows it (floatformat:3), unlocalised."""
    return floatformat(value, "3u")


def _alpha_lines(rows: list[dict]) -> list[str]:
    lines = ["| Label | Level | α | 95% interval | Comparisons |", "|---|---|---|---|---|"]
    for row in rows:
        if row["label"] not in ALPHA_LABELS or row.get("alpha") is None:
            continue
        interval = (
            f"[{_number(row['low'])}, {_number(row['high'])}]"
            if row.get("low") is not None
            else "—"
        )
        lines.append(
            f"| {ALPHA_LABELS[row['label']]} | {row['level']} | {_number(row['alpha'])} | "
            f"{interval} | {row['n_units']} |"
        )
    return lines if len(lines) > 2 else ["Not enough comparisons judged twice for α."]


def body(facts: dict, hidden: list[str]) -> str:
    """The card's text: what the files hold and how the data was collected."""
    return "\n".join(_files_part(facts) + _collection_part(facts, hidden))


def _files_part(c: dict) -> list[str]:
    return [
        f"# {c['title']}",
        "",
        f"Human pairwise judgments of emotional-companion responses on H2HTalk scenarios, "
        f"exported from {c['source']} on {c['exported_at']} by the H2HTalk platform.",
        "",
        "## Files",
        "",
        f"- `{JUDGMENTS_FILE}` (config `judgments`, the default): {c['judgments']} judgments, "
        "one row each, on "
        f"{c['comparisons']} comparisons of {c['scenarios']} scenarios by {c['annotators']} "
        "annotators.",
        f"- `{PAIRS_FILE}` (config `preference_pairs`): {c['pairs']} preference pairs, one per "
        "comparison with counted votes that is neither a tie nor judged both unacceptable.",
        "",
        "```python",
        "from datasets import load_dataset",
        'judgments = load_dataset("<this folder or repo>")',
        'pairs = load_dataset("<this folder or repo>", "preference_pairs")',
        "```",
        "",
        "## Columns",
        "",
        "- `annotator`: a pseudonym (`annotator-NN`, numbered by first judgment in the "
        "campaign), never a username.",
        "- `preference`: −2 response A much better … 0 tie … 2 response B much better, keyed by "
        "the pair (not by the screen side; `shown_left` says which response was on the left).",
        "- `both_unacceptable`: the annotator found neither response acceptable (preference 0).",
        "- `reasons`: keys of the campaign's reasons, said of the preferred response; "
        "`confidence`: 1 unsure … 3 sure; `ratings`: optional 1–5 per dimension and response.",
        "- `scenario_revision` / `scenario_hash`: the scenario text the annotator was shown.",
        "- `excluded` / `exclusion_reason`: the annotator was excluded from the campaign's "
        "numbers (their judgments are kept here, marked, and left out of the pairs).",
        "- Preference pairs: `prompt`, `chosen`, `rejected` as chat messages; `margin` = |mean "
        "counted preference| (0–2]; `agreement` = share of counted votes pointing the chosen way; "
        "`votes` = the counted votes, positive = for the chosen response.",
        "",
    ]


def _collection_part(c: dict, hidden: list[str]) -> list[str]:
    lines = [
        "## How the data was collected",
        "",
        f"- **Blinding**: {c['blinding']}",
        f"- **Overlap**: each comparison was handed out until k = {c['overlap']} counted "
        f"judgments ({c['comparisons_at_k']} of {c['comparisons_total']} comparisons had "
        f"reached k when this was exported); pairing design: {c['pairing']}; "
        f"gold items: {c['gold']}.",
        f"- **Qualification**: {c['qualification']}",
        f"- **Exclusions**: {c['exclusion_text']}",
    ]
    lines += [f"  - {blind_text(r['reason'], hidden)}: {r['text']}" for r in c["exclusions"]]
    lines += [
        f"- **Preference pairs left out**: {c['ties']} tie(s) (mean preference 0) and "
        f"{c['both_unacceptable']} comparison(s) judged both unacceptable (the most frequent "
        "outcome of their counted votes).",
        "",
        "## Agreement",
        "",
        f"Krippendorff's α on the counted judgments ({c['alpha_judgments']}; gold items left "
        "out), 95% bootstrap interval over comparisons, each comparison counted with its mirror "
        "(A and B swapped) — the campaign's agreement page:",
        "",
        *_alpha_lines(c["alpha"]),
        "",
        "## Licence",
        "",
        "To be chosen by the researcher before publishing (see `license` above).",
        "",
    ]
    return lines
