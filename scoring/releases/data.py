"""The data of a release, read from its frozen inputs into frames: the votes, the composite of
each representative response, and the calibrated judge's probabilities. `compute_results`
(scoring.releases.computing) then needs no database access at all."""

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from scoring import stored_columns
from scoring.metrics import composite as paper
from scoring.metrics import profiles
from scoring.models import Release
from scoring.releases.errors import ReleaseError
from scoring.releases.freezing import (
    FLAG_COLUMNS,
    LEVEL,
    NO_JUDGE,
    exclusion_note,
    exclusion_summary,
    other_text_note,
)
from scoring.releases.style import StyleData, style_data

PAIR_CHUNK = 50_000  # judge pairs scored at once


@dataclass
class ReleaseData:
    """Everything `compute_results` needs, from the frozen inputs (no database access there)."""

    companions: list[tuple[int, str]]  # (id, name) by id
    anchor: int
    subtask: dict[int, str]  # scenario id → subtask
    votes: pd.DataFrame  # comparison, scenario, companion_a, companion_b, annotator, preference
    composite: pd.DataFrame  # response, scenario, companion, composite (one per scen. × comp.)
    composite_note: str
    seed: int
    n_boot: int
    level: float = LEVEL
    judge: dict | None = None  # name, version, document_sha256
    population: pd.DataFrame | None = None  # scenario, companion_a, companion_b, p_a
    labelled: pd.DataFrame | None = None  # comparison, p_a
    reliability: dict | None = None
    notes: list[str] = field(default_factory=list)
    exclusions: dict | None = None  # exclusion_summary of the inputs (None: frozen before)
    on_other_text: int | None = None  # judgments left out, made on an earlier scenario text
    flags: dict[str, dict[int, object]] | None = None  # flag → {scenario: value} (None: /1)
    style: StyleData | None = None  # frozen presentation features (None: no style control)
    metrics_profile: str = "platform"  # of the stored metrics the composite comes from
    scenario_key: dict[int, str] | None = None  # scenario → text sha256 (the fits' order)
    judge_scores: pd.DataFrame | None = None  # scenario, companion, score: judge logit/response


def representatives(inputs: dict) -> pd.DataFrame:
    """The frozen population: one response per (scenario, companion), the latest successful one
    in the campaign's runs when the release was frozen (as the campaign's pairing chooses).
    Columns: response, scenario, companion."""
    responses = inputs["responses"]
    frame = pd.DataFrame(
        {
            "response": responses["id"],
            "scenario": responses["scenario"],
            "companion": responses["companion"],
        }
    )
    if frame.empty:
        return frame
    frame = frame[np.asarray(responses["population"], dtype=bool)]
    return frame.sort_values(["scenario", "companion"]).reset_index(drop=True)


def population_pairs(inputs: dict) -> pd.DataFrame:
    """Every pair of companions on every release scenario (A = the lower companion id) with
    their representative responses."""
    reps = representatives(inputs)
    columns = ["scenario", "companion_a", "companion_b", "response_a", "response_b"]
    if reps.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in columns})
    scenario = reps["scenario"].to_numpy()
    companion = reps["companion"].to_numpy()
    response = reps["response"].to_numpy()
    starts = np.flatnonzero(np.r_[True, scenario[1:] != scenario[:-1]])
    ends = np.r_[starts[1:], len(scenario)]
    first, second = [], []
    triu = {}
    for start, end in zip(starts, ends, strict=True):
        size = end - start
        if size not in triu:
            triu[size] = np.triu_indices(size, 1)
        i, j = triu[size]
        first.append(start + i)
        second.append(start + j)
    # Millions of rows: each side's positions are dropped as soon as its columns are taken.
    first = np.concatenate(first) if first else np.zeros(0, int)
    scenario, companion_a, response_a = scenario[first], companion[first], response[first]
    del first
    second = np.concatenate(second) if second else np.zeros(0, int)
    companion_b, response_b = companion[second], response[second]
    del second
    return pd.DataFrame(
        {
            "scenario": scenario,
            "companion_a": companion_a,
            "companion_b": companion_b,
            "response_a": response_a,
            "response_b": response_b,
        },
        copy=False,  # a column per array: no copy into one block
    )


def _score_pairs(document, features, response_a, response_b, progress=None) -> np.ndarray:
    """The calibrated judge's P(A over B) per pair (NaN where a feature source is missing), in
    chunks: from the responses' features read once (`features`, a
    prediction.ResponseFeatures), or, for a pairwise judge (`features` None), by
    prediction.score_pairs on each chunk."""
    from scoring.calibration.prediction import score_pairs

    response_a, response_b = np.asarray(response_a), np.asarray(response_b)
    out = np.full(len(response_a), np.nan)
    for start in range(0, len(response_a), PAIR_CHUNK):
        a, b = response_a[start : start + PAIR_CHUNK], response_b[start : start + PAIR_CHUNK]
        if features is not None:
            out[start : start + len(a)] = features.score(document, a, b)
        else:
            pairs = zip(a.tolist(), b.tolist(), strict=True)
            out[start : start + len(a)] = score_pairs(document, pairs)[0]
        if progress:
            progress(start + len(a), len(response_a))
    return out


