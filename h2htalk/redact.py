"""Secrets that travel in a URL are kept out of every log.

A one-time link to set a password is `/password/set/<uidb64>/<token>/`: the browser's first
GET carries the token in the path (Django's view then moves it into the session and redirects
to `/password/set/<uidb64>/set-password/`). The token would otherwise reach
- the WSGI server's access log (gunicorn formats it from the request's environ after the
  response): `RedactSecrets` rewrites the environ's path, raw URI and Referer once the
  application has answered, so the log shows `/password/set/<uidb64>/[redacted]/` — the
  user's id, which is not a secret, and no token;
- Django's own log lines (a 4xx warning names the path, `runserver` logs every request):
  `RedactingFilter` on the logging handlers does the same to every record.
A proxy in front of the server (nginx) keeps its own log: configure it as the README says.
"""

import logging
import re

MARK = "[redacted]"
_TOKEN_IN_PATH = re.compile(r"(/password/set/[^/?#\s]+/)(?!set-password/)[^/?#\s]+")
_ENVIRON_KEYS = ("RAW_URI", "REQUEST_URI", "PATH_INFO", "HTTP_REFERER")


def redact(text: str) -> str:
    """`text` with the token of every set-password path replaced by MARK."""
    return _TOKEN_IN_PATH.sub(rf"\g<1>{MARK}", text)


class RedactSecrets:
    """WSGI middleware: after the application answered, the environ the server logs from
    carries no token (the application itself saw the real path)."""

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        try:
            return self.application(environ, start_response)
        finally:
            for key in _ENVIRON_KEYS:
                value = environ.get(key)
                if isinstance(value, str) and "/password/set/" in value:
                    environ[key] = redact(value)


class RedactingFilter(logging.Filter):
    """A logging filter that removes set-password tokens from the formatted message."""

    def filter(self, record):
        message = record.getMessage()
        if "/password/set/" in message:
            record.msg, record.args = redact(message), ()
        return True
