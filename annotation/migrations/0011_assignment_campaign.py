"""Assignment.campaign: the comparison's campaign on the assignment row, with an index
(campaign, annotator, state), so that reading an annotator's items in one campaign (progress
counts, the held item) costs the same whatever they did in other campaigns (issue 24)."""

import django.db.models.deletion
from django.db import migrations, models

BACKFILL = """UPDATE annotation_assignment SET campaign_id = (
    SELECT c.campaign_id FROM annotation_comparison c
    WHERE c.id = annotation_assignment.comparison_id)"""


def backfill(apps, schema_editor):
    """Every assignment gets its comparison's campaign; on PostgreSQL the deferred foreign key
    checks then run at once, so the column can be made NOT NULL in the same transaction."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(BACKFILL)
        if schema_editor.connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0010_study_links"),
    ]

    operations = [
        migrations.AddField(
            model_name="assignment",
            name="campaign",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="annotation.campaign",
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="assignment",
            name="campaign",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="annotation.campaign",
            ),
        ),
        migrations.AddIndex(
            model_name="assignment",
            index=models.Index(
                fields=["campaign", "annotator", "state"], name="assignment_campaign_annotator"
            ),
        ),
    ]
