from django.core.management.base import BaseCommand, CommandError

from annotation import exclusions
from annotation.models import Campaign
from h2htalk.params import by_id_or_name


class Command(BaseCommand):
    help = (
        "Leave annotators' judgments out of a campaign's numbers (agreement, calibration fits, "
        "new releases), with a reason; --flagged for every annotator the agreement report "
        "flags; --clear to bring them back (all of them when no name is given). Without names "
        "or options: list the exclusions."
    )

    def add_arguments(self, parser):
        parser.add_argument("campaign", help="campaign id or name")
        parser.add_argument("usernames", nargs="*", help="annotators (usernames)")
        parser.add_argument("--reason", default="", help="why (required when excluding)")
        parser.add_argument(
            "--flagged",
            action="store_true",
            help="exclude every annotator the agreement report flags (its flag is the reason)",
        )
        parser.add_argument(
            "--clear",
            action="store_true",
            help="undo: bring the named annotators back (no names: everyone)",
        )

    def handle(self, *args, **options):
        key = options["campaign"]
        campaign = by_id_or_name(Campaign.objects.all(), key)
        if campaign is None:
            raise CommandError(f"no campaign with id or name {key!r}")
        names = options["usernames"]
        try:
            if options["clear"]:
                if options["flagged"] or options["reason"]:
                    raise CommandError(
                        "--clear takes annotator names only (no --reason, --flagged)"
                    )
                removed = exclusions.clear(campaign, names or None)
                self.stdout.write(f"{campaign.name}: {removed} exclusion(s) removed.")
            elif options["flagged"]:
                if names:
                    raise CommandError("give either annotator names or --flagged, not both")
                made = exclusions.exclude_flagged(campaign)
                self.stdout.write(f"{campaign.name}: {len(made)} flagged annotator(s) excluded.")
            elif names:
                if not options["reason"].strip():
                    raise CommandError("give a reason with --reason (it is shown with the numbers)")
                made = exclusions.exclude(campaign, names, options["reason"])
                self.stdout.write(f"{campaign.name}: {len(made)} annotator(s) excluded.")
        except exclusions.ExclusionError as error:
            raise CommandError(f"{campaign.name}: {error}") from error
        rows = exclusions.summary(campaign)
        total = sum(row["judgments"] for row in rows)
        self.stdout.write(
            f"Excluded from {campaign.name}: {len(rows)} annotator(s), {total} judgment(s)."
        )
        for row in rows:
            self.stdout.write(
                f"  {row['annotator']}  {row['judgments']} judgment(s)  {row['reason']}"
            )
