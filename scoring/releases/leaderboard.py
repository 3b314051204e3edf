"""The leaderboard page of a computed release: the rows of its tables and every plot, from the
stored numbers (Release.result.data) only."""

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from h2htalk.display import group_label
from scoring.charts import reliability_svg
from scoring.releases import style_tables
from scoring.releases.formats import group_scopes, ordered
from scoring.releases.plots import (
    group_heatmap_svg,
    significance_svg,
    strengths_svg,
    win_rate_svg,
)

# What a group table's heading says it is a part of, in the page's language (the stored numbers
# and the exports keep the English of scoring.releases.flags and h2htalk.display.group_name).
KINDS = {
    "dimension": gettext_lazy("dimension"),
    "subtask": gettext_lazy("subtask"),
    "implicit_need": gettext_lazy("implicit-need flag"),
    "evolving_need": gettext_lazy("evolving-need flag"),
    "risk_level": gettext_lazy("risk level"),
}


def _estimate(entry):
    if not entry:
        return None
    low, high = entry["low"], entry["high"]
    return {
        "value": entry["estimate"],
        "text": f"{entry['estimate']:.3f}",
        "ci": f"[{low:.3f}, {high:.3f}]" if low is not None and high is not None else "",
        "low": low,
        "high": high,
        "significant": entry.get("significant", 0),
        "lam": entry.get("lam"),
        "n_labelled": entry.get("n_labelled"),
        "n_unlabelled": entry.get("n_unlabelled"),
    }


def _elo_triple(block, k):
    """(elo, low, high, "elo", "[low, high]") of companion k, or None."""
    if not block or not block.get("elo") or block["elo"][k] is None:
        return None
    elo, low, high = block["elo"][k], block["low"][k], block["high"][k]
    return (elo, low, high, f"{elo:.0f}", f"[{low:.0f}, {high:.0f}]")


def _mean(composite: dict) -> dict:
    """A composite entry with its numbers formatted for the page."""
    mean, low, high = composite.get("mean"), composite.get("low"), composite.get("high")
    text = f"{mean:.3f}" if mean is not None else ""
    ci = f"[{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return {**composite, "text": text, "ci": ci}


def _group_tables(data: dict, order, names, scopes) -> list[dict]:
    """Per group of each (scope, results key, groups) in `scopes`: human (and judge) Elo with
    CI and rank per companion."""
    tables = []
    for title, key, groups in scopes:
        for group in groups:
            block = data["human"][key].get(group) or {}
            judge_block = ((data["judge"] or {}).get(key) or {}).get(group)
            composite = (data["composite"].get(key) or {}).get(group) or [None] * len(names)
            rows = []
            for k in order:
                rows.append(
                    {
                        "name": names[k],
                        "human": _elo_triple(block, k),
                        "human_rank": (block.get("rank") or [None] * len(names))[k],
                        "votes": (block.get("games") or [None] * len(names))[k],
                        "judge": _elo_triple(judge_block, k),
                        "judge_rank": ((judge_block or {}).get("rank") or [None] * len(names))[k],
                        "composite": composite[k],
                        "composite_text": f"{composite[k]:.3f}" if composite[k] is not None else "",
                    }
                )
            tables.append(
                {
                    "kind": KINDS.get(title, title),
                    "open": title in ("dimension", "implicit_need", "evolving_need"),
                    "group": group,
                    "label": group_label(group),
                    "votes": block.get("votes", 0),
                    "skipped": block.get("skipped", ""),
                    "judge_skipped": (judge_block or {}).get("skipped", ""),
                    "rows": rows,
                }
            )
    return tables


def _table_row(data: dict, k: int, names: list[str], ids: list[int], anchor_rows: dict) -> dict:
    """Companion k's row of the overall table."""
    n = len(ids)
    human = data["human"]["overall"]
    judge = (data["judge"] or {}).get("overall")
    win = anchor_rows.get(ids[k]) or {}
    significant = human.get("significant") or [[0] * n] * n
    return {
        "id": ids[k],
        "name": names[k],
        "is_anchor": ids[k] == data["anchor"],
        "human": _elo_triple(human, k),
        "human_rank": (human.get("rank") or [None] * n)[k],
        "votes": (human.get("games") or [0] * n)[k],
        "judge": _elo_triple(judge, k),
        "judge_rank": ((judge or {}).get("rank") or [None] * n)[k],
        "ppi": _estimate(win.get("ppi")),
        "judge_only": _estimate(win.get("judge")),
        "humans_only": _estimate(win.get("humans")),
        "ppi_reason": win.get("ppi_reason", ""),
        "win_note": win.get("note", ""),
        "composite": _mean(data["composite"]["overall"][k]),
        "better_than": [names[j] for j in range(n) if significant[k][j] == 1],
        "worse_than": [names[j] for j in range(n) if significant[k][j] == -1],
    }


def _elo_by_subtask(data: dict, source: str, n: int, with_votes: bool) -> tuple[dict, dict]:
    """Elo per subtask and companion of the humans (or the judge), and the hover notes."""
    level = data["level"]
    values, extra = {}, {}
    for group in data["subtasks"]:
        block = data[source]["by_subtask"].get(group) or {}
        values[group] = block.get("elo") or [None] * n
        for k in range(n):
            if block.get("low") and block["low"][k] is not None:
                votes = f", {block['games'][k]:.0f} votes" if with_votes else ""
                extra[(group, k)] = (
                    f" ({level:.0%} CI {block['low'][k]:.0f} to {block['high'][k]:.0f}{votes})"
                )
    return values, extra


