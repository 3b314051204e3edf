"""Who may open what: every URL name in the project against every role.

The table below is the contract. A URL added to the project without an entry here fails
`test_table_covers_every_url`, so each new page or endpoint gets a deliberate access decision.
"""

import copy
import json
from dataclasses import dataclass
from functools import cache
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLResolver, get_resolver, reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from annotation import queue
from annotation.models import (
    AnnotatorExclusion,
    Assignment,
    Campaign,
    Judgment,
    PracticeAnswer,
    PracticeAttempt,
    PracticeItem,
    QualificationRule,
    QualificationStatus,
)
from annotation.study.models import Participant, StudyLink
from h2htalk.models import Job
from h2htalk.roles import ensure_role_groups
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
from scoring.models import CalibratedJudge, JudgeConfig, JudgeRun, JudgeVerdict, Release
from scoring.releases import service as releases
from tests import simulators
from tests.annotation import factories as campaign_factories
from tests.conftest import make_user
from tests.scenarios import factories
from tests.scoring.test_calibration_support import stored_judge
from webhooks.models import Delivery, Endpoint

ANONYMOUS, NOROLE, ANNOTATOR, RESEARCHER, ADMIN = (
    "anonymous",
    "norole",
    "annotator",
    "researcher",
    "admin",
)
ROLES = (ANONYMOUS, NOROLE, ANNOTATOR, RESEARCHER, ADMIN)

EVERYONE = frozenset(ROLES)
RESEARCH = frozenset({RESEARCHER, ADMIN})  # admins pass every role check
RATING = frozenset({ANNOTATOR, ADMIN})
ADMINS = frozenset({ADMIN})

