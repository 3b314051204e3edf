"""A computed release as files: one row per companion and scope (leaderboard_rows), written as
CSV, JSON (numbers and provenance) and Markdown (the tables of the leaderboard page)."""

import json
import math
from pathlib import Path

from h2htalk import csvexport
from scoring.models import Release
from scoring.releases import style_tables
from scoring.releases.flags import FLAGS
from scoring.releases.flags import LABELS as FLAG_LABELS
from scoring.releases.freezing import LEVEL, NO_JUDGE, exclusion_note, other_text_note


def fmt_number(value, digits: int = 0) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}f}"


def _exclusion_columns(data: dict) -> dict:
    summary = data.get("exclusions")  # absent: frozen before exclusions existed
    return {
        "excluded_judgments": summary["judgments"] if summary else None,
        "excluded_annotators": summary["annotators"] if summary else None,
        "exclusion_reasons": "; ".join(r["reason"] for r in summary["reasons"]) if summary else "",
    }


def group_scopes(data: dict) -> list[tuple[str, str, list[str]]]:
    """(scope, results key, groups in order): the dimensions, the subtasks and the scenario
    flags (absent from releases frozen without flags), in taxonomy order (a stored JSON
    object's keys come back sorted)."""
    present = data.get("flags") or {}
    return [
        ("dimension", "by_dimension", data["dimensions"]),
        ("subtask", "by_subtask", data["subtasks"]),
        *((flag, FLAGS[flag][0], present[flag]) for flag in FLAGS if flag in present),
    ]


def _scopes(data: dict) -> list[tuple]:
    """(scope, group, human block, judge block, composite means by group) per scope."""
    scopes = [
        ("overall", "all", data["human"]["overall"], (data["judge"] or {}).get("overall"), None)
    ]
    for scope, key, order in group_scopes(data):
        for group in order:
            block = data["human"][key].get(group) or {}
            judge_block = ((data["judge"] or {}).get(key) or {}).get(group)
            composite_means = data["composite"].get(key, {}).get(group)
            scopes.append((scope, group, block, judge_block, composite_means))
    return scopes


def _overall_columns(data: dict, k: int, win: dict | None) -> dict:
    """The win rates against the anchor and the composite with its interval (overall only)."""
    row = {}
    for method in ("ppi", "judge", "humans"):
        estimate = (win or {}).get(method) or {}
        prefix = f"winrate_{method}"
        row[prefix] = estimate.get("estimate")
        row[f"{prefix}_low"] = estimate.get("low")
        row[f"{prefix}_high"] = estimate.get("high")
    overall = data["composite"]["overall"][k]
    row.update(
        composite_mean=overall["mean"],
        composite_low=overall["low"],
        composite_high=overall["high"],
        composite_n=overall["n"],
    )
    return row


def _group_columns(composite_means, k: int) -> dict:
    """Per dimension or subtask: no win rates, the composite mean without interval."""
    row = {
        f"winrate_{method}{suffix}": None
        for method in ("ppi", "judge", "humans")
        for suffix in ("", "_low", "_high")
    }
    row.update(
        composite_mean=composite_means[k] if composite_means else None,
        composite_low=None,
        composite_high=None,
        composite_n=None,
    )
    return row


