"""Print a release's leaderboard (Markdown) and write release-<id>-<name>.csv/.json/.md. A release
without numbers is computed first. --check recomputes the numbers from the frozen inputs and fails
unless they equal the stored ones bit for bit (and every input is unchanged in the database)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from scoring.management.cli import command_errors
from scoring.models import Release, ReleaseResult
from scoring.releases import data as release_data
from scoring.releases import errors, formats
from scoring.releases import service as releases


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("release", help="release id or exact name")
        parser.add_argument(
            "--check",
            action="store_true",
            help="verify the inputs' fingerprint and reproduce the numbers bit for bit",
        )
        parser.add_argument(
            "--out", default=".", help="folder for the CSV, JSON and Markdown files (default: .)"
        )
        parser.add_argument("--no-files", action="store_true", help="print only")

    def handle(self, *args, **options):
        with command_errors(errors.ReleaseError):
            release = releases.find_release(options["release"])
        has_numbers = (
            release.state == Release.State.READY
            and ReleaseResult.objects.filter(release=release).exists()
        )
        if not has_numbers:
            self.stderr.write(f"{release.name}: no numbers yet, computing them now …")
            could_not = f"{release.name} could not be computed: "
            with command_errors(errors.ReleaseError, prefix=could_not):
                releases.compute(release, progress=self._progress)
        elif options["check"]:
            outcome = releases.check(release, progress=self._progress)
            if not outcome.ok:
                raise CommandError(f"CHECK FAILED for {release.name}: {outcome.message}")
            self.stderr.write(self.style.SUCCESS(f"Check passed: {outcome.message}."))
        release = releases.find_release(str(release.pk))
        self.stdout.write(formats.to_markdown(release))
        if not options["no_files"]:
            for path in formats.write_files(release, Path(options["out"])):
                self.stderr.write(f"wrote {path}")

    def _progress(self, done, total, message="scoring pairs with the judge"):
        if total and (done == total or done % (10 * release_data.PAIR_CHUNK) == 0):
            self.stderr.write(f"  {message}: {done}/{total}")