# url name -> the roles allowed to use it.
EXPECTED = {
    # Pages of the project itself.
    "home": frozenset({ANNOTATOR, RESEARCHER, ADMIN}),  # no role: a 403 "ask an admin" page
    "login": EVERYONE,
    "logout": EVERYONE,
    # The interface language (the switch on every page) and the scripts' strings: anyone.
    "set_language": EVERYONE,
    "javascript_catalog": EVERYONE,
    "admin_home": ADMINS,
    "set_roles": ADMINS,
    "set_active": ADMINS,
    "revoke_links": ADMINS,
    "new_link": ADMINS,
    "create_users": ADMINS,
    # Setting a password from a one-time link: whoever holds the link (the token decides).
    "password_set": EVERYONE,
    "job_detail": RESEARCH,
    "job_progress": RESEARCH,
    # Scenario curation.
    "scenarios:list": RESEARCH,
    "scenarios:create": RESEARCH,
    "scenarios:bulk": RESEARCH,
    "scenarios:export": RESEARCH,
    "scenarios:import": RESEARCH,
    "scenarios:import_confirm": RESEARCH,
    "scenarios:personas": RESEARCH,
    "scenarios:persona_create": RESEARCH,
    "scenarios:persona_edit": RESEARCH,
    "scenarios:detail": RESEARCH,
    "scenarios:edit": RESEARCH,
    "scenarios:review": RESEARCH,
    "scenarios:history": RESEARCH,
    "scenarios:revision": RESEARCH,
    # Rating.
    "annotation:home": RATING,
    # Study links: joining is for whoever holds the link (the token and the participant's ids
    # decide); the participant's pages are for study participants only, none of these roles.
    "study:join": EVERYONE,
    "study:step": frozenset(),
    "study:consent": frozenset(),
    "campaigns:study": RESEARCH,
    "campaigns:study_action": RESEARCH,
    "campaigns:study_export": RESEARCH,
    "campaign-study": RESEARCH,
    "campaign-study-rotate": RESEARCH,
    "campaign-study-participants": RESEARCH,
    # REST API, its schema and docs. The token endpoint checks the password, not a role.
    "api_token": EVERYONE,
    "api-root": RESEARCH,
    "scenario-list": RESEARCH,
    "scenario-detail": RESEARCH,
    "scenario-transition": RESEARCH,
    "persona-list": RESEARCH,
    "persona-detail": RESEARCH,
    "api_schema": RESEARCH,
    "user-list": ADMINS,
    "user-detail": ADMINS,
    "user-deactivate": ADMINS,
    "user-revoke-links": ADMINS,
    "api_docs": RESEARCH,
    # Companions, generation runs and responses (model names: researchers only).
    "companions:list": RESEARCH,
    "companions:create": RESEARCH,
    "companions:edit": RESEARCH,
    "companions:runs": RESEARCH,
    "companions:run_create": RESEARCH,
    "companions:run": RESEARCH,
    "companions:run_progress": RESEARCH,
    "companions:run_cancel": RESEARCH,
    "companions:run_resume": RESEARCH,
    "companions:responses": RESEARCH,
    "companions:response_export": RESEARCH,
    "companion-list": RESEARCH,
    "companion-detail": RESEARCH,
    "run-list": RESEARCH,
    "run-detail": RESEARCH,
    "run-cancel": RESEARCH,
    "run-resume": RESEARCH,
    "response-list": RESEARCH,
    "response-detail": RESEARCH,
    "companions:response_import": RESEARCH,
    "companions:response_import_confirm": RESEARCH,
    # Campaigns (researchers who own or are members of them; admins all).
    "campaigns:list": RESEARCH,
    "campaigns:create": RESEARCH,
    "campaigns:set_count": RESEARCH,
    "campaigns:detail": RESEARCH,
    "campaigns:live": RESEARCH,
    "campaigns:build_status": RESEARCH,
    "campaigns:edit": RESEARCH,
    "campaigns:state": RESEARCH,
    "campaigns:rebuild": RESEARCH,
    "campaigns:gold": RESEARCH,
    "campaigns:export": RESEARCH,
    "scoring:agreement": RESEARCH,
    "scoring:agreement_export": RESEARCH,
    "scoring:agreement_exclusions": RESEARCH,
    "planning:campaign": RESEARCH,
    "planning:status": RESEARCH,
    "campaign-list": RESEARCH,
    "campaign-detail": RESEARCH,
    "campaign-transition": RESEARCH,
    "campaign-rebuild": RESEARCH,
    "campaign-progress": RESEARCH,
    "campaign-annotators": RESEARCH,
    "campaign-members": RESEARCH,
    "campaign-comparisons": RESEARCH,
    "campaign-gold": RESEARCH,
    "campaign-agreement": RESEARCH,
    "campaign-agreement-exclusions": RESEARCH,
    "campaign-plan": RESEARCH,
    "campaign-plan-status": RESEARCH,
    # Qualification: rule, practice items, phases (researchers of the campaign).
    "campaigns:qualification": RESEARCH,
    "campaigns:practice_add": RESEARCH,
    "campaigns:practice_import": RESEARCH,
    "campaigns:practice_delete": RESEARCH,
    "qualification": RESEARCH,
    "qualification-items": RESEARCH,
    "qualification-import": RESEARCH,
    "qualification-item": RESEARCH,
    "qualification-annotators": RESEARCH,
    # Practice (annotators of the campaign).
    "annotation:qualify": RATING,
    "annotation:practice_retry": RATING,
    "annotation:practice_feedback": RATING,
    "annotation:practice_answer": RATING,
    "practice-next": RATING,
    "practice-retry": RATING,
    "practice-answer": RATING,
    # Blind rating, pages and API (annotators of the campaign).
    "annotation:rate": RATING,
    "annotation:submit": RATING,
    "annotation:skip": RATING,
    "annotation:rather_not": RATING,
    "annotation:support": RATING,
    "annotation:care": RATING,
    "rate-care": RATING,
    "rate-campaign-list": RATING,
    "rate-campaign-next": RATING,
    "rate-assignment-submit": RATING,
    "rate-assignment-skip": RATING,
    # LLM judges.
    "judges:list": RESEARCH,
    "judges:create": RESEARCH,
    "judges:edit": RESEARCH,
    "judges:bias": RESEARCH,
    "judges:runs": RESEARCH,
    "judges:run_create": RESEARCH,
    "judges:run": RESEARCH,
    "judges:run_progress": RESEARCH,
    "judges:run_cancel": RESEARCH,
    "judges:run_resume": RESEARCH,
    "judges:run_export": RESEARCH,
    "judges:import": RESEARCH,
    "judges:import_job": RESEARCH,
    "judges:import_confirm": RESEARCH,
    "judge-config-list": RESEARCH,
    "judge-config-detail": RESEARCH,
    "judge-config-bias": RESEARCH,
    "judge-run-list": RESEARCH,
    "judge-run-detail": RESEARCH,
    "judge-run-cancel": RESEARCH,
    "judge-run-resume": RESEARCH,
    "judge-verdict-list": RESEARCH,
    "judge-verdict-detail": RESEARCH,
    # Calibration.
    "calibration:list": RESEARCH,
    "calibration:create": RESEARCH,
    "calibration:import": RESEARCH,
    "calibration:route": RESEARCH,
    "calibration:metrics": RESEARCH,
    "calibration:detail": RESEARCH,
    "calibration:download": RESEARCH,
    "calibration-judge-list": RESEARCH,
    "calibration-judge-detail": RESEARCH,
    "calibration-judge-score": RESEARCH,
    "calibration-judge-import": RESEARCH,
    "calibration-route": RESEARCH,
    "calibration-metrics": RESEARCH,
    # Benchmark releases and leaderboards.
    "releases:list": RESEARCH,
    "releases:create": RESEARCH,
    "releases:detail": RESEARCH,
    "releases:export": RESEARCH,
    "releases:compute": RESEARCH,
    "hfexport:campaign": RESEARCH,
    "hfexport:release": RESEARCH,
    "campaign-hf-dataset": RESEARCH,
    "release-hf-dataset": RESEARCH,
    "release-list": RESEARCH,
    "release-detail": RESEARCH,
    "release-compute": RESEARCH,
    # Leaderboard versions: of the releases one may see, as releases.
    "releases:version_create": RESEARCH,
    "release-versions": RESEARCH,
    "release-lineage": RESEARCH,
    # Webhooks (objects: the endpoints of the campaigns one manages; the secret: its owner).
    "webhooks:list": RESEARCH,
    "webhooks:create": RESEARCH,
    "webhooks:detail": RESEARCH,
    "webhooks:edit": RESEARCH,
    "webhooks:delete": RESEARCH,
    "webhooks:delivery": RESEARCH,
    "webhooks:resend": RESEARCH,
    "webhook-endpoint-list": RESEARCH,
    "webhook-endpoint-detail": RESEARCH,
    "webhook-endpoint-deliveries": RESEARCH,
    "webhook-delivery-detail": RESEARCH,
    "webhook-delivery-resend": RESEARCH,
}
# Views that only accept POST: a GET by an allowed role is 405.
POST_ONLY = {
    "logout",
    "new_link",
    "set_language",
    "set_roles",
    "set_active",
    "revoke_links",
    "create_users",
    "user-deactivate",
    "user-revoke-links",
    "scenarios:bulk",
    "scenarios:review",
    "scenarios:import_confirm",
    "scenario-transition",
    "api_token",
    "companions:run_cancel",
    "companions:run_resume",
    "run-cancel",
    "run-resume",
    "companions:response_import_confirm",
    "campaigns:state",
    "campaigns:rebuild",
    "campaigns:study_action",
    "campaign-study-rotate",
    "study:consent",
    "campaign-transition",
    "campaign-rebuild",
    "scoring:agreement_exclusions",
    "annotation:submit",
    "annotation:skip",
    "annotation:rather_not",
    "rate-campaign-next",
    "rate-assignment-submit",
    "rate-assignment-skip",
    "campaigns:practice_add",
    "campaigns:practice_import",
    "campaigns:practice_delete",
    "qualification-import",
    "annotation:practice_retry",
    "annotation:practice_answer",
    "practice-next",
    "practice-retry",
    "practice-answer",
    "judges:run_cancel",
    "judges:run_resume",
    "judges:import_confirm",
    "judge-run-cancel",
    "judge-run-resume",
    "calibration:metrics",
    "calibration-judge-import",
    "calibration-route",
    "calibration-metrics",
    "releases:compute",
    "release-compute",
    "release-versions",
    "webhooks:delete",
    "webhooks:resend",
    "webhook-delivery-resend",
}
# Views whose answer to an allowed role is a redirect (to that role's landing page).
REDIRECTS = {"home", "releases:export"}  # the world's release is not computed: back to it
# Views whose answer to an allowed role is another status.
ANSWERS = {"study:join": 400}  # no participant id in the address: the page names the parameter
# The world's campaign needs no qualification: its practice page sends to rating, and an
# unanswered practice item's feedback page to the practice.
REDIRECTS |= {"annotation:qualify", "annotation:practice_feedback"}
# The world's release is not frozen: its dataset page goes back to it, the API answers 409.
REDIRECTS |= {"hfexport:release"}
CONFLICTS = {"release-hf-dataset"}
# Which object a `pk` URL parameter refers to (default: the scenario).
PK_OBJECT = {
    "user-detail": "target",
    "user-deactivate": "target",
    "user-revoke-links": "target",
    "job_detail": "job",
    "job_progress": "job",
    "scenarios:persona_edit": "persona",
    "persona-detail": "persona",
    "companions:edit": "companion",
    "companion-detail": "companion",
    "companions:run": "run",
    "companions:run_progress": "run",
    "companions:run_resume": "run",
    "run-detail": "run",
    "run-resume": "run",
    "companions:run_cancel": "active_run",
    "run-cancel": "active_run",
    "response-detail": "response",
    "campaigns:detail": "campaign",
    "campaigns:live": "campaign",
    "campaigns:qualification": "campaign",
    "campaigns:practice_add": "campaign",
    "campaigns:practice_import": "campaign",
    "campaigns:practice_delete": "campaign",
    "campaigns:build_status": "campaign",
    "campaigns:edit": "campaign",
    "campaigns:state": "campaign",
    "campaigns:rebuild": "campaign",
    "campaigns:gold": "campaign",
    "campaigns:export": "campaign",
    "campaigns:study": "campaign",
    "campaigns:study_action": "campaign",
    "campaigns:study_export": "campaign",
    "campaign-detail": "campaign",
    "campaign-transition": "campaign",
    "campaign-rebuild": "campaign",
    "campaign-progress": "campaign",
    "campaign-annotators": "campaign",
    "campaign-members": "campaign",
    "campaign-comparisons": "campaign",
    "campaign-gold": "campaign",
    "rate-campaign-next": "campaign",
    "judges:edit": "judge",
    "judges:bias": "judge",
    "judge-config-detail": "judge",
    "judge-config-bias": "judge",
    "judges:run": "judge_run",
    "judges:run_progress": "judge_run",
    "judges:run_export": "judge_run",
    "judges:run_resume": "judge_run",
    "judge-run-detail": "judge_run",
    "judge-run-resume": "judge_run",
    "judges:run_cancel": "active_judge_run",
    "judge-run-cancel": "active_judge_run",
    "judge-verdict-detail": "verdict",
    "calibration:detail": "calibrated_judge",
    "calibration:download": "calibrated_judge",
    "calibration-judge-detail": "calibrated_judge",
    "calibration-judge-score": "calibrated_judge",
    "releases:detail": "release",
    "releases:export": "release",
    "hfexport:campaign": "campaign",
    "hfexport:release": "release",
    "release-hf-dataset": "release",
    "releases:compute": "release",
    "release-detail": "release",
    "release-compute": "release",
    "releases:version_create": "release",
    "release-versions": "release",
    "release-lineage": "release",
    "webhooks:detail": "webhook",
    "webhooks:edit": "webhook",
    "webhooks:delete": "webhook",
    "webhook-endpoint-detail": "webhook",
    "webhook-endpoint-deliveries": "webhook",
    "webhooks:delivery": "webhook_delivery",
    "webhooks:resend": "webhook_delivery",
    "webhook-delivery-detail": "webhook_delivery",
    "webhook-delivery-resend": "webhook_delivery",
}
# Which job a `job_id` URL parameter refers to (default: the scenario import preview).
JOB_OBJECT = {
    "companions:response_import_confirm": "response_job",
    "judges:import_job": "verdict_job",
    "judges:import_confirm": "verdict_job",
}


