"""Jobs and runs share one set of states (h2htalk.models.State): a Job that ended well is
"completed", as a run is, no longer "succeeded". Existing rows are renamed both ways."""

from django.db import migrations, models


def rename_state(old: str, new: str):
    def rename(apps, schema_editor):
        apps.get_model("h2htalk", "Job").objects.filter(state=old).update(state=new)

    return rename


class Migration(migrations.Migration):
    dependencies = [
        ("h2htalk", "0003_cache_table"),
    ]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="state",
            field=models.CharField(
                choices=[
                    ("draft", "Draft"),
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("paused", "Paused (budget reached)"),
                    ("cancelled", "Cancelled"),
                    ("completed", "Completed"),
                    ("failed", "Failed"),
                ],
                default="queued",
                max_length=12,
            ),
        ),
        migrations.RunPython(
            rename_state("succeeded", "completed"), rename_state("completed", "succeeded")
        ),
    ]