def leaderboard_rows(release: Release, data: dict) -> list[dict]:
    """One row per companion per scope (overall, each dimension, subtask and flag value):
    every number."""
    names = {c["id"]: c["name"] for c in data["companions"]}
    ids = [c["id"] for c in data["companions"]]
    anchor = {row["companion"]: row for row in data["anchor_win_rate"]["rows"]}
    excluded = _exclusion_columns(data)
    rows = []
    for scope, group, human, judge, composite_means in _scopes(data):
        for k, c in enumerate(ids):
            row = {
                "release": release.name,
                "fingerprint": release.fingerprint,
                "scope": scope,
                "group": group,
                "companion_id": c,
                "companion": names[c],
                "is_anchor": c == data["anchor"],
            }
            row.update(_bt_columns("human", human, k, names, ids))
            row["human_votes"] = (human.get("games") or [None] * len(ids))[k] if human else None
            row["human_note"] = (human or {}).get("skipped", "")
            if data["judge"] is None:
                row.update(_bt_columns("judge", None, k, names, ids))
                row["judge_note"] = NO_JUDGE
            else:
                row.update(_bt_columns("judge", judge, k, names, ids))
                row["judge_note"] = (judge or {}).get("skipped", "")
            if scope == "overall":
                row.update(_overall_columns(data, k, anchor.get(c)))
            else:
                row.update(_group_columns(composite_means, k))
            row["level"] = data["level"]
            row.update(excluded)
            row["composite_note"] = data["composite"]["note"]  # its encoders; if it separates
            rows.append(row)
    return rows


def _bt_columns(prefix: str, block, k: int, names, ids) -> dict:
    if not block or "elo" not in block or block["elo"][k] is None:
        return {
            f"{prefix}_elo": None,
            f"{prefix}_low": None,
            f"{prefix}_high": None,
            f"{prefix}_rank": None,
            f"{prefix}_better_than": "",
        }
    better = [names[ids[j]] for j, flag in enumerate(block["significant"][k]) if flag == 1]
    return {
        f"{prefix}_elo": block["elo"][k],
        f"{prefix}_low": block["low"][k],
        f"{prefix}_high": block["high"][k],
        f"{prefix}_rank": block["rank"][k],
        f"{prefix}_better_than": "; ".join(better),
    }


CSV_COLUMNS = [
    "release", "fingerprint", "scope", "group", "companion_id", "companion", "is_anchor",
    "human_elo", "human_low", "human_high", "human_rank", "human_votes", "human_better_than",
    "human_note", "judge_elo", "judge_low", "judge_high", "judge_rank", "judge_better_than",
    "judge_note", "winrate_ppi", "winrate_ppi_low", "winrate_ppi_high", "winrate_judge",
    "winrate_judge_low", "winrate_judge_high", "winrate_humans", "winrate_humans_low",
    "winrate_humans_high", "composite_mean", "composite_low", "composite_high", "composite_n",
    "level", "excluded_judgments", "excluded_annotators", "exclusion_reasons", "composite_note",
]  # fmt: skip


def to_csv(release: Release) -> str:
    rows = leaderboard_rows(release, release.result.data)
    return csvexport.text(
        CSV_COLUMNS, ({k: ("" if row[k] is None else row[k]) for k in CSV_COLUMNS} for row in rows)
    )


def difference_rows(release: Release, data: dict) -> list[dict]:
    """One row per flag, source (human, judge) and companion: Elo on the `from` group minus
    Elo on the `on` group with its interval (scoring.releases.flags), or why it is skipped."""
    differences = data.get("flag_differences") or {}
    rows = []
    for flag in ("implicit_need", "evolving_need"):
        entry = differences.get(flag)
        if entry is None:
            continue
        for source in ("human", "judge"):
            block = entry[source]
            for k, companion in enumerate(data["companions"]):
                row = {
                    **_difference_head(release, flag, entry),
                    "source": source,
                    "companion_id": companion["id"],
                    "companion": companion["name"],
                    "level": data["level"],
                }
                if block is None:
                    row["note"] = NO_JUDGE
                elif block.get("skipped"):
                    row["note"] = block["skipped"]
                else:
                    row.update(baseline="field", unit="Elo")
                    for key in ("difference", "low", "high", "significant", "relative"):
                        row[key] = block[key][k]
                    row["field_weight"] = block["field_weight"][k]
                rows.append(row)
        rows.append(_shared_row(release, data, flag, entry))
    return rows