@cache
def resolver_urls() -> dict[str, set[frozenset[str]]]:
    """Every URL name in the project -> the parameter sets of its patterns.

    Django admin URLs (namespace `admin`) are left out: the admin does its own staff checks
    (tested once in `test_django_admin_needs_staff`) and has dozens of model URLs.
    """
    found: dict[str, set[frozenset[str]]] = {}

    def walk(patterns, namespace, params):
        for entry in patterns:
            here = params | frozenset(entry.pattern.regex.groupindex)
            if isinstance(entry, URLResolver):
                if entry.namespace == "admin":
                    continue
                inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
                walk(entry.url_patterns, inner, here)
            else:
                name = f"{namespace}{entry.name}" if entry.name else f"<unnamed {entry.pattern}>"
                found.setdefault(name, set()).add(here)

    walk(get_resolver().url_patterns, "", frozenset())
    return found


@dataclass
class World:
    users: dict
    target: object  # the user whose roles set_roles changes
    persona: object
    scenario: Scenario
    job: Job
    companion: CompanionModel
    run: GenerationRun  # cancelled: resuming queues it again
    active_run: GenerationRun  # queued: cancelling stops it
    response: Response
    response_job: Job
    campaign: Campaign  # open; the annotator and the admin rate in it
    judge: JudgeConfig
    judge_run: JudgeRun  # cancelled: resuming queues it again
    active_judge_run: JudgeRun  # queued: cancelling stops it
    verdict: JudgeVerdict
    verdict_job: Job
    calibrated_judge: CalibratedJudge
    release: Release
    study_link: StudyLink  # open, of `campaign`
    webhook: Endpoint  # the researcher's, for the world's campaign
    webhook_delivery: Delivery  # failed: re-sending makes it pending

    def assignment_key(self, role) -> str:
        """An open item of the logged-in rater (others are refused before the key matters)."""
        user = self.users[role if role in (ANNOTATOR, ADMIN) else ANNOTATOR]
        return str(queue.next_assignment(user, self.campaign).key)

    def rater(self, role):
        return self.users[role if role in (ANNOTATOR, ADMIN) else ANNOTATOR]

    def practice_item(self, practice_set="qualification") -> PracticeItem:
        """A practice item of the campaign (its first comparison, known answer 1)."""
        comparison = self.campaign.comparisons.order_by("pk").first()
        item, _ = PracticeItem.objects.get_or_create(
            campaign=self.campaign,
            practice_set=practice_set,
            response_a=comparison.response_a,
            response_b=comparison.response_b,
            defaults={"scenario": comparison.scenario, "known_preference": 1, "explanation": "x"},
        )
        return item

    def practice_key(self, role) -> str:
        """An unanswered practice item of the logged-in rater."""
        attempt = PracticeAttempt.objects.create(
            campaign=self.campaign,
            annotator=self.rater(role),
            practice_set="qualification",
            number=1,
            total=1,
        )
        answer = PracticeAnswer.objects.create(
            attempt=attempt, item=self.practice_item(), order=1, left_is_a=True
        )
        return str(answer.key)

    def requiring_qualification(self, failed: bool = False) -> dict:
        """The campaign requires qualification and has an item; `failed`: both raters failed
        a first attempt and may retry (probe set-up: the POST itself sends nothing)."""
        Campaign.objects.filter(pk=self.campaign.pk).update(requires_qualification=True)
        QualificationRule.objects.get_or_create(campaign_id=self.campaign.pk, attempts=2)
        self.practice_item()
        for role in (ANNOTATOR, ADMIN) if failed else ():
            user = self.rater(role)
            QualificationStatus.objects.get_or_create(
                campaign=self.campaign, annotator=user, defaults={"since": self.campaign.created_at}
            )
            PracticeAttempt.objects.get_or_create(
                campaign=self.campaign,
                annotator=user,
                practice_set="qualification",
                number=1,
                defaults={"total": 1, "passed": False, "finished_at": self.campaign.created_at},
            )
        return {}


