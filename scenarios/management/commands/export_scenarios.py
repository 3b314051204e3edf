import sys

from django.core.management.base import BaseCommand
from django.http import QueryDict

from scenarios.exporters import EXPORTERS
from scenarios.filters import ScenarioFilter
from scenarios.models import Scenario


class Command(BaseCommand):
    help = "Export scenarios as JSONL or CSV; filters use the list page's query string."

    def add_arguments(self, parser):
        parser.add_argument("--format", default="jsonl", choices=list(EXPORTERS))
        parser.add_argument(
            "--filter", default="", help='e.g. "subtask=dialogue_base&state=approved"'
        )
        parser.add_argument("--output", "-o", default="-", help="file path, - for stdout")

    def handle(self, *args, **options):
        queryset = ScenarioFilter(QueryDict(options["filter"]), queryset=Scenario.objects.all()).qs
        writer, _ = EXPORTERS[options["format"]]
        if options["output"] == "-":
            self._write(writer(queryset), sys.stdout)
        else:
            with open(options["output"], "w", encoding="utf-8") as out:
                self._write(writer(queryset), out)

    def _write(self, chunks, out):
        for chunk in chunks:
            out.write(chunk)