def judge_frames(release: Release, progress=None) -> tuple[pd.DataFrame, pd.DataFrame, object]:
    """The calibrated judge's P(A over B), (population, labelled, scores): for every pair of the
    release's companions on every release scenario (columns scenario, companion_a,
    companion_b (A = the lower companion id), p_a: NaN where the judge has no features for a
    response), and on the responses of each frozen comparison
    (comparison, p_a); and each representative response's own score on the judge's logit
    scale (scenario, companion, score; None for a pairwise judge, which scores pairs only).
    The features of the frozen responses are read once, unless the judge is pairwise (its
    features belong to pairs)."""
    from scoring.calibration.document import DocumentError
    from scoring.calibration.prediction import response_features

    if release.judge is None:
        raise ReleaseError(NO_JUDGE)
    document = release.judge.document
    pairs = population_pairs(release.inputs)
    comparisons = release.inputs["comparisons"]
    try:
        features = None
        if len(pairs) or len(comparisons["id"]):
            features = response_features(document, release.inputs["responses"]["id"])
        p_all = _score_pairs(document, features, pairs["response_a"], pairs["response_b"], progress)
        p = _score_pairs(document, features, comparisons["response_a"], comparisons["response_b"])
    except DocumentError as error:
        raise ReleaseError(str(error)) from error
    columns = {c: pairs[c].to_numpy() for c in ("scenario", "companion_a", "companion_b")}
    population = pd.DataFrame({**columns, "p_a": p_all}, copy=False)
    scores = None
    if features is not None:
        reps = representatives(release.inputs)
        scores = reps[["scenario", "companion"]].assign(
            score=features.absolute(document, reps["response"]) if len(reps) else []
        )
    return population, pd.DataFrame({"comparison": comparisons["id"], "p_a": p}), scores


def votes_frame(inputs: dict) -> pd.DataFrame:
    judgments = pd.DataFrame(inputs["judgments"])
    columns = ["comparison", "scenario", "companion_a", "companion_b", "annotator", "preference"]
    if judgments.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in columns})
    comparisons = pd.DataFrame(inputs["comparisons"]).rename(columns={"id": "comparison"})
    owner = dict(zip(inputs["responses"]["id"], inputs["responses"]["companion"], strict=True))
    comparisons["companion_a"] = comparisons["response_a"].map(owner)
    comparisons["companion_b"] = comparisons["response_b"].map(owner)
    frame = judgments.merge(comparisons, on="comparison", how="inner")
    return frame.sort_values("id")[columns].reset_index(drop=True)


def _paper_terms(response_ids) -> tuple[dict[int, int], np.ndarray, dict[str, list]]:
    """The paper's composite terms stored for these responses (scoring.stored_columns, read
    once per computation): ({response id: row}, rows × terms (NaN: not stored), {encoder key:
    the encoder name of each row})."""
    columns = stored_columns.metric_columns(response_ids)
    rows = columns.rows(response_ids)
    found = {pk: k for k, pk in enumerate(columns.ids[rows].tolist())}
    listed = rows.tolist()
    encoders = {key: [names[r] for r in listed] for key, names in columns.encoders.items()}
    return found, columns.paper[rows], encoders


def metrics_profile_of(response_ids) -> str:
    """The one metrics profile of the stored metrics of these responses (ReleaseError when
    they mix profiles: recompute them with one)."""
    from scoring.metrics.catalogue import FeatureError
    from scoring.metrics.features import single_profile

    columns = stored_columns.metric_columns(response_ids)
    try:
        return single_profile(columns.profiles[r] for r in columns.rows(response_ids).tolist())
    except FeatureError as error:
        raise ReleaseError(str(error)) from error


