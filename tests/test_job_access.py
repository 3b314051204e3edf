"""Jobs belong to their creator (issue 12.6): another researcher gets 404 on the job page, its
progress partial, an import's preview and its confirmation, and starts nothing; admins see
every job; a campaign's job is also seen by those who manage the campaign (owner, members).
All of it goes through one function, h2htalk.jobs.can_see_job."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse

from h2htalk import jobs
from h2htalk.models import Job
from h2htalk.roles import RESEARCHER
from tests.annotation import factories as campaign_factories
from tests.conftest import make_user

KINDS = {
    "scenario_import": "scenarios:import_confirm",
    "response_import": "companions:response_import_confirm",
    "judge_import": "judges:import_confirm",
}


@pytest.fixture
def other(roles, django_user_model):
    return make_user(django_user_model, "researcher2", RESEARCHER)


def preview(kind: str, owner) -> Job:
    """A successful preview of an import, as the upload leaves it."""
    return Job.objects.create(
        kind=kind,
        state=Job.State.COMPLETED,
        created_by=owner,
        params={
            "path": f"imports/x/{kind}.jsonl",
            "filename": "f.jsonl",
            "judge": "j",
            "run_name": "",
            "dry_run": True,
        },
        result={"rows": 1, "errors": []},
    )


def pages(job: Job) -> list[str]:
    urls = [reverse("job_detail", args=[job.pk]), reverse("job_progress", args=[job.pk])]
    if job.kind == "judge_import":
        urls.append(reverse("judges:import_job", args=[job.pk]))
    return urls


@pytest.mark.parametrize("kind", list(KINDS))
def test_another_researcher_gets_404_and_confirms_nothing(client, researcher, other, kind):
    job = preview(kind, researcher)
    client.force_login(other)

    for url in pages(job):
        assert client.get(url).status_code == 404, url
    response = client.post(reverse(KINDS[kind], args=[job.pk]))
    assert response.status_code == 404
    assert Job.objects.count() == 1  # no write job was started
    assert "confirmed_job" not in Job.objects.get(pk=job.pk).params


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_creator_and_an_admin_see_the_job(client, researcher, admin_user, kind):
    job = preview(kind, researcher)
    for user in (researcher, admin_user):
        client.force_login(user)
        for url in pages(job):
            assert client.get(url).status_code == 200, (user, url)


def test_the_creator_confirms_a_preview(client, researcher, django_capture_on_commit_callbacks):
    job = preview("scenario_import", researcher)
    client.force_login(researcher)
    response = client.post(reverse("scenarios:import_confirm", args=[job.pk]))
    written = Job.objects.exclude(pk=job.pk).get()
    assert response["Location"] == reverse("job_detail", args=[written.pk])
    assert written.created_by == researcher and written.params["dry_run"] is False


def test_a_campaign_job_is_seen_by_those_who_manage_the_campaign(
    client, researcher, other, annotator, admin_user, django_user_model
):
    member = make_user(django_user_model, "member1", RESEARCHER)
    campaign = campaign_factories.campaign(researcher, [annotator], n_scenarios=2)
    campaign.members.add(member)
    agreement = Job.objects.create(
        kind="agreement", created_by=researcher, params={"campaign": campaign.pk}
    )
    build = Job.objects.create(
        kind="campaign_build",
        created_by=researcher,
        params={"campaign_id": campaign.pk, "campaign": campaign.name},
    )

    for job in (agreement, build):
        assert jobs.can_see_job(member, job)
        assert jobs.can_see_job(researcher, job)
        assert jobs.can_see_job(admin_user, job)
        assert not jobs.can_see_job(other, job)
        assert not jobs.can_see_job(AnonymousUser(), job)
        client.force_login(member)
        assert client.get(reverse("job_detail", args=[job.pk])).status_code == 200
        client.force_login(other)
        assert client.get(reverse("job_detail", args=[job.pk])).status_code == 404


def test_a_job_without_a_creator_is_the_admins_only(researcher, admin_user):
    job = Job.objects.create(kind="scenario_import", params={"path": "imports/x/a.jsonl"})
    assert not jobs.can_see_job(researcher, job)
    assert jobs.can_see_job(admin_user, job)
