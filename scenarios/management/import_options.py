"""The options both import commands (import_scenarios, import_responses) take: --dry-run and
--user, the account recorded as the author of what is written."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError


def add_dry_run_and_user(parser, user_help: str) -> None:
    parser.add_argument("--dry-run", action="store_true", help="check and count only")
    parser.add_argument("--user", default="", help=user_help)


def author(options: dict):
    """The user named by --user (None without it); an unknown name stops the command."""
    if not options["user"]:
        return None
    user = get_user_model().objects.filter(username=options["user"]).first()
    if user is None:
        raise CommandError(f"no user {options['user']!r}")
    return user
