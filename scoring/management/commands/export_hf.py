from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from annotation.models import Campaign
from h2htalk.params import by_id_or_name
from scoring.hfexport import export
from scoring.models import Release


class Command(BaseCommand):
    help = (
        "Write a campaign's (or, with --release, a release's) judgments as a Hugging Face "
        "dataset folder: judgments.jsonl, preference_pairs.jsonl and README.md (the card)."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", help="campaign id or name (with --release: release)")
        parser.add_argument("folder", help="folder to write (made if missing)")
        parser.add_argument("--release", action="store_true", help="SOURCE names a release")
        parser.add_argument(
            "--companions",
            action="store_true",
            help="name the companions (default: anonymous, as annotators saw them)",
        )

    def handle(self, *args, **options):
        key, release = options["source"], options["release"]
        model = Release if release else Campaign
        found = by_id_or_name(model.objects.all(), key)
        if found is None:
            raise CommandError(f"no {'release' if release else 'campaign'} with id or name {key!r}")
        bar = tqdm(desc="judgments", unit="", disable=options["verbosity"] == 0)

        def progress(done, total):
            bar.total = total
            bar.update(done - bar.n)

        write = export.export_release if release else export.export_campaign
        try:
            facts = write(found, options["folder"], options["companions"], progress=progress)
        except ValueError as error:
            raise CommandError(f"{found.name}: {error}") from error
        finally:
            bar.close()
        self.stdout.write(
            f"{options['folder']}: {facts['judgments']} judgments, {facts['pairs']} preference "
            f"pairs ({facts['ties']} ties and {facts['both_unacceptable']} both unacceptable "
            "left out), README.md"
        )
