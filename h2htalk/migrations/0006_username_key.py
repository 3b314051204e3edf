"""Every user's name in its two unique forms (h2htalk.accounts.names): folded and skeleton.

Existing users get theirs here. Where existing names already clash (`Anna` and `anna`, or
`admin` and a Cyrillic `аdmin`), the oldest account (lowest id) keeps the key and each later one
is keyed `<key>#<id>` (`#` is not allowed in a user name, so it matches no real name); they are
listed on the console so that an admin can rename or deactivate them."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from h2htalk.accounts import names


def fill_keys(apps, schema_editor):
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    UsernameKey = apps.get_model("h2htalk", "UsernameKey")
    taken_folded, taken_skeleton, rows, clashes = set(), set(), [], []
    for pk, username in User.objects.order_by("pk").values_list("pk", "username").iterator():
        folded, skeleton = names.keys(username)
        if folded in taken_folded or skeleton in taken_skeleton:
            clashes.append(username)
            folded, skeleton = f"{folded}#{pk}", f"{skeleton}#{pk}"
        taken_folded.add(folded)
        taken_skeleton.add(skeleton)
        rows.append(UsernameKey(user_id=pk, folded=folded, skeleton=skeleton))
    UsernameKey.objects.bulk_create(rows, batch_size=1000)
    if clashes:
        shown = ", ".join(map(repr, clashes[:20])) + (" …" if len(clashes) > 20 else "")
        print(f"\n  {len(clashes)} user name(s) clash with an older one: {shown}")


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("h2htalk", "0005_profile"),
    ]

    operations = [
        migrations.CreateModel(
            name="UsernameKey",
            fields=[
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="username_key",
                        serialize=False,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                ("folded", models.CharField(max_length=600, unique=True)),
                ("skeleton", models.CharField(max_length=600, unique=True)),
            ],
        ),
        migrations.RunPython(fill_keys, migrations.RunPython.noop),
    ]
