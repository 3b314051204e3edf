"""Statements counted from PostgreSQL's own log: every statement a server's connections send to
one database (BEGIN, COMMIT and health checks included), not what the client thinks it sent.

`log_statement = 'all'` is set on the bench's own database only (ALTER DATABASE: new sessions
take it), for as long as the count runs; the server's log is read from where it stood before.
The log file is BENCH_PG_LOG, else the Debian default under /var/log/postgresql; when it cannot
be read the count says so and nothing is guessed. log_line_prefix must name the process and the
database (Debian's default, '%m [%p] %q%u@%d ', does).
"""

import os
import re
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

_LINE = re.compile(
    r"\[(?P<pid>\d+)\] \S*@(?P<db>\S+) LOG:  (?:statement|execute [^:]*): (?P<sql>.*)"
)


def log_file() -> Path | None:
    named = os.environ.get("BENCH_PG_LOG", "").strip()
    candidates = [Path(named)] if named else sorted(Path("/var/log/postgresql").glob("*.log"))
    for path in candidates:
        if os.access(path, os.R_OK):
            return path
    return None


def _kind(sql: str) -> str:
    text = sql.strip().rstrip(";").upper()
    if text in ("BEGIN", "COMMIT", "ROLLBACK"):
        return "transaction"
    if text == "SELECT 1":
        return "health check"
    return "other"


@contextmanager
def statements_logged(database: str, server_url: str):
    """Within the block, new sessions of `database` log every statement; yields a function
    returning the Counter of statement kinds logged so far (None without a readable log)."""
    import psycopg
    from psycopg import sql

    path = log_file()
    offset = path.stat().st_size if path else 0
    name = sql.Identifier(database)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET log_statement = 'all'").format(name))
    try:

        def counted() -> Counter | None:
            if path is None:
                return None
            kinds = Counter()
            with path.open("rb") as log:
                log.seek(offset)
                for raw in log:
                    found = _LINE.search(raw.decode("utf-8", "replace"))
                    if found and found["db"] == database:
                        kinds[_kind(found["sql"])] += 1
            return kinds

        yield counted
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} RESET log_statement").format(name))
