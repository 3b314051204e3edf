"""A ready campaign: scenarios, companions with imported responses, comparisons, annotators."""

from django.contrib.auth.models import Group

from annotation.models import Campaign
from annotation.pairing import build_comparisons
from scenarios.models import CompanionModel, GenerationRun, Response
from tests.conftest import PASSWORD
from tests.scenarios import factories


def companions(names=("Zephyr-Alpha-77", "Quokka-Beta-13", "Marlin-Gamma-42"), start_id=987650):
    """Distinctive names and ids, so a blindness test can search pages for them."""
    return [
        CompanionModel.objects.get_or_create(
            pk=start_id + i, defaults={"name": name, "provider": "imported"}
        )[0]
        for i, name in enumerate(names)
    ]


def annotators(django_user_model, n, prefix="rater"):
    group = Group.objects.get(name="annotator")
    users = []
    for i in range(n):
        user = django_user_model.objects.create_user(f"{prefix}{i}", password=PASSWORD)
        user.groups.add(group)
        users.append(user)
    return users


def campaign(owner, raters, n_scenarios=4, overlap=3, state=Campaign.State.OPEN, **fields):
    models = fields.pop("companions", None) or companions()
    run = GenerationRun.objects.create(
        name=f"responses {owner.pk}-{GenerationRun.objects.count()}", kind="import"
    )
    for i in range(n_scenarios):
        scenario = factories.scenario(owner, state="approved", tags=["campaign"])
        for model in models:
            Response.objects.create(
                run=run,
                scenario=scenario,
                companion=model,
                text=f"Answer number {i} in style {model.pk % 7}",
            )
    created = Campaign.objects.create(
        name=fields.pop("name", f"campaign {Campaign.objects.count() + 1}"),
        owner=owner,
        overlap=overlap,
        state=state,
        scenario_query="tags=campaign",
        **fields,
    )
    created.companions.set(models)
    created.runs.set([run])
    created.annotators.set(raters)
    build_comparisons(created)
    return created
