"""Leaderboard pages, downloads and the REST API of benchmark releases: they render (with a
bounded number of queries), escape what they show, and only owners and members of the release's
campaign (and admins) reach a release."""

import csv
import io
import json
import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from h2htalk.models import Job
from h2htalk.roles import ANNOTATOR, RESEARCHER
from scenarios.models import CompanionModel
from scoring.models import Release
from scoring.releases import data as release_data
from scoring.releases import formats
from tests.annotation import factories as campaign_factories
from tests.conftest import make_user
from tests.scoring.test_release_pipeline import make_release, rated_world

HOSTILE = 'Evil <script>alert("x")</script> & Co'


@pytest.fixture
def world(researcher, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 3, prefix="pagerater")
    return rated_world(
        researcher,
        raters,
        n_scenarios=16,
        names=("Strong-Sigma", HOSTILE, "Weak-Omega"),
        prefix="page",
    )


@pytest.fixture
def release(world):
    made = make_release(world, n_boot=100)
    assert made.state == Release.State.READY, made.message
    return made


@pytest.fixture
def member(django_user_model, world):
    user = make_user(django_user_model, "member1", RESEARCHER)
    world.campaign.members.add(user)
    return user


@pytest.fixture
def outsider(django_user_model):
    return make_user(django_user_model, "outsider1", RESEARCHER)


def test_the_leaderboard_page_shows_everything_escaped_with_bounded_queries(
    client, researcher, release, django_assert_max_num_queries
):
    client.force_login(researcher)
    url = reverse("releases:detail", kwargs={"pk": release.pk})
    with django_assert_max_num_queries(12):
        response = client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    assert "<script>alert" not in page
    assert "Evil &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co" in page
    for needle in (
        'id="leaderboard"',
        "data-sortable",
        "js/table_sort.js",
        "Human Elo",
        "Win rate vs anchor, PPI++",
        "Judge only, uncorrected",
        "Humans only",
        "Paper composite",
        "[95% CI]",
        "Which differences are significant (humans)",
        "Human win-rate matrix",
        "companion × subtask",
        "Calibration reliability",
        "reliability diagram",
        "strengths with confidence intervals",
        release.fingerprint,
        "Recompute and verify",
    ):
        assert needle in page, needle
    assert page.count("<svg") >= 5
    assert "cdn" not in page.lower() and "https://" not in page.split("</header>")[1]
    # Sort keys are numbers the JS sorter reads.
    assert 'data-sort-value="1"' in page


def test_the_list_shows_releases_with_a_constant_number_of_queries(
    client, researcher, world, release, django_assert_max_num_queries
):
    client.force_login(researcher)
    with django_assert_max_num_queries(8) as first:
        assert client.get(reverse("releases:list")).status_code == 200
    for k in range(3):
        make_release(world, name=f"More {k}", n_boot=100, compute_now=False)
    with django_assert_max_num_queries(len(first.captured_queries)):
        page = client.get(reverse("releases:list")).content.decode()
    assert release.name in page and "More 2" in page


def test_downloads_csv_json_and_markdown(client, researcher, release):
    client.force_login(researcher)
    stem = formats.file_stem(release)
    response = client.get(reverse("releases:export", kwargs={"pk": release.pk, "fmt": "csv"}))
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == f'attachment; filename="{stem}.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {r["companion"] for r in rows} == {"Strong-Sigma", HOSTILE, "Weak-Omega"}
    response = client.get(reverse("releases:export", kwargs={"pk": release.pk, "fmt": "json"}))
    document = json.loads(response.content)
    assert document["results"]["human"] == release.result.data["human"]
    assert document["release"]["code_version"] == release.result.code_version
    response = client.get(reverse("releases:export", kwargs={"pk": release.pk, "fmt": "md"}))
    markdown = response.content.decode()
    assert response["Content-Type"].startswith("text/markdown")
    assert "Evil <script>" in markdown  # Markdown is a file, not a page: the name as it is
    assert "\\| " not in markdown.split("\n")[0]


