import sys

from django.core.management.base import BaseCommand

from h2htalk import backup


class Command(BaseCommand):
    help = "Write the whole study (scenarios, responses, judgments, judges, releases) as JSONL."

    def add_arguments(self, parser):
        parser.add_argument("--output", "-o", default="-", help="file path, - for stdout")

    def handle(self, *args, **options):
        if options["output"] == "-":
            counts = backup.dump(sys.stdout)
        else:
            with open(options["output"], "w", encoding="utf-8") as stream:
                counts = backup.dump(stream)
        summary = ", ".join(f"{n} {label}" for label, n in counts.items() if n)
        self.stderr.write(f"dumped: {summary}")
