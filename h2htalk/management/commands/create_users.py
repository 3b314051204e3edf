import contextlib
import os
import tempfile

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from h2htalk.accounts import links, onboarding


class Command(BaseCommand):
    help = (
        "Create users from a CSV file with the columns username,email,role,campaigns (role: "
        "admin, researcher or annotator; campaigns: names or ids separated by ';'). All or "
        "nothing; existing users are not created again, the row's role and campaigns are "
        "added to theirs. Prints a one-time link to set a password for each user who needs one."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="the users CSV (UTF-8)")
        parser.add_argument(
            "--links-out",
            metavar="PATH",
            help="write the links as CSV to PATH (readable by you only) instead of printing them",
        )
        parser.add_argument(
            "--base-url",
            default=settings.SITE_URL,
            help="the site's address the links start with (default: SITE_URL, %(default)s)",
        )
        parser.add_argument("--dry-run", action="store_true", help="check the file, write nothing")

    def handle(self, *args, **options):
        if options["links_out"] and os.path.islink(options["links_out"]):  # before any write
            raise CommandError(f"{options['links_out']} is a symbolic link: refused")
        rows = self._read(options["file"])
        try:
            if options["dry_run"]:
                onboarding.check(rows)
                self.stdout.write(f"{len(rows)} row(s), no errors [dry run, nothing written]")
                return
            with tqdm(total=len(rows), desc="users", unit="user", disable=None) as bar:
                outcomes = onboarding.create_users(
                    rows, options["base_url"], track=lambda plan: bar_iter(plan, bar)
                )
        except onboarding.OnboardingError as error:
            raise CommandError(f"{options['file']}: {error}") from error
        for outcome in outcomes:
            changes = f" ({'; '.join(outcome.changes)})" if outcome.changes else ""
            self.stdout.write(f"{outcome.username}: {outcome.status}{changes}")
        self._links(outcomes, options["links_out"])

    def _read(self, path):
        try:
            with open(path, "rb") as stream:
                return onboarding.read_csv(stream, limit=None)  # no web timeout here
        except OSError as error:
            raise CommandError(f"{path}: {error.strerror}") from error
        except onboarding.OnboardingError as error:
            raise CommandError(f"{path}: {error}") from error

    def _links(self, outcomes, path):
        created = sum(o.status == onboarding.CREATED for o in outcomes)
        with_link = [o for o in outcomes if o.link]
        summary = (
            f"{created} created, {len(outcomes) - created} already existed; "
            f"{len(with_link)} link(s), valid until {links.expiry():%Y-%m-%d %H:%M %Z}"
        )
        if path:
            write_secret(path, onboarding.links_csv(outcomes))
            self.stdout.write(f"{summary}; written to {path}")
            return
        for outcome in with_link:
            self.stdout.write(f"{outcome.username}\t{outcome.link}")
        self.stdout.write(summary)


def write_secret(path: str, text: str) -> None:
    """Write `text` to `path`, readable by its owner only, never through a link: a symbolic
    link at `path` is refused, and the text goes to a new file (exclusive create, mode 0600)
    that then replaces `path` by rename, so no existing file (a hard link's other name, a
    symlink's target) is ever opened or truncated."""
    if os.path.islink(path):
        raise CommandError(f"{path} is a symbolic link: refused (give the file itself)")
    folder = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".links-", suffix=".csv")
    try:
        os.fchmod(descriptor, 0o600)  # mkstemp's mode already; said here because it matters
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def bar_iter(items, bar):
    for item in items:
        yield item
        bar.update(1)