def _difference_head(release: Release, flag: str, entry: dict) -> dict:
    """The columns every row of a flag's differences starts with (release, flag, its groups)."""
    return {
        "release": release.name,
        "fingerprint": release.fingerprint,
        "flag": flag,
        "from_group": entry["from"],
        "on_group": entry["on"],
    }


def _shared_row(release: Release, data: dict, flag: str, entry: dict) -> dict:
    """The field's shared shift on a flag (scoring.releases.shared_shift), once per flag."""
    shared = entry.get("shared") or {"skipped": "not computed for this release"}
    row = {
        **_difference_head(release, flag, entry),
        "source": f"shared ({shared['source']})" if shared.get("source") else "shared",
        "baseline": "absolute",
        "unit": shared.get("unit"),
        "level": data["level"],
        "note": shared.get("skipped") or f"the field's shared shift, from {shared['scores']}",
    }
    if not shared.get("skipped"):
        row.update({key: shared[key] for key in ("difference", "low", "high")})
    return row


DIFFERENCE_COLUMNS = [
    "release", "fingerprint", "flag", "from_group", "on_group", "source", "companion_id",
    "companion", "baseline", "difference", "low", "high", "significant", "unit", "relative",
    "field_weight", "level", "note",
]  # fmt: skip


def to_differences_csv(release: Release) -> str:
    """Where companions struggle, as CSV (empty for releases frozen without flags)."""
    rows = difference_rows(release, release.result.data)
    return csvexport.text(
        DIFFERENCE_COLUMNS,
        ({k: "" if row.get(k) is None else row[k] for k in DIFFERENCE_COLUMNS} for row in rows),
    )


def metadata(release: Release) -> dict:
    result = release.result
    return {
        "name": release.name,
        "id": release.pk,
        "demo_data": release.is_demo,
        "fingerprint": release.fingerprint,
        "fingerprint_of": "sha256 of the canonical JSON of the frozen inputs (keys sorted, no "
        "spaces, UTF-8)",
        "campaign": {"id": release.campaign_id, "name": release.campaign.name},
        "anchor": release.anchor.name,
        "judge": (
            {"name": release.judge.name, "version": release.judge.version}
            if release.judge
            else None
        ),
        "seed": release.seed,
        "n_boot": release.n_boot,
        "level": LEVEL,
        "frozen_at": release.frozen_at.isoformat() if release.frozen_at else None,
        "computed_at": result.computed_at.isoformat(),
        "code_version": result.code_version,
        "results_sha256": result.data_sha256,
    }


def to_json(release: Release) -> str:
    document = {"release": metadata(release), "results": release.result.data}
    return json.dumps(document, ensure_ascii=False, indent=1, allow_nan=False) + "\n"


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ci(value, low, high, digits=0) -> str:
    if value is None:
        return "—"
    if low is None or high is None:
        return fmt_number(value, digits)
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def ordered(data: dict) -> list[int]:
    """Companion positions by human Elo (then judge Elo, then composite), best first."""
    n = len(data["companions"])

    def key(k):
        human = data["human"]["overall"].get("elo") or [None] * n
        judge = ((data["judge"] or {}).get("overall") or {}).get("elo") or [None] * n
        composite = data["composite"]["overall"][k]["mean"]
        return tuple(-(v if v is not None else -math.inf) for v in (human[k], judge[k], composite))

    return sorted(range(n), key=key)


def _markdown_header(release: Release, data: dict, notes: list[str]) -> list[str]:
    level = f"{data['level']:.0%}"
    demo = " (demo data)" if release.is_demo and "demo data" not in release.name else ""
    judge = (
        f"{_md(release.judge.name)} v{release.judge.version}" if release.judge else f"— {NO_JUDGE}"
    )
    return [
        f"# {_md(release.name)}{demo}",
        "",
        f"Fingerprint `{release.fingerprint}` · seed {data['seed']} · {data['n_boot']} bootstrap "
        f"draws · all intervals {level} · anchor **{_md(release.anchor.name)}** · judge {judge}",
        "",
        *(line for note in notes for line in (_md(note), "")),
        f"| Rank | Companion | Human Elo ({level} CI) | Votes | Judge Elo ({level} CI) | "
        f"Win rate vs anchor, PPI++ ({level} CI) | Judge only, uncorrected ({level} CI) | "
        f"Humans only ({level} CI) | Composite ({level} CI){_cannot_separate(data)} | "
        "Significantly better than |",
        "|---:|---|---|---:|---|---|---|---|---|---|",
    ]


