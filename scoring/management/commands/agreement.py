from django.core.management.base import BaseCommand, CommandError

from annotation.models import Campaign
from h2htalk.params import by_id_or_name
from scoring.agreement import services as agreement


def _number(value, digits=3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


class Command(BaseCommand):
    help = "Print a campaign's agreement report (Krippendorff's α with 95% CIs, annotators)."

    def add_arguments(self, parser):
        parser.add_argument("campaign", help="campaign id or name")
        parser.add_argument("--boot", type=int, default=1000, help="bootstrap draws")

    def handle(self, *args, **options):
        key = options["campaign"]
        campaign = by_id_or_name(Campaign.objects.all(), key)
        if campaign is None:
            raise CommandError(f"no campaign with id or name {key!r}")
        state = agreement.fingerprint(campaign)
        if options["boot"] == 1000:
            data = agreement.report_for(campaign).data
        else:
            data = agreement.compute_report(campaign, n_boot=options["boot"])
        self.stdout.write(f"{campaign.name}: {data['judgments']} judgments ({state})")
        excluded = data.get("excluded") or {}
        if excluded.get("judgments"):
            who = "; ".join(
                f"{row['annotator']} ({row['judgments']}: {row['reason']})"
                for row in excluded["annotators"]
            )
            self.stdout.write(
                f"{excluded['judgments']} judgment(s) of excluded annotators left out: {who}"
            )
        self.stdout.write(data["note"])
        header = f"{'scope':<13}{'group':<26}{'label':<18}{'level':<9}{'alpha':>7}  95% CI           {'units':>6}"
        self.stdout.write("\n" + header)
        for scope in ("overall", "by_dimension", "by_subtask"):
            for row in data[scope]:
                interval = f"[{_number(row['low'])}, {_number(row['high'])}]"
                self.stdout.write(
                    f"{scope:<13}{row['group']:<26}{row['label']:<18}{row['level']:<9}"
                    f"{_number(row['alpha']):>7}  {interval:<17}{row['n_units']:>6}"
                )
        self.stdout.write(
            f"\n{'annotator':<20}{'n':>6}{'consensus':>11}{'gold':>7}{'left':>7}{'median ms':>11}  flag"
        )
        for row in data["annotators"]:
            self.stdout.write(
                f"{row['annotator']:<20}{row['n']:>6}{_number(row['consensus_agreement'], 2):>11}"
                f"{_number(row['gold_accuracy'], 2):>7}{_number(row['left_rate'], 2):>7}"
                f"{_number(row['median_time_ms'], 0):>11}  "
                f"{'[excluded] ' if row.get('excluded') else ''}{row['flag'] or ''}"
                f"{' (' + row['note'] + ')' if row.get('note') else ''}"
            )
        if data["aggregation"]:
            self.stdout.write(
                f"\nMajority vs Dawid–Skene disagree on {data['aggregation']['disagreement']:.3f} "
                f"of {data['aggregation']['units']} comparisons."
            )
