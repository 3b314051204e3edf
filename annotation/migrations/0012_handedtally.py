"""HandedTally: each annotator's items per campaign and those on comparisons at k, so the
progress counts read one row instead of visiting every item the rater had in the campaign
(issue 24); and no lone index on Assignment.annotator ((annotator, state) starts with it)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Count, F, Q


def count_handed(apps, schema_editor):
    """Each annotator's items per campaign and those on comparisons at k, from the rows."""
    Assignment = apps.get_model("annotation", "Assignment")
    HandedTally = apps.get_model("annotation", "HandedTally")
    full = Q(comparison__judgment_count__gte=F("campaign__overlap"))
    rows = (
        Assignment.objects.values("campaign_id", "annotator_id")
        .annotate(handed=Count("pk"), on_full=Count("pk", filter=full))
        .order_by()
    )
    HandedTally.objects.bulk_create(
        [HandedTally(**row) for row in rows.iterator(chunk_size=2000)], batch_size=2000
    )


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0011_assignment_campaign"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="HandedTally",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("handed", models.PositiveIntegerField(default=0)),
                ("on_full", models.PositiveIntegerField(default=0)),
                (
                    "annotator",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "campaign",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="annotation.campaign",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("campaign", "annotator"), name="one_handed_tally_per_annotator"
                    )
                ],
            },
        ),
        migrations.RunPython(count_handed, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="assignment",
            name="annotator",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="assignments",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
    ]
