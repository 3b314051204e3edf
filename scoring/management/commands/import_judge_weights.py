"""Load a calibrated judge's JSON document (from export_judge_weights, the page or the API); it
then scores responses exactly as where it was made."""

from django.core.management.base import BaseCommand

from scoring.calibration.document import DocumentError
from scoring.calibration.versions import import_document
from scoring.management.cli import command_errors, read_json


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("file", help="the JSON document ('-' for stdin)")
        parser.add_argument(
            "--name",
            help="store it as the next version of this name (default: keep name and version)",
        )

    def handle(self, *args, **options):
        document = read_json(options["file"])
        with command_errors(DocumentError):
            judge, created = import_document(document, name=options["name"])
        if created:
            self.stdout.write(f"imported {judge} (id {judge.pk})")
        else:
            self.stdout.write(f"{judge} (id {judge.pk}) is already here with the same document")
