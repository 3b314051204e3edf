"""The two metrics profiles against the released H2HTalk evaluator's own values: on the pairs of
tests/scoring/data/paper_metrics_expected.jsonl (references re-read from the shared data folder,
../shared/data/h2htalk/ or H2HTALK_SHARED_DATA), per metric the share of pairs on which a
profile differs from the evaluator by more than 1e-9 and the largest absolute difference, the
pairs the evaluator leaves out, and the mean composite of identical answers without the two
model terms. Not a timing: the figures of README "Reference metrics", section profiles.

    .venv/bin/python -m bench.paper_profile          # alone, no bench database
    .venv/bin/python -m bench paper_profile --backend sqlite
"""

import json
import os
import sys
import time
from pathlib import Path

from bench._common import REPO

DATA = REPO / "tests" / "scoring" / "data" / "paper_metrics_expected.jsonl"
KEYS = ("rouge1", "rouge2", "rougeL", "bleu1", "bleu2", "bleu3", "bleu4")
TOLERANCE = 1e-9


def _shared() -> Path:
    return Path(
        os.environ.get("H2HTALK_SHARED_DATA") or REPO.parent / "shared" / "data" / "h2htalk"
    )


def _pairs() -> list[tuple[dict, str, str]]:
    cache: dict[str, list[str]] = {}

    def line(name: str, number: int) -> str:
        if name not in cache:
            raw = (_shared() / name).read_bytes().decode("utf-8").split("\r\n")
            cache[name] = [json.loads(x.strip())["response"] for x in raw if x.strip()]
        return cache[name][number - 1]

    out = []
    for text in DATA.read_text(encoding="utf-8").splitlines():
        row = json.loads(text)
        ref = row.get("reference_text")
        if ref is None:
            ref = line(row["reference"]["file"], row["reference"]["line"])
        cand = row.get("candidate")
        if cand is None:
            cand = line(row["candidate_from"]["file"], row["candidate_from"]["line"])
        out.append((row, cand, ref))
    return out


def measure() -> dict:
    from scoring.metrics import composite, paper_profile, reference

    pairs = _pairs()
    scorers = {
        "platform": lambda c, r: reference.score_pair(c, r),
        "paper": paper_profile.score_pair,
    }
    figures = {"pairs": len(pairs), "left_out": sum(row["expected"] is None for row, _, _ in pairs)}
    for name, score in scorers.items():
        share, worst, disagree = {}, {}, 0
        kept = [(row, c, r) for row, c, r in pairs if row["expected"] is not None]
        for key in KEYS:
            diffs = [abs(score(c, r)[key] - row["expected"][key]) for row, c, r in kept]
            share[key] = sum(d > TOLERANCE for d in diffs) / len(diffs)
            worst[key] = max(diffs)
        for row, c, r in pairs:  # the evaluator leaves a pair out: does the profile?
            disagree += (row["expected"] is None) != (
                paper_profile.excluded(c, r) and name != "platform"
            )
        figures[name] = {"share": share, "max": worst, "left_out_disagreements": disagree}
    identical = paper_profile.score_pair("我在这里陪着你。", "我在这里陪着你。")
    figures["identical_composite"] = {
        name: composite.composite(identical, profile=name).score for name in scorers
    }
    return figures


def report(figures: dict) -> str:
    lines = [
        f"{figures['pairs']} pairs (all 11 files of the release; the released evaluator leaves "
        f"{figures['left_out']} out: empty or whitespace-only), load {_load()}",
        f"{'metric':8} {'platform: share ≠':>18} {'max |Δ|':>9} {'paper: share ≠':>15} {'max |Δ|':>9}",
    ]
    for key in KEYS:
        a, b = figures["platform"], figures["paper"]
        lines.append(
            f"{key:8} {a['share'][key]:>18.0%} {a['max'][key]:>9.3f} "
            f"{b['share'][key]:>15.0%} {b['max'][key]:>9.1e}"
        )
    for name in ("platform", "paper"):
        lines.append(
            f"{name}: pairs scored where the evaluator leaves them out (or the reverse): "
            f"{figures[name]['left_out_disagreements']}"
        )
    both = figures["identical_composite"]
    lines.append(
        f"composite of an identical answer without BERTScore and the embedding: platform "
        f"{both['platform']:.2f} (renormalised), paper {both['paper']:.2f} (missing terms count 0)"
    )
    return "\n".join(lines)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run() -> list[dict]:
    start = time.perf_counter()
    figures = measure()
    worst = max(figures["paper"]["max"].values())
    note = (
        f"{figures['pairs']} pairs; paper profile max |Δ| {worst:.1e}; platform differs on "
        f"{max(figures['platform']['share'].values()):.0%} (max |Δ| "
        f"{max(figures['platform']['max'].values()):.2f})"
    )
    return [
        {
            "benchmark": "paper profile vs released evaluator",
            "rows": figures["pairs"],
            "seconds": round(time.perf_counter() - start, 3),
            "notes": note,
        }
    ]


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "h2htalk.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    import django

    django.setup()
    print(report(measure()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