def _cannot_separate(data: dict) -> str:
    """Beside the composite's heading when it tells no companions apart (see its note)."""
    return "" if data["composite"].get("separates", True) else " — cannot separate them, see notes"


def _markdown_row(row: dict, has_judge: bool) -> str:
    anchor = " (anchor)" if row["is_anchor"] else ""
    judge = _ci(row["judge_elo"], row["judge_low"], row["judge_high"]) if has_judge else NO_JUDGE
    if row["is_anchor"]:
        win = ["anchor"] * 3
    elif not has_judge:
        win = [NO_JUDGE, NO_JUDGE, _ci(*_win_rate_triple(row, "humans"), 3)]
    else:
        win = [_ci(*_win_rate_triple(row, m), 3) for m in ("ppi", "judge", "humans")]
    return (
        f"| {row['human_rank'] or '—'} | {_md(row['companion'])}{anchor} | "
        f"{_ci(row['human_elo'], row['human_low'], row['human_high'])} | "
        f"{row['human_votes'] or 0:.0f} | {judge} | {win[0]} | {win[1]} | {win[2]} | "
        f"{_ci(row['composite_mean'], row['composite_low'], row['composite_high'], 3)} | "
        f"{_md(row['human_better_than']) or '—'} |"
    )


def _markdown_groups(
    data: dict, rows: dict, scope: str, key: str, title: str, groups: list[str]
) -> list[str]:
    """The human Elo and composite mean per group (dimension, subtask, flag value) and
    companion."""
    if not groups:
        return []
    ids = [c["id"] for c in data["companions"]]
    lines = ["", f"## {title} (human Elo, {data['level']:.0%} CI; composite mean)", ""]
    lines += ["| Companion | " + " | ".join(_md(g) for g in groups) + " |"]
    lines += ["|---|" + "---|" * len(groups)]
    for k in ordered(data):
        cells = []
        for group in groups:
            row = rows[(scope, group, ids[k])]
            human = (
                _ci(row["human_elo"], row["human_low"], row["human_high"])
                if row["human_elo"] is not None
                else "—"
            )
            cells.append(f"{human}; {fmt_number(row['composite_mean'], 3) or '—'}")
        lines.append(f"| {_md(data['companions'][k]['name'])} | " + " | ".join(cells) + " |")
    skipped = [
        f"{g}: {data['human'][key][g]['skipped']}"
        for g in groups
        if data["human"][key][g].get("skipped")
    ]
    if skipped:
        lines += ["", "Skipped (human Elo): " + "; ".join(_md(s) for s in skipped) + "."]
    return lines


def to_markdown(release: Release) -> str:
    data = release.result.data
    rows = {(r["scope"], r["group"], r["companion_id"]): r for r in leaderboard_rows(release, data)}
    ids = [c["id"] for c in data["companions"]]
    excluded = exclusion_note(data.get("exclusions"))
    other_text = other_text_note(data.get("judgments_on_other_text"))
    lines = _markdown_header(release, data, [note for note in (excluded, other_text) if note])
    for k in ordered(data):
        lines.append(_markdown_row(rows[("overall", "all", ids[k])], bool(data["judge"])))
    lines += ["", "Notes:", ""]
    lines += [f"- {_md(note)}" for note in data["notes"] if note not in (excluded, other_text)]
    lines.append(f"- {_md(data['composite']['note'])}")
    for scope, key, groups in group_scopes(data):
        title = f"Per {FLAG_LABELS.get(scope, scope).lower()}"
        lines += _markdown_groups(data, rows, scope, key, title, groups)
    lines += _markdown_struggles(data)
    lines += style_tables.markdown(data, _md)
    return "\n".join(lines) + "\n"


