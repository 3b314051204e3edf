"""Storing calibrated judges: numbered versions per name, and importing a document (the same
document twice is stored once; a different one under a taken name and version is refused)."""

import json

from django.db import IntegrityError, transaction
from django.db.models import Max

from scoring.calibration.document import DocumentError, canonical, validate_document
from scoring.models import CalibratedJudge


def next_version(name: str) -> int:
    top = CalibratedJudge.objects.filter(name=name).aggregate(top=Max("version"))["top"]
    return (top or 0) + 1


def store_new_version(document: dict, campaign, user) -> CalibratedJudge:
    """Save under the next free version of its name (retried if two saves race)."""
    for _ in range(5):
        document["version"] = next_version(document["name"])
        try:
            with transaction.atomic():
                return CalibratedJudge.objects.create(
                    name=document["name"],
                    version=document["version"],
                    document=document,
                    campaign=campaign,
                    created_by=user,
                )
        except IntegrityError:
            continue
    raise IntegrityError("could not find a free version number")


def import_document(document, *, name: str | None = None, user=None):
    """Store a document; returns (judge, created).

    Without `name` it keeps its name and version: the same document already stored is not
    stored again (created False); another document under that name and version is refused.
    With `name` it is stored as the next version of that name, recording where it came from.
    """
    document = validate_document(json.loads(json.dumps(document)))
    if name:
        document["imported_from"] = {"name": document["name"], "version": document["version"]}
        document["name"] = name.strip()
        return store_new_version(document, None, user), True
    existing = CalibratedJudge.objects.filter(
        name=document["name"], version=document["version"]
    ).first()
    if existing is not None:
        if canonical(existing.document) == canonical(document):
            return existing, False
        raise DocumentError(
            f"{document['name']} v{document['version']} already exists with different weights: "
            "import it under another name"
        )
    try:
        with transaction.atomic():
            judge = CalibratedJudge.objects.create(
                name=document["name"],
                version=document["version"],
                document=document,
                created_by=user,
            )
    except IntegrityError as error:  # stored meanwhile by someone else
        raise DocumentError(
            f"{document['name']} v{document['version']} was just stored by someone else"
        ) from error
    return judge, True
