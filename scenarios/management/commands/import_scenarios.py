from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from scenarios.import_formats import FORMATS
from scenarios.importers import ImportFailed, count_lines, run_import
from scenarios.management.import_options import add_dry_run_and_user, author
from scenarios.models import Scenario
from scenarios.taxonomy import Subtask


class Command(BaseCommand):
    help = "Import scenarios from JSONL/CSV/H2HTalk release/ShareGPT files (all or nothing)."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+")
        parser.add_argument("--format", default="auto", choices=["auto", *FORMATS])
        parser.add_argument("--default-subtask", default="", choices=["", *Subtask.values])
        parser.add_argument(
            "--state",
            default=Scenario.State.DRAFT,
            choices=Scenario.State.values,
            help="state of new scenarios whose row names none",
        )
        add_dry_run_and_user(parser, "username recorded as the author")

    def handle(self, *args, **options):
        user = author(options)
        failed = False
        for path in options["files"]:
            try:
                stream = open(path, "rb")  # noqa: SIM115 - closed below
            except OSError as error:
                raise CommandError(f"{path}: {error.strerror}") from error
            with stream, tqdm(total=count_lines(stream), desc=path, unit="row") as bar:
                try:
                    report = run_import(
                        stream,
                        path,
                        user,
                        dry_run=options["dry_run"],
                        fmt=options["format"],
                        default_subtask=options["default_subtask"],
                        initial_state=options["state"],
                        progress=lambda n: bar.update(n - bar.n),
                    )
                except ImportFailed as refused:
                    report = refused.report
            for error in report.errors:
                self.stderr.write(f"{path}: {error}")
            if report.error_count > len(report.errors):
                self.stderr.write(f"{path}: … and {report.error_count - len(report.errors)} more")
            if not report.ok:
                failed = True
                self.stderr.write(f"{path}: {report.error_count} error(s); nothing written")
                continue
            self.stdout.write(
                f"{path}: {report.rows} rows ({report.format}): {report.created} new, "
                f"{report.updated} updated, {report.unchanged} unchanged, "
                f"{report.duplicates} duplicates"
                + (" [dry run, nothing written]" if options["dry_run"] else "")
            )
        if failed:
            raise CommandError("some files had errors and were not imported")
