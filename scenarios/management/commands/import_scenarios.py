from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from scenarios.importers import FORMATS, build_plan, count_lines, write_plan
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
        parser.add_argument("--dry-run", action="store_true", help="check and count only")
        parser.add_argument("--user", default="", help="username recorded as the author")

    def handle(self, *args, **options):
        author = None
        if options["user"]:
            author = get_user_model().objects.filter(username=options["user"]).first()
            if author is None:
                raise CommandError(f"no user {options['user']!r}")
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
                        plan, author, options["state"], progress=lambda n: bar.update(n - bar.n)
                    )
            self.stdout.write(
                f"{path}: {report.rows} rows ({report.format}): {report.created} new, "
                f"{report.updated} updated, {report.unchanged} unchanged, "
                f"{report.duplicates} duplicates"
                + (" [dry run, nothing written]" if options["dry_run"] else "")
            )
        if failed:
            raise CommandError("some files had errors and were not imported")
