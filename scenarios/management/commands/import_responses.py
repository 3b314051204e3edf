from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from scenarios.companions.import_formats import Input
from scenarios.companions.imports import (
    ResponseImportFailed,
    build_response_plan,
    count_input_lines,
    write_responses,
)
from scenarios.management.import_options import add_dry_run_and_user, author


class Command(BaseCommand):
    help = (
        "Import companion responses into an import run (all or nothing per PATH): a directory "
        "or .zip in the H2HTalk evaluator layout (<model>/<subtask>.jsonl), or a platform .jsonl."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument(
            "--run", default="", help="name of the import run (default: the file or folder name)"
        )
        add_dry_run_and_user(parser, "username recorded as the run's author")

    def handle(self, *args, **options):
        user = author(options)
        failed = False
        for path in options["paths"]:
            source = Input(path)
            try:
                total = count_input_lines(source)
            except OSError as error:
                raise CommandError(f"{path}: {error.strerror or error}") from error
            if options["dry_run"]:
                with tqdm(total=total, desc=f"checking {path}", unit="line") as bar:
                    report = build_response_plan(
                        source, options["run"], progress=lambda n: bar.update(n - bar.n)
                    ).report
            else:
                try:  # one pass: checked as it is written, nothing written if anything is bad
                    with tqdm(total=total, desc=f"importing {path}", unit="line") as bar:
                        report = write_responses(
                            source, options["run"], user, progress=lambda n: bar.update(n - bar.n)
                        )
                except ResponseImportFailed as failure:
                    report = failure.report
            if not report.ok:
                failed = True
                for error in report.errors:
                    self.stderr.write(f"{path}: {error}")
                if report.error_count > len(report.errors):
                    self.stderr.write(
                        f"{path}: … and {report.error_count - len(report.errors)} more"
                    )
                self.stderr.write(f"{path}: {report.error_count} error(s); nothing written")
                continue
            new = ", ".join(report.new_companions)
            self.stdout.write(
                f"{path}: {report.rows} responses ({report.format}) into run {report.run!r}: "
                f"{report.created} new, {report.updated} updated, {report.unchanged} unchanged; "
                f"{report.companions_created} new companions{f' ({new})' if new else ''}"
                + (" [dry run, nothing written]" if options["dry_run"] else "")
            )
        if failed:
            raise CommandError("some inputs had errors and were not imported")