def test_creating_a_release_from_the_form(client, researcher, world):
    client.force_login(researcher)
    page = client.get(reverse("releases:create")).content.decode()
    assert "page campaign" in page and "page judge v1" in page
    data = {
        "name": "From the form",
        "campaign": world.campaign.pk,
        "companions": [c.pk for c in world.companions],
        "anchor": world.companions[0].pk,
        "judge": world.judge.pk,
        "seed": 3,
        "n_boot": 100,
    }
    response = client.post(reverse("releases:create"), data)
    release = Release.objects.get(name="From the form")
    assert response.status_code == 302
    assert response["Location"] == reverse("releases:detail", kwargs={"pk": release.pk})
    assert release.state == Release.State.READY and release.seed == 3
    assert release.created_by == researcher
    bad = client.post(
        reverse("releases:create"),
        {**data, "name": "Bad", "companions": [c.pk for c in world.companions[1:]]},
    )
    assert bad.status_code == 200 and "the anchor must be one" in bad.content.decode()
    taken = client.post(reverse("releases:create"), data)
    assert "A release with this name exists." in taken.content.decode()
    assert not Release.objects.filter(name="Bad").exists()


def test_the_form_offers_only_campaigns_the_user_manages(client, outsider, world):
    client.force_login(outsider)
    page = client.get(reverse("releases:create")).content.decode()
    assert "page campaign" not in page and "page judge" not in page
    response = client.post(
        reverse("releases:create"),
        {
            "name": "Sneaky",
            "campaign": world.campaign.pk,
            "anchor": world.companions[0].pk,
            "seed": 0,
            "n_boot": 100,
        },
    )
    assert response.status_code == 200 and not Release.objects.filter(name="Sneaky").exists()


def test_compute_button_verifies_in_a_job_and_reports_a_changed_input(
    client, researcher, release, django_capture_on_commit_callbacks
):
    """The button queues a job (the page shows its progress) and never computes inside the
    request; the job's outcome is on the page once it is done."""
    client.force_login(researcher)
    url = reverse("releases:compute", kwargs={"pk": release.pk})
    detail = reverse("releases:detail", kwargs={"pk": release.pk})
    assert client.get(url).status_code == 405
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = client.post(url, follow=True)
    page = response.content.decode()
    assert "Computing and verifying in the background" in page
    assert 'id="release-job"' in page and 'id="job-progress"' in page
    assert ">Recompute and verify<" not in page  # no second job while one runs
    release.refresh_from_db()
    assert release.check_ok is None and Job.objects.get(pk=release.job_id).state == "queued"
    for callback in queued:
        callback()  # the worker's turn (eager Celery)
    page = client.get(detail).content.decode()
    release.refresh_from_db()
    assert release.check_ok is True
    assert Job.objects.get(pk=release.job_id).state == "completed"
    assert 'id="release-job"' not in page and "bit for bit" in page
    CompanionModel.objects.filter(name="Weak-Omega").update(name="Weaker-Omega")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url)
    page = client.get(detail).content.decode()
    assert "FAILED" in page and "companion(s) changed (name" in page
    assert "The last reproducibility check failed" in page
    assert 'id="leaderboard"' in page  # the stored numbers stay visible
    release.refresh_from_db()
    assert release.check_ok is False


@pytest.mark.parametrize("who", ["owner", "member", "admin"])
def test_owners_members_and_admins_reach_a_release(
    client, who, release, researcher, member, admin_user
):
    client.force_login({"owner": researcher, "member": member, "admin": admin_user}[who])
    assert release.name in client.get(reverse("releases:list")).content.decode()
    for name, kwargs in (
        ("releases:detail", {}),
        ("releases:export", {"fmt": "csv"}),
    ):
        assert client.get(reverse(name, kwargs={"pk": release.pk, **kwargs})).status_code == 200
    api = APIClient()
    api.force_authenticate({"owner": researcher, "member": member, "admin": admin_user}[who])
    assert api.get(f"/api/releases/{release.pk}/").status_code == 200


def test_other_researchers_annotators_and_anonymous_do_not(
    client, release, outsider, django_user_model
):
    client.force_login(outsider)
    assert release.name not in client.get(reverse("releases:list")).content.decode()
    for url in (
        reverse("releases:detail", kwargs={"pk": release.pk}),
        reverse("releases:export", kwargs={"pk": release.pk, "fmt": "json"}),
    ):
        assert client.get(url).status_code == 404
    before = (release.checked_at, release.state)
    assert client.post(reverse("releases:compute", kwargs={"pk": release.pk})).status_code == 404
    release.refresh_from_db()
    assert (release.checked_at, release.state) == before
    api = APIClient()
    api.force_authenticate(outsider)
    assert api.get(f"/api/releases/{release.pk}/").status_code == 404
    assert api.post(f"/api/releases/{release.pk}/compute/").status_code == 404
    assert api.get("/api/releases/").json()["results"] == []
    rater = make_user(django_user_model, "rater9", ANNOTATOR)
    client.force_login(rater)
    assert client.get(reverse("releases:detail", kwargs={"pk": release.pk})).status_code == 403
    client.logout()
    response = client.get(reverse("releases:list"))
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert APIClient().get("/api/releases/").status_code in (401, 403)