_FITTED: dict = {}


def calibrated_judge_for(campaign, owner) -> CalibratedJudge:
    """The simulated calibrated judge, fitted once per session and stored per test."""
    if "document" not in _FITTED:
        _FITTED["document"] = stored_judge(campaign, owner).document
        return CalibratedJudge.objects.get()
    document = _FITTED["document"]
    JudgeConfig.objects.get_or_create(
        name=document["judge"]["config"],
        defaults={"mode": document["judge"]["mode"], "rubric": "r"},
    )
    return CalibratedJudge.objects.create(
        name=document["name"],
        version=document["version"],
        document=document,
        campaign=campaign,
        created_by=owner,
    )


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="module")
def module_world(module_db):
    """The world is made once per module (its tests only read it or change it inside their own
    transaction, rolled back after each): `world` hands each test a copy of it."""
    with module_db(), pytest.MonkeyPatch.context() as patch:
        patch.setenv("H2HTALK_CODE_VERSION", "test")
        ensure_role_groups()
        django_user_model = get_user_model()
        users = {  # made in the order the user fixtures of tests/conftest.py made them
            ADMIN: make_user(django_user_model, "admin1", ADMIN),
            RESEARCHER: make_user(django_user_model, "researcher1", RESEARCHER),
            ANNOTATOR: make_user(django_user_model, "annotator1", ANNOTATOR),
            NOROLE: make_user(django_user_model, "norole1"),
        }
        return make_world(users, django_user_model)


