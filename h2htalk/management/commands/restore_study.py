from django.core.management.base import BaseCommand, CommandError

from h2htalk import backup


class Command(BaseCommand):
    help = "Load a dump_study file into an empty, migrated database (all or nothing)."

    def add_arguments(self, parser):
        parser.add_argument("path")

    def handle(self, *args, **options):
        try:
            counts = backup.restore(options["path"])
        except (ValueError, OSError) as error:
            raise CommandError(str(error)) from error
        summary = ", ".join(f"{n} {label}" for label, n in counts.items() if n)
        self.stdout.write(f"restored: {summary}")
