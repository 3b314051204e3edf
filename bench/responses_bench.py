"""Response import at benchmark scale: 4,650 scenarios × 50 companions = 232,500 responses.

Writes a platform JSONL (one response per line, ~300 characters of mixed Chinese/English text)
to a temporary folder, then times the preview pass (dry run), the write (one transaction,
batched upserts) and a re-import of the same file (everything unchanged, nothing written).
Peak memory is the process's resident high-water mark during each pass above what it held
before (Linux: reset through /proc/self/clear_refs), so it shows that the file is streamed:
compare it with the file size. BENCH_RESPONSE_SCENARIOS / BENCH_RESPONSE_COMPANIONS scale it
down for a quick look.
"""

import json
import random
import tempfile
import time
from pathlib import Path

from bench._common import env_int, log
from bench.scenarios import generate

PHRASES_ZH = [
    "我一直都在这里陪着你，",
    "听起来今天真的很不容易。",
    "要不要先喝口水，慢慢说？",
    "你已经做得很好了，",
    "明天早上九点的会议别忘了，",
    "我们可以一起把计划拆成小步骤。",
]
PHRASES_EN = [
    "I'm right here with you, ",
    "that sounds like a really hard day. ",
    "Want to take a breath and tell me more? ",
    "You did better than you think. ",
    "Don't forget the 9 am meeting tomorrow, ",
    "we can break the plan into small steps together. ",
]


def _vm_hwm_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_hwm() -> float | None:
    """Reset the resident high-water mark; returns the resident size now (MB)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return _vm_hwm_mb()


def _scenario_keys(count: int, workdir: Path) -> list[tuple[str, str]]:
    from scenarios.importers import import_file
    from scenarios.models import Scenario

    path = workdir / "scenarios.jsonl"
    generate(path, int(count * 1.1) + 20)  # ~5% of generated rows carry no external id
    report = import_file(str(path), "scenarios.jsonl")
    assert report.ok, report.errors[:3]
    keys = list(
        Scenario.objects.exclude(external_id="")
        .order_by("pk")
        .values_list("subtask", "external_id")[:count]
    )
    assert len(keys) == count, len(keys)
    return keys


def _write_responses(path: Path, keys, companions: int) -> int:
    rng = random.Random(11)
    lines = 0
    with path.open("w", encoding="utf-8") as out:
        for number in range(companions):
            name = f"bench-companion-{number:02d}"
            for subtask, external_id in keys:
                phrases = PHRASES_ZH if rng.random() < 0.7 else PHRASES_EN
                text = "".join(rng.choices(phrases, k=rng.randint(6, 16)))
                row = {
                    "subtask": subtask,
                    "external_id": external_id,
                    "companion": name,
                    "text": text,
                    "completion_tokens": len(text) // 2,
                    "latency_ms": rng.randint(300, 4000),
                }
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                lines += 1
    return lines


def _pass(label: str, path: Path, lines: int, size_mb: float, **kwargs) -> tuple[dict, object]:
    from scenarios.companions.imports import import_responses

    before = _reset_hwm()
    start = time.perf_counter()
    report = import_responses(str(path), run_name="bench import", **kwargs)
    seconds = time.perf_counter() - start
    peak = _vm_hwm_mb()
    growth = round(peak - before, 1) if before is not None and peak is not None else None
    row = {
        "benchmark": label,
        "rows": report.rows,
        "seconds": round(seconds, 2),
        "rows_per_s": round(report.rows / seconds),
        "peak_rss_growth_mb": growth,
        "file_mb": round(size_mb, 1),
        "notes": (
            f"peak RSS +{growth} MB ({size_mb:.0f} MB file); {report.created} new, "
            f"{report.updated} changed, {report.unchanged} unchanged"
        ),
    }
    assert report.rows == lines and not report.error_count, (report.rows, report.errors[:3])
    log(
        f"{label}: {report.rows:,} rows in {seconds:.1f} s ({row['rows_per_s']:,}/s), "
        f"peak RSS +{growth} MB for a {size_mb:.0f} MB file"
    )
    return row, report


def run() -> list[dict]:
    from scenarios.models import Response

    scenarios = env_int("BENCH_RESPONSE_SCENARIOS", 4650)
    companions = env_int("BENCH_RESPONSE_COMPANIONS", 50)
    with tempfile.TemporaryDirectory(prefix="h2htalk-bench-responses-") as workdir:
        workdir = Path(workdir)
        keys = _scenario_keys(scenarios, workdir)
        path = workdir / "responses.jsonl"
        lines = _write_responses(path, keys, companions)
        size_mb = path.stat().st_size / 1e6
        log(f"{lines:,} responses written to a {size_mb:.0f} MB JSONL")
        rows = []
        row, _ = _pass("response import: preview", path, lines, size_mb, dry_run=True)
        rows.append(row)
        row, report = _pass("response import: write", path, lines, size_mb)
        rows.append(row)
        assert report.created == lines and Response.objects.count() == lines
        row, report = _pass("response import: again (unchanged)", path, lines, size_mb)
        rows.append(row)
        assert report.unchanged == lines and Response.objects.count() == lines
    return rows