@pytest.fixture
def world(module_world, db, monkeypatch):
    """One object of every kind (users "admin1", "researcher1", "annotator1", "norole1": a test
    using `world` makes none of its own); Python objects copied, so a test may change them."""
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "test")
    return copy.deepcopy(module_world)


def make_world(users: dict, django_user_model) -> World:
    admin_user, researcher, annotator = users[ADMIN], users[RESEARCHER], users[ANNOTATOR]
    persona = factories.persona("Lin")
    scenario = factories.scenario(researcher, persona=persona, tags=["work"])
    job = Job.objects.create(
        kind="scenario_import",
        state=Job.State.COMPLETED,
        created_by=researcher,
        params={"path": "imports/x/a.jsonl", "filename": "a.jsonl", "dry_run": True},
    )
    companion = CompanionModel.objects.create(
        name="alpha", base_url="http://127.0.0.1:9/v1", model_id="alpha"
    )
    run = GenerationRun.objects.create(name="old run", state=GenerationRun.State.CANCELLED)
    active_run = GenerationRun.objects.create(name="new run", state=GenerationRun.State.QUEUED)
    for each in (run, active_run):
        each.scenarios.add(scenario)
        each.companions.add(companion)
    response = Response.objects.create(
        run=run, scenario=scenario, companion=companion, text="hello"
    )
    response_job = Job.objects.create(
        kind="response_import",
        state=Job.State.COMPLETED,
        created_by=researcher,
        params={
            "path": "imports/x/r.jsonl",
            "filename": "r.jsonl",
            "run_name": "r",
            "dry_run": True,
        },
    )
    campaign = campaign_factories.campaign(researcher, [annotator, admin_user], n_scenarios=2)
    judge = JudgeConfig.objects.create(
        name="judge", base_url="http://127.0.0.1:9/v1", model_id="m", rubric="r"
    )
    judge_run = JudgeRun.objects.create(name="old judging", judge=judge, state="cancelled")
    active_judge_run = JudgeRun.objects.create(name="new judging", judge=judge, state="queued")
    verdict = JudgeVerdict.objects.create(run=judge_run, response=response, parse="strict")
    verdict_job = Job.objects.create(
        kind="judge_import",
        state=Job.State.COMPLETED,
        created_by=researcher,
        params={
            "path": "imports/x/v.jsonl",
            "filename": "v.jsonl",
            "judge": "judge",
            "run_name": "",
            "dry_run": True,
        },
    )
    calibrated_judge = calibrated_judge_for(campaign, researcher)
    release = releases.create_release(
        name="world release",
        campaign=campaign,
        anchor=campaign.companions.order_by("pk").first(),
        user=researcher,
        n_boot=100,
        compute_now=False,  # frozen and computed only by the compute probes: keeps this cheap
    )
    webhook = Endpoint.objects.create(
        owner=researcher, campaign=campaign, url="http://127.0.0.1:9/hooks", events=["job.failed"]
    )
    webhook_delivery = Delivery.objects.create(
        endpoint=webhook, event="job.failed", payload={}, state=Delivery.State.FAILED
    )
    target = make_user(django_user_model, "target1", "annotator")
    target.set_unusable_password()  # onboarded, no password yet: has a link to revoke
    target.save(update_fields=["password"])
    study_link = StudyLink.objects.create(
        campaign=campaign, completion_code="C1", consent="I agree.", quota=2
    )
    return World(
        study_link=study_link,
        users=users,
        target=target,
        persona=persona,
        scenario=scenario,
        job=job,
        companion=companion,
        run=run,
        active_run=active_run,
        response=response,
        response_job=response_job,
        campaign=campaign,
        judge=judge,
        judge_run=judge_run,
        active_judge_run=active_judge_run,
        verdict=verdict,
        verdict_job=verdict_job,
        calibrated_judge=calibrated_judge,
        release=release,
        webhook=webhook,
        webhook_delivery=webhook_delivery,
    )


def login(client, world, role):
    if role != ANONYMOUS:
        client.force_login(world.users[role])
    return client


def urls_for(name, world, role=ANNOTATOR) -> list[str]:
    """The URL of every pattern with this name, parameters filled from the fixture objects."""
    urls = []
    for params in sorted(resolver_urls()[name], key=lambda p: (len(p), sorted(p))):
        kwargs = {}
        for param in params:
            if param == "pk":
                kwargs[param] = getattr(world, PK_OBJECT.get(name, "scenario")).pk
            elif param == "format":
                kwargs[param] = "json"
            elif param == "number":
                kwargs[param] = 1
            elif param == "user_id":
                kwargs[param] = world.target.pk
            elif param == "uidb64":
                kwargs[param] = urlsafe_base64_encode(force_bytes(world.target.pk))
            elif param == "link_token":
                kwargs[param] = world.study_link.token
            elif param == "token":
                kwargs[param] = "not-a-token"  # the page says the link does not work
            elif param == "job_id":
                kwargs[param] = getattr(world, JOB_OBJECT.get(name, "job")).pk
            elif param == "campaign_id":
                kwargs[param] = world.campaign.pk
            elif param == "key":
                kwargs[param] = world.assignment_key(role)
            elif param == "practice_key":
                kwargs[param] = world.practice_key(role)
            elif param in ("item", "item_id"):
                kwargs[param] = world.practice_item().pk
            elif param == "fmt":
                kwargs[param] = "json"  # a format every such URL accepts
            else:
                raise AssertionError(f"no test value for URL parameter {param!r} of {name}")
        urls.append(reverse(name, kwargs=kwargs))
    return urls


