import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from scoring.calibration.document import DocumentError
from scoring.calibration.versions import import_document


class Command(BaseCommand):
    help = (
        "Load a calibrated judge's JSON document (from export_judge_weights, the page or the "
        "API); it then scores responses exactly as where it was made."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="the JSON document ('-' for stdin)")
        parser.add_argument(
            "--name",
            help="store it as the next version of this name (default: keep name and version)",
        )

    def handle(self, *args, **options):
        path = options["file"]
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
            document = json.loads(text)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CommandError(f"cannot read {path}: {error}") from error
        try:
            judge, created = import_document(document, name=options["name"])
        except DocumentError as error:
            raise CommandError(str(error)) from error
        if created:
            self.stdout.write(f"imported {judge} (id {judge.pk})")
        else:
            self.stdout.write(f"{judge} (id {judge.pk}) is already here with the same document")
