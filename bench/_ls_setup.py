"""Run with Label Studio's own Python (its venv), never the project's: makes one Label Studio
project for a rating bench and prints {"project": id, "tokens": [...]} as one JSON line.

Reads a JSON spec on stdin: {"title", "overlap", "annotators": n, "tasks": [{"scenario",
"a", "b"}, ...]}. The project asks one pairwise question with a Choices tag (five choices, as
our preference); its tasks are the texts given, each wanting `overlap` annotations; the n
annotators (users of the bench's organization, legacy API tokens on) are made once and reused.
The working directory is Label Studio's package folder (bench._label_studio starts it there).
"""

import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings.label_studio")  # else the bench's
sys.path.insert(0, os.getcwd())

import django

django.setup()

from organizations.models import Organization  # noqa: E402
from projects.models import Project  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402
from tasks.models import Task  # noqa: E402
from users.models import User  # noqa: E402

CHOICES = ("A much better", "A better", "Tie", "B better", "B much better")
LABEL_CONFIG = (
    "<View>"
    '<Text name="scenario" value="$scenario"/>'
    '<Text name="a" value="$a"/>'
    '<Text name="b" value="$b"/>'
    '<Choices name="preference" toName="scenario" choice="single" required="true">'
    + "".join(f'<Choice value="{choice}"/>' for choice in CHOICES)
    + "</Choices></View>"
)


def _user(email: str) -> User:
    user = User.objects.filter(email=email).first()
    return user or User.objects.create_user(email=email, password="bench-only-password")


def main() -> None:
    spec = json.load(sys.stdin)
    owner = _user("bench-owner@bench.example")
    organization = Organization.objects.filter(created_by=owner).first()
    if organization is None:
        organization = Organization.create_organization(
            created_by=owner, title="bench", legacy_api_tokens_enabled=True
        )
    jwt = organization.jwt
    jwt.legacy_api_tokens_enabled = True
    jwt.save()
    owner.active_organization = organization
    owner.save()
    tokens = []
    for i in range(spec["annotators"]):
        user = _user(f"rater-{i}@bench.example")
        organization.add_user(user)
        user.active_organization = organization
        user.save()
        tokens.append(Token.objects.get_or_create(user=user)[0].key)
    project = Project.objects.create(
        title=spec["title"][:50],
        organization=organization,
        created_by=owner,
        label_config=LABEL_CONFIG,
        maximum_annotations=spec["overlap"],
    )
    Task.objects.bulk_create(
        [Task(project=project, data=task, overlap=spec["overlap"]) for task in spec["tasks"]],
        batch_size=2000,
    )
    print(json.dumps({"project": project.id, "tokens": tokens}))


if __name__ == "__main__":
    main()
