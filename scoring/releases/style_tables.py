"""A release's style control (results.style_control, see scoring.releases.style) as the page's
table and plot, its own CSV and the Markdown section; from the stored numbers only (no numpy:
the pages import this module)."""

from h2htalk import csvexport
from scoring.releases.plots import strengths_svg

COVARIATE_LABELS = {
    "length": "Length (log ratio of characters)",
    "list_items": "Markdown list items",
    "headers": "Markdown headers",
    "actions": "Persona actions in (…) or （…）",
    "emoji": "Emoji",
    "questions": "Question marks (? or ？)",
}


def _elo(block: dict, k: int):
    """(elo, low, high, "elo", "[low, high]") as the leaderboard's cells, or None."""
    if block["elo"][k] is None:
        return None
    elo, low, high = block["elo"][k], block["low"][k], block["high"][k]
    return (elo, low, high, f"{elo:.0f}", f"[{low:.0f}, {high:.0f}]")


def _order(section: dict, n: int) -> list[int]:
    """Companions by controlled Elo, best first (those without votes last, in results order)."""
    elo = section["controlled"]["elo"]
    return sorted(range(n), key=lambda k: (elo[k] is None, -(elo[k] or 0.0)))


def companion_rows(data: dict) -> list[dict]:
    """Per companion (by controlled Elo): plain and controlled Elo, interval, rank, change."""
    section = data.get("style_control") or {}
    if "controlled" not in section:
        return []
    companions = data["companions"]
    rows = []
    for k in _order(section, len(companions)):
        change = section["rank_change"][k]
        rows.append(
            {
                "id": companions[k]["id"],
                "name": companions[k]["name"],
                "plain": _elo(section["plain"], k),
                "plain_rank": section["plain"]["rank"][k],
                "controlled": _elo(section["controlled"], k),
                "controlled_rank": section["controlled"]["rank"][k],
                "change": change,
                "change_text": "" if change is None else f"{change:+d}" if change else "0",
                "votes": section["controlled"]["games"][k],
            }
        )
    return rows


def covariate_rows(data: dict) -> list[dict]:
    section = data.get("style_control") or {}
    rows = []
    for row in section.get("covariates") or []:
        used = row["used"]
        rows.append(
            {
                **row,
                "label": COVARIATE_LABELS.get(row["feature"], row["feature"]),
                "text": f"{row['coefficient']:+.3f}" if used else "",
                "ci": f"[{row['low']:+.3f}, {row['high']:+.3f}]" if used else "",
                "per_unit_text": f"{row['per_unit']:+.3f}" if used else "",
            }
        )
    return rows


def page_context(data: dict) -> dict | None:
    """The page's style-control section (None: the release has none)."""
    section = data.get("style_control")
    if section is None:
        return None
    rows = companion_rows(data)
    series = (
        ("plain", "Humans, plain", "#2c5d8f"),
        ("controlled", "Humans, style controlled", "#7a3e9d"),
    )
    plot = strengths_svg(rows, data["level"], series=series) if rows else ""
    return {"section": section, "rows": rows, "covariates": covariate_rows(data), "plot": plot}


CSV_COLUMNS = [
    "release", "fingerprint", "kind", "companion_id", "name", "plain_elo", "plain_low",
    "plain_high", "plain_rank", "controlled_elo", "controlled_low", "controlled_high",
    "controlled_rank", "rank_change", "votes", "coefficient", "low", "high", "per_unit",
    "scale", "used", "level", "note",
]  # fmt: skip


def csv_rows(release, data: dict) -> list[dict]:
    """One row per companion (kind "companion") and per covariate (kind "covariate")."""
    section = data.get("style_control")
    if section is None:
        return []
    base = {"release": release.name, "fingerprint": release.fingerprint, "level": data["level"]}
    if section.get("skipped"):
        return [{**base, "kind": "skipped", "note": section["skipped"]}]
    out = []
    for row in companion_rows(data):
        entry = {**base, "kind": "companion", "companion_id": row["id"], "name": row["name"]}
        for key in ("plain", "controlled"):
            elo = row[key] or (None, None, None)
            entry.update({f"{key}_elo": elo[0], f"{key}_low": elo[1], f"{key}_high": elo[2]})
            entry[f"{key}_rank"] = row[f"{key}_rank"]
        entry.update(rank_change=row["change"], votes=row["votes"])
        out.append(entry)
    for row in section["covariates"]:
        keys = ("coefficient", "low", "high", "per_unit", "scale", "used")
        out.append(
            {**base, "kind": "covariate", "name": row["feature"], **{k: row[k] for k in keys}}
        )
    return out


def to_csv(release) -> str:
    """The style control of a release as CSV (only the header: a release without it)."""
    rows = csv_rows(release, release.result.data)
    return csvexport.text(
        CSV_COLUMNS,
        ({k: "" if row.get(k) is None else row[k] for k in CSV_COLUMNS} for row in rows),
    )


def _cell(elo) -> str:
    return "—" if elo is None else f"{elo[3]} {elo[4]}"


def markdown(data: dict, md) -> list[str]:
    """The Markdown section (md: formats._md, escaping a cell)."""
    section = data.get("style_control")
    if section is None:
        return []
    level = f"{data['level']:.0%}"
    lines = ["", "## Style control", "", md(section["note"]), ""]
    if section.get("skipped"):
        return [*lines, f"Skipped: {md(section['skipped'])}."]
    lines += [
        f"| Companion | Plain Elo ({level} CI) | Plain rank | Controlled Elo ({level} CI) | "
        "Controlled rank | Rank change |",
        "|---|---|---:|---|---:|---:|",
    ]
    for row in companion_rows(data):
        lines.append(
            f"| {md(row['name'])} | {_cell(row['plain'])} | {row['plain_rank'] or '—'} | "
            f"{_cell(row['controlled'])} | {row['controlled_rank'] or '—'} | "
            f"{row['change_text'] or '—'} |"
        )
    lines += ["", f"| Covariate | Coefficient ({level} CI) | Per unit |", "|---|---|---:|"]
    for row in covariate_rows(data):
        cell = f"{row['text']} {row['ci']}" if row["used"] else "left out (no variation)"
        lines.append(f"| {md(row['label'])} | {cell} | {row['per_unit_text'] or '—'} |")
    return [*lines, "", md(section["method"]) + "."]