def is_login_redirect(response, url) -> bool:
    if response.status_code != 302:
        return False
    location = urlsplit(response["Location"])
    return location.path == reverse("login") and parse_qs(location.query).get("next") == [url]


def assert_denied(response, role, url):
    if url.startswith("/api/") and url != reverse("api_docs"):  # the docs are a page
        expected = {401, 403} if role == ANONYMOUS else {403}
        assert response.status_code in expected, (role, url, response.status_code)
    elif role == ANONYMOUS:
        assert is_login_redirect(response, url), (
            url,
            response.status_code,
            response.get("Location"),
        )
    else:
        assert response.status_code == 403, (role, url, response.status_code)


@dataclass
class Probe:
    """A POST that changes something when allowed, and a way to read that something."""

    data: object  # world -> POST data
    state: object  # world -> comparable state


def _scenario_state(world):
    scenario = Scenario.objects.get(pk=world.scenario.pk)
    return scenario.state, scenario.revisions.count(), scenario.comments.count()


def _run_state(run):
    run = GenerationRun.objects.get(pk=run.pk)
    return run.state, run.cancel_requested


def _release_state(release):
    return Release.objects.filter(pk=release.pk).values_list("state", "checked_at").get()


def _computed_release(world) -> dict:
    """A version's name; first the world's campaign voted on and its release computed (only a
    computed release with a human Elo for its anchor gets a version)."""
    release = Release.objects.get(pk=world.release.pk)
    if release.state != Release.State.READY:
        raters = [world.users[ANNOTATOR], world.users[ADMIN]]
        now = timezone.now()
        comparisons = world.campaign.comparisons.filter(is_gold=False).order_by("pk")
        simulators.save_votes(
            [
                simulators.submitted_vote(comparison, rater, (-1, 1, 0)[(n + k) % 3], now)
                for n, comparison in enumerate(comparisons)
                for k, rater in enumerate(raters)
            ]
        )
        releases.compute(release)
    return {"name": "probe version"}


def _versions(world):
    return Release.objects.filter(parent=world.release).count()


def _judge_state(run):
    run = JudgeRun.objects.get(pk=run.pk)
    return run.state, run.cancel_requested


def _campaign_state(world):
    return Campaign.objects.get(pk=world.campaign.pk).state


def _practice_state(world):
    return PracticeAnswer.objects.filter(answered_at__isnull=False).count()


def _with_practice_item(world):
    """The practice items, the world's one made before the first count (the URL names it)."""
    if not getattr(world, "practice_item_made", False):
        world.practice_item()
        world.practice_item_made = True
    return PracticeItem.objects.count()


def _retries(world):
    return PracticeAttempt.objects.filter(number__gte=2).count()


def _new_practice_item(world) -> dict:
    """A refresher item from the campaign's last comparison (not the world's practice item)."""
    comparison = world.campaign.comparisons.order_by("pk").last()
    return {
        "practice_set": "refresher",
        "comparison": comparison.pk,
        "known_preference": "1",
        "explanation": "probe",
    }


def _practice_file(world) -> dict:
    line = json.dumps(_new_practice_item(world) | {"known_preference": 1}).encode()
    return {"file": SimpleUploadedFile("practice.jsonl", line)}


def _rating_state(world):
    return (
        Assignment.objects.filter(comparison__campaign=world.campaign).count(),
        Judgment.objects.count(),
        Assignment.objects.filter(state=Assignment.State.SKIPPED).count(),
    )


def _study_link_state(world):
    return StudyLink.objects.filter(pk=world.study_link.pk).values_list("token", "is_open").get()


def _with_content_notes(world):
    """No data: the world's items get a risk level, so "I'd rather not" applies to them."""
    scenarios = world.campaign.comparisons.values("scenario_id")
    Scenario.objects.filter(pk__in=scenarios).update(risk_level="low")
    return {}


def _target_active(world):
    return get_user_model().objects.get(pk=world.target.pk).is_active


def _target_password(world):
    return get_user_model().objects.get(pk=world.target.pk).password


def _webhook_state(world):
    return (
        Endpoint.objects.filter(pk=world.webhook.pk).exists(),
        Delivery.objects.filter(pk=world.webhook_delivery.pk).values_list("state").first(),
    )


