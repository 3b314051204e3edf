"""Write a campaign's or a release's dataset folder (JSONL + README.md) or a zip of it. The
views, the API and `manage.py export_hf` call these."""

import io
import json
import tempfile
import zipfile
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from annotation import exclusions
from annotation.blinding import blind_names, blind_text
from annotation.campaigns import campaign_overview
from annotation.models import Campaign
from annotation.study.models import Participant
from scoring.agreement import services as agreement
from scoring.hfexport import card
from scoring.hfexport.pairs import BOTH_UNACCEPTABLE, TIE, preference_pairs
from scoring.hfexport.rows import DIMENSIONS, annotator_pseudonyms, judgment_rows


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def _qualification(campaign: Campaign) -> str:
    if not campaign.requires_qualification:
        return "not required: annotators rated without a practice phase."
    from annotation.qualification.models import PracticeItem, QualificationRule

    rule = QualificationRule.objects.filter(campaign=campaign).first()
    items = PracticeItem.objects.filter(campaign=campaign).count()
    text = f"required before rating ({items} practice items with known answers"
    if rule is not None:
        text += f"; pass: accuracy ≥ {rule.min_accuracy:g}"
        if rule.min_direction is not None:
            text += f", direction agreement ≥ {rule.min_direction:g}"
        text += f"; {rule.attempts} attempt(s)"
    return text + "). Practice answers are stored apart and are not in this dataset."


def _blinding(campaign: Campaign, include_companions: bool) -> str:
    text = (
        "annotators saw the scenario and two responses, labelled by screen side only; the side "
        "of each response was drawn per assignment and items were handed out in random order; "
        "the names of the companions, their model ids and the generation runs were hidden in "
        "every text shown (`[name hidden]`)."
    )
    if include_companions:
        return text + " This export names the companions (`companion_a`, `companion_b`)."
    return text + " This export keeps them hidden: no companion is named in it."


def _exclusion_facts(campaign: Campaign, rows: list[dict]) -> tuple[str, list[dict]]:
    summary = exclusions.summary(campaign)
    if not summary:
        return "no annotator was excluded.", []
    pseudonyms = annotator_pseudonyms(campaign)
    in_export = {}
    for row in rows:
        if row["excluded"]:
            in_export[row["annotator"]] = in_export.get(row["annotator"], 0) + 1
    by_reason: dict[str, list[str]] = {}
    for entry in summary:
        name = pseudonyms.get(entry["annotator_id"], "an annotator without judgments")
        by_reason.setdefault(entry["reason"], []).append(name)
    listed = [
        {
            "reason": reason,
            "text": f"{', '.join(names)} "
            f"({sum(in_export.get(n, 0) for n in names)} judgments in this export)",
        }
        for reason, names in sorted(by_reason.items())
    ]
    total = sum(in_export.values())
    text = (
        f"{len(summary)} annotator(s) excluded by the researchers, {total} judgment(s) in this "
        "export marked `excluded` and left out of the preference pairs and of α, with reasons:"
    )
    return text, listed


def _crowdsourced(campaign: Campaign) -> bool:
    """Whether anyone joined through the campaign's study link (a crowd platform)."""
    return Participant.objects.filter(campaign=campaign).exists()


def facts(campaign: Campaign, rows, pairs, left_out, source: str, include_companions) -> dict:
    """Everything the card states, read from the campaign's records."""
    hidden = [] if include_companions else blind_names(campaign)
    report = agreement.report_for(campaign).data
    exclusion_text, exclusion_rows = _exclusion_facts(campaign, rows)
    pairing = campaign.get_pairing_display()
    overview = campaign_overview(campaign)  # the campaign page's counts
    return {
        "title": blind_text(source, hidden),
        "source": blind_text(source, hidden),
        "exported_at": timezone.now().date().isoformat(),
        "languages": sorted({row["scenario"]["language"] for row in rows}),
        "judgments": len(rows),
        "comparisons": len({row["comparison_id"] for row in rows}),
        "scenarios": len({row["scenario"]["id"] for row in rows}),
        "annotators": len({row["annotator"] for row in rows}),
        "pairs": len(pairs),
        "ties": left_out[TIE],
        "both_unacceptable": left_out[BOTH_UNACCEPTABLE],
        "blinding": _blinding(campaign, include_companions),
        "overlap": campaign.overlap,
        "comparisons_total": overview["regular"],
        "comparisons_at_k": overview["complete"],
        "crowdsourced": _crowdsourced(campaign),
        "pairing": str(pairing),
        "gold": f"{sum(1 for r in rows if r['is_gold'])} judgments on gold items (`is_gold`)",
        "qualification": _qualification(campaign),
        "exclusion_text": exclusion_text,
        "exclusions": exclusion_rows,
        "alpha": report["overall"],
        "alpha_judgments": f"{report['judgments']} of the campaign's {report['judgments_total']}",
    }


def write_folder(
    campaign: Campaign, folder: Path, rows: list[dict], source: str, include_companions: bool
) -> dict:
    """Write judgments, preference pairs and the card into `folder`; returns the card facts."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pairs, left_out = preference_pairs(rows)
    stated = facts(campaign, rows, pairs, left_out, source, include_companions)
    hidden = [] if include_companions else blind_names(campaign)
    _write_jsonl(folder / card.JUDGMENTS_FILE, rows)
    _write_jsonl(folder / card.PAIRS_FILE, pairs)
    readme = card.header(stated, DIMENSIONS, include_companions) + "\n" + card.body(stated, hidden)
    (folder / "README.md").write_text(readme, encoding="utf-8")
    return stated


def export_campaign(campaign: Campaign, folder, include_companions=False, progress=None) -> dict:
    """Every judgment of the campaign (excluded ones marked)."""
    with transaction.atomic():  # one consistent read (REPEATABLE READ on PostgreSQL: one snapshot)
        rows = judgment_rows(campaign, include_companions=include_companions, progress=progress)
        return write_folder(campaign, folder, rows, campaign.name, include_companions)


def export_release(release, folder, include_companions=False, progress=None) -> dict:
    """The judgments a release froze (its counted votes: exclusions were applied when it was
    frozen)."""
    if not release.inputs:
        raise ValueError("the release has no frozen inputs yet")
    ids = release.inputs["judgments"]["id"]
    campaign = release.campaign
    rows = judgment_rows(
        campaign, ids=ids, include_companions=include_companions, progress=progress
    )
    for row in rows:  # excluded at freezing time: none of the frozen votes
        row["excluded"], row["exclusion_reason"] = False, ""
    return write_folder(campaign, folder, rows, release.name, include_companions)


def zipped(write, name: str) -> bytes:
    """The folder `write(folder)` makes, as a zip whose entries sit under `name/`."""
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / name
        write(folder)
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(folder.iterdir()):
                archive.write(path, f"{name}/{path.name}")
    return buffer.getvalue()