def _difference_cell(block, k: int) -> str:
    if block is None:
        return NO_JUDGE
    if block.get("skipped") or block["difference"][k] is None:
        return "—"
    mark = {1: " ▲", -1: " ▼"}.get(block["significant"][k], "")
    return _ci(block["difference"][k], block["low"][k], block["high"][k], 0) + mark


def _markdown_shared(differences: dict, flags: list[str], level: str) -> list[str]:
    """The field's shared shift per flag, once (absolute scores: Elo cannot show it)."""
    lines = []
    for f in flags:
        shared = differences[f].get("shared") or {"skipped": "not computed for this release"}
        what = f"Field's shared shift, {differences[f]['from']} − {differences[f]['on']}"
        if shared.get("skipped"):
            lines.append(f"- {what}: skipped, {_md(shared['skipped'])}.")
            continue
        digits = 0 if shared["unit"] == "Elo" else 3
        value = _ci(shared["difference"], shared["low"], shared["high"], digits)
        lines.append(
            f"- {what} ({level} CI): {value} {shared['unit']}, from {_md(shared['scores'])}."
        )
    return lines


def _markdown_struggles(data: dict) -> list[str]:
    """Where companions struggle: Elo differences explicit − implicit, stable − evolving."""
    differences = data.get("flag_differences")
    if not differences:
        return []
    level = f"{data['level']:.0%}"
    flags = [f for f in ("implicit_need", "evolving_need") if f in differences]
    headings = [
        f"{source} Elo, {differences[f]['from']} − {differences[f]['on']}, from the field "
        f"({level} CI)"
        for f in flags
        for source in ("Human", "Judge")
    ]
    lines = ["", "## Where companions struggle", "", _md(differences["note"]), ""]
    lines += ["| Companion | " + " | ".join(headings) + " |", "|---|" + "---|" * len(headings)]
    for k in ordered(data):
        cells = [
            _difference_cell(differences[f][source], k)
            for f in flags
            for source in ("human", "judge")
        ]
        lines.append(f"| {_md(data['companions'][k]['name'])} | " + " | ".join(cells) + " |")
    skipped = [
        f"{source} {differences[f]['from']} − {differences[f]['on']}: "
        f"{differences[f][source]['skipped']}"
        for f in flags
        for source in ("human", "judge")
        if (differences[f][source] or {}).get("skipped")
    ]
    lines += [
        "",
        "Each number is relative to the field (the typical companion's gap): ▲ / ▼: the "
        "interval lies above / below 0 (the companion loses / gains more than the field).",
        "",
        *_markdown_shared(differences, flags, level),
    ]
    if skipped:
        lines += ["", "Skipped: " + "; ".join(_md(s) for s in skipped) + "."]
    return lines


def _win_rate_triple(row, method):
    """(estimate, low, high) of a win-rate method in a leaderboard row."""
    prefix = f"winrate_{method}"
    return row[prefix], row[f"{prefix}_low"], row[f"{prefix}_high"]


def file_stem(release: Release) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in release.name.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"release-{release.pk}-{slug[:60] or 'release'}"


FILES = {
    "csv": to_csv,
    "json": to_json,
    "md": to_markdown,
    "differences.csv": to_differences_csv,
    "style.csv": style_tables.to_csv,  # only the header: a release without style control
}


CONTENT_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
    "md": "text/markdown; charset=utf-8",
    "differences.csv": "text/csv; charset=utf-8",
    "style.csv": "text/csv; charset=utf-8",
}


def write_files(release: Release, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, render in FILES.items():
        path = directory / f"{file_stem(release)}.{suffix}"
        path.write_text(render(release), encoding="utf-8")
        written.append(path)
    return written
