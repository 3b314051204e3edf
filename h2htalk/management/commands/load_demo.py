import json
import secrets
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from h2htalk.roles import ADMIN, ANNOTATOR, RESEARCHER, ensure_role_groups
from scenarios.importers import import_file
from scenarios.models import Persona

DEMO_DIR = Path(__file__).resolve().parents[3] / "scenarios" / "demo"
DEMO_USERS = [("admin", ADMIN), ("researcher", RESEARCHER), ("annotator", ANNOTATOR)]


class Command(BaseCommand):
    help = "Load the demo set (labelled 'demo') and create demo users with fresh passwords."

    @transaction.atomic
    def handle(self, *args, **options):
        ensure_role_groups()
        for definition in json.loads((DEMO_DIR / "personas.json").read_text("utf-8")):
            Persona.objects.update_or_create(name=definition["name"], defaults=definition)
        report = import_file(str(DEMO_DIR / "scenarios.jsonl"), "scenarios.jsonl")
        self.stdout.write(
            f"Demo scenarios: {report.created} new, {report.updated} updated, "
            f"{report.unchanged} unchanged."
        )
        User = get_user_model()
        lines = []
        for username, role in DEMO_USERS:
            user, _ = User.objects.get_or_create(username=username)
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.is_staff = user.is_superuser = role == ADMIN
            user.save()
            user.groups.set([Group.objects.get(name=role)])
            lines.append(f"  {role:<11} username: {username:<11} password: {password}")
        self.stdout.write(
            "\nDemo users (new passwords on every run):\n" + "\n".join(lines) + "\n"
            "\nOpen http://127.0.0.1:8000/ and log in.\n"
        )