def _heatmaps(data: dict, names: list[str], order: list[int]) -> dict:
    subtasks, n = data["subtasks"], len(names)
    plots = {}
    composite = data["composite"].get("by_subtask") or {}
    if composite:
        present = [g for g in subtasks if g in composite]
        plots["composite_heatmap"] = group_heatmap_svg(
            names, order, present, composite, _("composite"), 3
        )
    values, extra = _elo_by_subtask(data, "human", n, with_votes=True)
    plots["human_heatmap"] = group_heatmap_svg(
        names, order, subtasks, values, _("human Elo"), 0, centre=1000, extra=extra
    )
    if data["judge"]:
        values, extra = _elo_by_subtask(data, "judge", n, with_votes=False)
        plots["judge_heatmap"] = group_heatmap_svg(
            names, order, subtasks, values, _("judge Elo"), 0, centre=1000, extra=extra
        )
    return plots


def _matrices(data: dict, names: list[str], order: list[int]) -> dict:
    human = data["human"]["overall"]
    judge = (data["judge"] or {}).get("overall")
    plots = {}
    if human.get("p_better"):
        plots["human_significance"] = significance_svg(names, human, order, _("Humans"))
    if judge and judge.get("p_better"):
        plots["judge_significance"] = significance_svg(names, judge, order, _("Judge"))
    if any(any(row) for row in data["win_matrix"]["games"]):
        plots["win_rate_plot"] = win_rate_svg(
            names, data["win_matrix"]["wins"], data["win_matrix"]["games"], order
        )
    return plots


def _methods(data: dict) -> list[str]:
    human = data["human"]["overall"]
    judge = (data["judge"] or {}).get("overall")
    methods = [human.get("method") or f"Humans: {human.get('skipped', 'no votes')}."]
    if judge:  # (the stored method notes are English: the page shows them as such, lang="en")
        methods.append(judge.get("method") or f"Judge: {judge.get('skipped')}.")
    return methods


def leaderboard_context(data: dict) -> dict:
    """Rows of the leaderboard table and every plot of the page."""
    names = [c["name"] for c in data["companions"]]
    ids = [c["id"] for c in data["companions"]]
    order = ordered(data)
    anchor_rows = {row["companion"]: row for row in data["anchor_win_rate"]["rows"]}
    rows = [_table_row(data, k, names, ids, anchor_rows) for k in order]
    level = data["level"]
    context = {
        "data": data,
        "rows": rows,
        "level_percent": f"{level:.0%}",
        "strengths_plot": strengths_svg(
            [{"name": r["name"], "human": r["human"], "judge": r["judge"]} for r in rows], level
        ),
        "anchor_name": names[ids.index(data["anchor"])],
        "win_note": next((r["win_note"] for r in rows if r["win_note"]), ""),
        **_matrices(data, names, order),
        **_heatmaps(data, names, order),
    }
    if data.get("reliability"):
        context["reliability_plot"] = reliability_svg(data["reliability"])
    scopes = group_scopes(data)
    context["groups"] = _group_tables(data, order, names, scopes[:2])
    context["flag_groups"] = _group_tables(data, order, names, scopes[2:])
    context["struggles"] = _struggles(data, names, order)
    context["methods"] = _methods(data)
    context["style"] = style_tables.page_context(data)
    return context


def _difference(block, k):
    """(difference, "±d", "[low, high]", significant) of companion k, or None."""
    if not block or block.get("skipped") or block["difference"][k] is None:
        return None
    value, low, high = block["difference"][k], block["low"][k], block["high"][k]
    return {
        "value": value,
        "text": f"{value:+.0f}",
        "ci": f"[{low:+.0f}, {high:+.0f}]",
        "significant": block["significant"][k],
    }


def _struggles(data: dict, names: list[str], order: list[int]) -> dict | None:
    """Where companions struggle: per companion the Elo differences explicit − implicit and
    stable − evolving, humans and judge (None: a release frozen without flags)."""
    differences = data.get("flag_differences")
    if not differences:
        return None
    flags = [f for f in ("implicit_need", "evolving_need") if f in differences]
    sources = ["human", "judge"] if data["judge"] else ["human"]
    columns = [
        {
            "flag": f,
            "source": source,
            "title": _title(differences[f]),
            "skipped": (differences[f][source] or {}).get("skipped", ""),
        }
        for f in flags
        for source in sources
    ]
    rows = [
        {
            "name": names[k],
            "cells": [_difference(differences[c["flag"]][c["source"]], k) for c in columns],
        }
        for k in order
    ]
    for c in columns:  # the field each column is read from: its own gap, relative to the mean
        field = (differences[c["flag"]][c["source"]] or {}).get("field")
        c["field"] = f"{field['difference']:+.0f}" if field else ""
    shared = [_shared(differences[f], f) for f in flags]
    return {"columns": columns, "rows": rows, "note": differences["note"], "shared": shared}


def _title(entry: dict) -> str:
    """ "explicit need − implicit need", in the page's language."""
    return f"{group_label(entry['from'])} − {group_label(entry['on'])}"


def _shared(entry: dict, flag: str) -> dict:
    """The field's shared shift on a flag, for the page (scoring.releases.shared_shift)."""
    title = _title(entry)
    shared = entry.get("shared") or {"skipped": _("not computed for this release")}
    if shared.get("skipped"):
        return {"flag": flag, "title": title, "skipped": shared["skipped"]}
    digits = 0 if shared["unit"] == "Elo" else 3
    return {
        "flag": flag,
        "title": title,
        "text": f"{shared['difference']:+.{digits}f}",
        "ci": f"[{shared['low']:+.{digits}f}, {shared['high']:+.{digits}f}]",
        "unit": shared["unit"],
        "scores": shared["scores"],
    }
