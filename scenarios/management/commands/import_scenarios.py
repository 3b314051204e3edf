from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from scenarios.import_formats import FORMATS
from scenarios.importers import build_plan, count_lines, write_plan
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
                plan = build_plan(
                    stream,
                    path,
                    fmt=options["format"],
                    default_subtask=options["default_subtask"],
                    initial_state=options["state"],
                    progress=lambda n: bar.update(n - bar.n),
                )
            report = plan.report
            for error in report.errors:
                self.stderr.write(f"{path}: {error}")
            if report.errors:
                failed = True
                self.stderr.write(f"{path}: {len(report.errors)} error(s); nothing written")
                continue
            if not options["dry_run"]:
                with tqdm(total=len(plan.creates) + len(plan.updates), desc="writing") as bar:
                    write_plan(
                        plan, user, options["state"], progress=lambda n: bar.update(n - bar.n)
                    )
            self.stdout.write(
                f"{path}: {report.rows} rows ({report.format}): {report.created} new, "
                f"{report.updated} updated, {report.unchanged} unchanged, "
                f"{report.duplicates} duplicates"
                + (" [dry run, nothing written]" if options["dry_run"] else "")
            )
        if failed:
            raise CommandError("some files had errors and were not imported")