PROBES = {
    "webhooks:delete": Probe(data=lambda w: {"confirmed": "1"}, state=_webhook_state),
    "webhooks:resend": Probe(data=lambda w: {}, state=_webhook_state),
    "webhook-delivery-resend": Probe(data=lambda w: {}, state=_webhook_state),
    "set_roles": Probe(
        data=lambda w: {"roles": ["admin", "researcher"]},
        state=lambda w: sorted(w.target.groups.values_list("name", flat=True)),
    ),
    "set_active": Probe(data=lambda w: {"active": "0"}, state=_target_active),
    "user-deactivate": Probe(data=lambda w: {}, state=_target_active),
    "revoke_links": Probe(data=lambda w: {}, state=_target_password),
    "new_link": Probe(data=lambda w: {}, state=_target_password),
    "user-revoke-links": Probe(data=lambda w: {}, state=_target_password),
    "create_users": Probe(
        data=lambda w: {
            "file": SimpleUploadedFile(
                "users.csv", b"username,email,role\nprobe1,probe1@example.org,annotator\n"
            )
        },
        state=lambda w: get_user_model().objects.count(),
    ),
    "scenarios:review": Probe(data=lambda w: {"action": "submit"}, state=_scenario_state),
    "scenarios:bulk": Probe(
        data=lambda w: {"action": "submit", "ids": [w.scenario.pk]}, state=_scenario_state
    ),
    "scenarios:import_confirm": Probe(data=lambda w: {}, state=lambda w: Job.objects.count()),
    "scenario-transition": Probe(data=lambda w: {"action": "submit"}, state=_scenario_state),
    "companions:run_cancel": Probe(data=lambda w: {}, state=lambda w: _run_state(w.active_run)),
    "run-cancel": Probe(data=lambda w: {}, state=lambda w: _run_state(w.active_run)),
    "companions:run_resume": Probe(data=lambda w: {}, state=lambda w: _run_state(w.run)),
    "run-resume": Probe(data=lambda w: {}, state=lambda w: _run_state(w.run)),
    "companions:response_import_confirm": Probe(
        data=lambda w: {}, state=lambda w: Job.objects.count()
    ),
    "campaigns:state": Probe(data=lambda w: {"action": "pause"}, state=_campaign_state),
    "campaigns:rebuild": Probe(
        data=lambda w: {"confirmed": "1"}, state=lambda w: Job.objects.count()
    ),
    "campaign-transition": Probe(data=lambda w: {"action": "pause"}, state=_campaign_state),
    "campaign-rebuild": Probe(data=lambda w: {}, state=lambda w: Job.objects.count()),
    "scoring:agreement_exclusions": Probe(
        data=lambda w: {
            "action": "exclude",
            "annotators": [w.users[ANNOTATOR].username],
            "reason": "probe",
        },
        state=lambda w: AnnotatorExclusion.objects.filter(campaign=w.campaign).count(),
    ),
    "campaigns:study_action": Probe(data=lambda w: {"action": "close"}, state=_study_link_state),
    "campaign-study-rotate": Probe(data=lambda w: {}, state=_study_link_state),
    "study:consent": Probe(
        data=lambda w: {"decision": "agree"},
        state=lambda w: Participant.objects.filter(consented_at__isnull=False).count(),
    ),
    "annotation:submit": Probe(data=lambda w: {"preference": "0"}, state=_rating_state),
    "annotation:skip": Probe(data=lambda w: {"skip_reason": "other"}, state=_rating_state),
    "annotation:rather_not": Probe(data=_with_content_notes, state=_rating_state),
    "rate-campaign-next": Probe(data=lambda w: {}, state=_rating_state),
    "rate-assignment-submit": Probe(data=lambda w: {"preference": 0}, state=_rating_state),
    "rate-assignment-skip": Probe(data=lambda w: {"reason": "other"}, state=_rating_state),
    "campaigns:practice_add": Probe(
        data=lambda w: _new_practice_item(w), state=lambda w: PracticeItem.objects.count()
    ),
    "campaigns:practice_import": Probe(
        data=lambda w: _practice_file(w), state=lambda w: PracticeItem.objects.count()
    ),
    "qualification-import": Probe(
        data=lambda w: _practice_file(w), state=lambda w: PracticeItem.objects.count()
    ),
    "campaigns:practice_delete": Probe(data=lambda w: {}, state=_with_practice_item),
    "annotation:practice_answer": Probe(data=lambda w: {"preference": "0"}, state=_practice_state),
    "practice-answer": Probe(data=lambda w: {"preference": "0"}, state=_practice_state),
    "practice-next": Probe(
        data=lambda w: w.requiring_qualification(), state=lambda w: PracticeAttempt.objects.count()
    ),
    "annotation:practice_retry": Probe(
        data=lambda w: w.requiring_qualification(failed=True), state=_retries
    ),
    "practice-retry": Probe(data=lambda w: w.requiring_qualification(failed=True), state=_retries),
    "judges:run_cancel": Probe(data=lambda w: {}, state=lambda w: _judge_state(w.active_judge_run)),
    "judge-run-cancel": Probe(data=lambda w: {}, state=lambda w: _judge_state(w.active_judge_run)),
    "judges:run_resume": Probe(data=lambda w: {}, state=lambda w: _judge_state(w.judge_run)),
    "judge-run-resume": Probe(data=lambda w: {}, state=lambda w: _judge_state(w.judge_run)),
    "judges:import_confirm": Probe(data=lambda w: {}, state=lambda w: Job.objects.count()),
    "calibration:metrics": Probe(
        data=lambda w: {"campaign": w.campaign.pk}, state=lambda w: Job.objects.count()
    ),
    "calibration-judge-import": Probe(
        data=lambda w: {
            "document": json.dumps(CalibratedJudge.objects.get(pk=w.calibrated_judge.pk).document),
            "name": "probe import",
        },
        state=lambda w: CalibratedJudge.objects.count(),
    ),
    "calibration-metrics": Probe(
        data=lambda w: {"campaign": w.campaign.pk}, state=lambda w: Job.objects.count()
    ),
    "releases:compute": Probe(data=lambda w: {}, state=lambda w: _release_state(w.release)),
    "release-compute": Probe(data=lambda w: {}, state=lambda w: _release_state(w.release)),
    "release-versions": Probe(data=_computed_release, state=_versions),
    "calibration-route": Probe(
        data=lambda w: {
            "source_campaign": w.campaign.pk,
            "mode": "composite",
            "threshold": 1.0,
            "name": "routed probe",
        },
        state=lambda w: Campaign.objects.count(),
    ),
}