def composite_frame(inputs: dict) -> tuple[pd.DataFrame, str]:
    """The paper's composite of each representative response, over the metric terms stored
    for every one of them (one renormalisation for the whole release); under the paper
    profile, every term with a model counted 0 where missing, and the answers the released
    evaluator leaves out (empty or whitespace-only) left out here too."""
    reps = representatives(inputs)
    found, table, encoders = _paper_terms(reps["response"].tolist())
    reps = reps[reps["response"].isin(found)].reset_index(drop=True)
    if reps.empty:
        reps["composite"] = pd.Series(dtype=float)
        return reps, "No reference metrics are stored for the release's responses."
    table = table[[found[r] for r in reps["response"].tolist()]]
    if metrics_profile_of(reps["response"].tolist()) == profiles.PAPER:
        return _paper_profile_frame(reps, table, encoders, found)
    columns = {}
    partial = []
    for k, term in enumerate(paper.PAPER_WEIGHTS):
        column = table[:, k]
        if np.isnan(column).all():
            continue
        if np.isnan(column).any():
            partial.append(paper.LABELS[term])
            continue
        columns[term] = column
    note_extra = ""
    if partial:
        note_extra = (
            f" {', '.join(partial)} {'is' if len(partial) == 1 else 'are'} stored for some "
            "responses only and left out, so every response is scored the same way."
        )
    if not columns:
        reps["composite"] = np.nan
        return reps, "None of the composite's terms is stored for every response." + note_extra
    rows = [found[r] for r in reps["response"].tolist()]
    for key, names in encoders.items():  # the encoder of each model term, named in the note
        columns[key] = [names[row] for row in rows]
    result = paper.composite_columns(columns)
    reps["composite"] = np.asarray(result.score, dtype=float)
    return reps, result.note + note_extra


def _paper_profile_frame(reps, table, encoders, found) -> tuple[pd.DataFrame, str]:
    """composite_frame under the paper profile: no renormalisation, left-out answers dropped."""
    columns = {
        term: table[:, k]
        for k, term in enumerate(paper.PAPER_WEIGHTS)
        if not np.isnan(table[:, k]).all()
    }
    if not columns:
        reps["composite"] = np.nan
        return reps, "None of the composite's terms is stored for any response."
    rows = [found[r] for r in reps["response"].tolist()]
    for key, names in encoders.items():
        columns[key] = [names[row] for row in rows]
    result = paper.composite_columns(columns, profile=profiles.PAPER)
    reps["composite"] = np.asarray(result.score, dtype=float)
    left_out = int(np.isnan(reps["composite"].to_numpy()).sum())
    reps = reps[~np.isnan(reps["composite"].to_numpy())].reset_index(drop=True)
    note = result.note
    if left_out:
        note += (
            f" {left_out} empty or whitespace-only {'answer is' if left_out == 1 else 'answers are'}"
            " left out of every mean, as the released evaluator does."
        )
    return reps, note


def reliability_of(document: dict) -> dict | None:
    """The held-out reliability tables in a calibrated judge's document (None if absent)."""
    judges = ((document or {}).get("heldout") or {}).get("judges") or {}
    out = {}
    for name, metrics in judges.items():
        if isinstance(metrics, dict) and isinstance(metrics.get("reliability"), list):
            out[name] = {
                "reliability": metrics["reliability"],
                "ece": metrics.get("ece"),
                "log_loss": metrics.get("log_loss"),
            }
    return out or None


def scenario_flags(inputs: dict) -> dict[str, dict[int, object]] | None:
    """{flag: {scenario id: value}} as frozen (None: inputs of schema /1 froze no flags)."""
    scenarios = inputs["scenarios"]
    if not all(flag in scenarios for flag in FLAG_COLUMNS):
        return None
    return {flag: dict(zip(scenarios["id"], scenarios[flag], strict=True)) for flag in FLAG_COLUMNS}


def load_data(release: Release, progress=None) -> ReleaseData:
    """The release's data from its frozen inputs (the database only for the stored metrics and
    the judge's features of the frozen responses, both covered by the fingerprint)."""
    inputs = release.inputs
    composite, note = composite_frame(inputs)
    profile = profiles.DEFAULT
    if len(composite):
        profile = metrics_profile_of(composite["response"].tolist())
    data = ReleaseData(
        companions=list(zip(inputs["companions"]["id"], inputs["companions"]["name"], strict=True)),
        anchor=inputs["anchor"],
        subtask=dict(zip(inputs["scenarios"]["id"], inputs["scenarios"]["subtask"], strict=True)),
        votes=votes_frame(inputs),
        composite=composite,
        composite_note=note,
        seed=inputs["seed"],
        n_boot=inputs["n_boot"],
        level=inputs["level"],
        exclusions=exclusion_summary(inputs),
        on_other_text=inputs.get("judgments_on_other_text"),
        flags=scenario_flags(inputs),
        style=style_data(inputs),
        metrics_profile=profile,
        scenario_key=dict(
            zip(inputs["scenarios"]["id"], inputs["scenarios"]["content_sha256"], strict=True)
        ),
    )
    note = exclusion_note(data.exclusions)
    if note:
        data.notes.append(note)
    note = other_text_note(data.on_other_text)
    if note:
        data.notes.append(note)
    if release.judge_id is not None:
        data.judge = {
            key: inputs["judge"][key] for key in ("id", "name", "version", "document_sha256")
        }
        data.population, data.labelled, data.judge_scores = judge_frames(release, progress)
        data.reliability = reliability_of(release.judge.document)
    return data