def test_the_api_lists_shows_creates_and_verifies(researcher, world, release):
    api = APIClient()
    api.force_authenticate(researcher)
    listed = api.get("/api/releases/").json()["results"]
    assert [r["name"] for r in listed] == [release.name]
    assert listed[0]["links"]["csv"].endswith("leaderboard.csv") and "results" not in listed[0]
    detail = api.get(f"/api/releases/{release.pk}/").json()
    assert detail["state"] == "ready" and detail["fingerprint"] == release.fingerprint
    assert detail["results"] == release.result.data
    assert detail["provenance"]["results_sha256"] == release.result.data_sha256
    created = api.post(
        "/api/releases/",
        {
            "name": "Via API",
            "campaign": world.campaign.pk,
            "anchor": world.companions[2].pk,
            "n_boot": 100,
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["state"] == "ready" and body["judge"] is None
    assert body["results"]["judge_note"] == release_data.NO_JUDGE
    assert body["anchor_name"] == "Weak-Omega"
    verified = api.post(f"/api/releases/{body['id']}/compute/").json()
    assert verified["check_ok"] is True and "bit for bit" in verified["check_message"]
    invalid = api.post(
        "/api/releases/",
        {
            "name": "Bad",
            "campaign": world.campaign.pk,
            "anchor": world.companions[2].pk,
            "companions": [world.companions[0].pk, world.companions[1].pk],
        },
        format="json",
    )
    assert invalid.status_code == 400 and "anchor" in json.dumps(invalid.json())
    duplicate = api.post(
        "/api/releases/",
        {"name": "Via API", "campaign": world.campaign.pk, "anchor": world.companions[0].pk},
        format="json",
    )
    assert duplicate.status_code == 400


def test_the_leaderboard_link_is_in_the_navigation(client, researcher, annotator):
    client.force_login(researcher)
    page = client.get(reverse("releases:list")).content.decode()
    assert f'href="{reverse("releases:list")}">Leaderboard</a>' in page
    client.force_login(annotator)
    assert ">Leaderboard</a>" not in client.get(reverse("annotation:home")).content.decode()


def test_pages_of_a_failed_and_a_pending_release(client, researcher, world):
    client.force_login(researcher)
    pending = make_release(world, name="Pending", compute_now=False)
    page = client.get(reverse("releases:detail", kwargs={"pk": pending.pk})).content.decode()
    assert "Not computed yet" in page and ">Compute<" in page
    export = client.get(reverse("releases:export", kwargs={"pk": pending.pk, "fmt": "csv"}))
    assert export.status_code == 302
    Release.objects.filter(pk=pending.pk).update(state=Release.State.FAILED, message="boom <b>")
    page = client.get(reverse("releases:detail", kwargs={"pk": pending.pk})).content.decode()
    assert "could not be computed: boom &lt;b&gt;" in page


def test_every_column_and_agreement_figure_says_what_it_means(client, researcher, release):
    client.force_login(researcher)
    page = client.get(reverse("releases:detail", kwargs={"pk": release.pk})).content.decode()
    header = page.split('id="leaderboard"')[1].split("</thead>")[0]
    columns = [  # a heading's words before its interval or flag, "(humans)" left out
        th.split("<span")[0].replace("(humans)", "").strip()
        for th in re.findall(r"<th[^>]*>(.*?)</th>", header)
    ]
    meanings = page.split('id="leaderboard-meanings"')[1].split("</table>")[0]
    explained = re.findall(r"<tr><td>(.*?)</td><td>(.+?)</td></tr>", meanings)
    names = " | ".join(name.lower() for name, _ in explained)
    for column in columns:
        if column != "Companion":
            assert column.lower() in names, (column, names)
    assert all(len(text) > 30 for _, text in explained)
    agreement = page.split('id="leaderboard-agreement"')[1].split("</table>")[0]
    rho = release.result.data["agreement"]["judge_vs_human_spearman"]
    assert f"<td>{rho:.2f}</td>" in agreement
    assert "1 = the same order, 0 = unrelated" in agreement