def test_table_covers_every_url():
    found = set(resolver_urls())
    assert set(EXPECTED) == found, {
        "in the resolver, not in the table": sorted(found - set(EXPECTED)),
        "in the table, not in the resolver": sorted(set(EXPECTED) - found),
    }
    # The walk really descends into namespaced includes and the DRF router.
    assert {"scenarios:list", "annotation:home", "scenario-list", "api-root"} <= found
    assert not any(name.startswith("admin:") for name in found)


def test_table_is_consistent():
    assert POST_ONLY.issubset(EXPECTED) and REDIRECTS.issubset(EXPECTED)
    assert all(roles <= EVERYONE for roles in EXPECTED.values())
    # Every POST-only view that someone may not use has a probe showing nothing changed.
    assert {name for name in POST_ONLY if EXPECTED[name] != EVERYONE} == set(PROBES)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_access(name, role, world, client):
    login(client, world, role)
    urls = urls_for(name, world, role)
    assert urls
    for url in urls:
        response = client.get(url)
        if role in EXPECTED[name]:
            assert not is_login_redirect(response, url), url
            if name in POST_ONLY:
                expected = 405
            elif name in REDIRECTS:
                expected = 302
            elif name in CONFLICTS:
                expected = 409
            else:
                expected = ANSWERS.get(name, 200)
            assert response.status_code == expected, (role, url, response.status_code)
            continue

        if name in POST_ONLY and response.status_code == 405:
            pass  # require_POST answers before the role check; the POST below must be refused
        else:
            assert_denied(response, role, url)
        if name in POST_ONLY:
            probe = PROBES[name]
            before = probe.state(world)
            assert_denied(client.post(url, probe.data(world)), role, url)
            assert probe.state(world) == before, (role, url)


@pytest.mark.parametrize(
    ("name", "role"),
    [(name, role) for name in sorted(PROBES) for role in sorted(EXPECTED[name])],
)
def test_probe_posts_change_something_when_allowed(name, role, world, client):
    """The control for the 'nothing changed' checks above: the same POST, allowed, does change."""
    login(client, world, role)
    probe = PROBES[name]
    before = probe.state(world)
    url = urls_for(name, world, role)[0]
    response = client.post(url, probe.data(world))
    assert response.status_code in (200, 201, 202, 302), response.status_code
    assert not is_login_redirect(response, url)
    assert probe.state(world) != before


@pytest.mark.parametrize(
    ("role", "landing"),
    [(ADMIN, "/manage/"), (RESEARCHER, "/scenarios/"), (ANNOTATOR, "/rate/")],
)
def test_home_sends_each_role_to_its_landing_page(role, landing, world, client):
    login(client, world, role)
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == landing
    assert client.get(landing).status_code == 200


def test_home_without_role_is_a_403_page(world, client):
    login(client, world, NOROLE)
    response = client.get("/")
    assert response.status_code == 403
    assert "no_role.html" in [t.name for t in response.templates]
    assert "No role yet" in response.content.decode()


def test_home_for_anonymous_goes_to_login(client):
    assert is_login_redirect(client.get("/"), "/")


@pytest.mark.parametrize(
    ("role", "allowed"),
    [(ANONYMOUS, False), (NOROLE, False), (ANNOTATOR, False), (RESEARCHER, False), (ADMIN, True)],
)
def test_django_admin_needs_staff(role, allowed, world, client):
    login(client, world, role)
    response = client.get("/django-admin/")
    if allowed:
        assert response.status_code == 200
    else:
        assert response.status_code == 302
        location = urlsplit(response["Location"])
        assert location.path == "/django-admin/login/"
        assert parse_qs(location.query)["next"] == ["/django-admin/"]


@pytest.fixture
def csrf_client(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users[ADMIN])
    return client


def _csrf_token(client) -> str:
    client.get(reverse("scenarios:list"))
    return client.cookies["csrftoken"].value


@pytest.mark.parametrize("name", ["scenarios:review", "scenarios:bulk", "set_roles"])
def test_post_without_csrf_token_is_refused(name, world, csrf_client):
    probe = PROBES[name]
    url = urls_for(name, world)[0]
    before = probe.state(world)
    response = csrf_client.post(url, probe.data(world))
    assert response.status_code == 403
    assert probe.state(world) == before

    # Control: the same client and POST with the token goes through.
    data = {**probe.data(world), "csrfmiddlewaretoken": _csrf_token(csrf_client)}
    response = csrf_client.post(url, data)
    assert response.status_code == 302 and probe.state(world) != before


def test_api_session_post_without_csrf_token_is_refused(world, csrf_client):
    probe = PROBES["scenario-transition"]
    url = urls_for("scenario-transition", world)[0]
    before = probe.state(world)
    response = csrf_client.post(url, {"action": "submit"})
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert probe.state(world) == before

    response = csrf_client.post(
        url, {"action": "submit"}, headers={"X-CSRFToken": _csrf_token(csrf_client)}
    )
    assert response.status_code == 200 and probe.state(world) != before
