"""Write a calibrated judge's versioned JSON document (schema h2htalk.calibrated-judge/1) to a
file or stdout."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from h2htalk.params import parse_int
from scoring.calibration.document import export_json
from scoring.models import CalibratedJudge


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("judge", help="calibrated judge id, or name (latest version)")
        parser.add_argument("--judge-version", type=int, help="version of NAME (default: latest)")
        parser.add_argument("--output", "-o", help="file to write (default: stdout)")

    def handle(self, *args, **options):
        key = options["judge"]
        judges = CalibratedJudge.objects.filter(name=key)
        if options["judge_version"]:
            judges = judges.filter(version=options["judge_version"])
        judge = judges.order_by("-version").first()
        if judge is None and parse_int(key) is not None and not options["judge_version"]:
            judge = CalibratedJudge.objects.filter(pk=parse_int(key)).first()
        if judge is None:
            raise CommandError(f"no calibrated judge {key!r}")
        text = export_json(judge)
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
            self.stderr.write(f"{judge} written to {options['output']}")
        else:
            self.stdout.write(text, ending="")
