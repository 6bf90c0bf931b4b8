"""The LOOP_* knobs of the engine, its agents, notifications and fault tolerance, read
strictly from the environment. console.settings imports every name here, so code reads them
as `django.conf.settings.LOOP_...` like any other setting."""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from console.env import env_bool, env_int, env_list, env_url

# --- Engine ------------------------------------------------------------------------------------
LOOP_LEASE_SECONDS = env_int("LOOP_LEASE_SECONDS", 30)
LOOP_MAX_ATTEMPTS = env_int("LOOP_MAX_ATTEMPTS", 3)
# Provider limits (runs/providers/limits.py): how long a call's slot lasts unless renewed
# (a killed worker's slot comes back after it), how often a waiting call asks again, and
# how long a call may wait for its provider (slots, 429s) before it fails.
LOOP_PROVIDER_SLOT_LEASE_SECONDS = env_int("LOOP_PROVIDER_SLOT_LEASE_SECONDS", 60)
LOOP_PROVIDER_POLL_SECONDS = env_int("LOOP_PROVIDER_POLL_SECONDS", 2)
LOOP_PROVIDER_WAIT_CEILING_SECONDS = env_int("LOOP_PROVIDER_WAIT_CEILING_SECONDS", 1800)
# The longest a step's `retry.delay_ms` may make a worker wait between attempts.
LOOP_MAX_RETRY_DELAY_SECONDS = env_int("LOOP_MAX_RETRY_DELAY_SECONDS", 300)
LOOP_RECIPE_DIRS = env_list("LOOP_RECIPE_DIRS", [])
# Folders where script nodes find `uv` and `bun`; empty: the worker's PATH, then the folder of
# the console's own interpreter (where `pip install uv` into its virtualenv puts uv).
LOOP_RUNTIME_DIRS = env_list("LOOP_RUNTIME_DIRS", [])
# Git repositories step-machine runs may work in from the console and the API; each one's
# `.planeai/loops/` folder holds project recipes (the highest precedence).
LOOP_REPOSITORIES = env_list("LOOP_REPOSITORIES", [])
LOOP_USER_RECIPE_DIR = Path(
    os.getenv("LOOP_USER_RECIPE_DIR")
    or Path(os.getenv("XDG_CONFIG_HOME") or Path.home() / ".config") / "loop-console" / "recipes"
)
# The step-machine design's own user folder: read too, above LOOP_USER_RECIPE_DIR.
LOOP_PLANEAI_USER_DIR = Path(
    os.getenv("LOOP_PLANEAI_USER_DIR")
    or Path(os.getenv("XDG_CONFIG_HOME") or Path.home() / ".config") / "planeai" / "loops"
)

# The most of one iteration's or one node's output kept in the database, in bytes (UTF-8):
# a longer output keeps its end there and goes whole to a file in the run's data folder
# (runs/outputs.py). What pages, the API and later steps read is bounded by it.
LOOP_MAX_OUTPUT_BYTES = env_int(
    "LOOP_MAX_OUTPUT_BYTES", 4 * 1024 * 1024
)  # runs.outputs.DEFAULT_MAX_BYTES
if LOOP_MAX_OUTPUT_BYTES < 1024:
    raise ImproperlyConfigured(
        f"LOOP_MAX_OUTPUT_BYTES must be at least 1024 bytes, got {LOOP_MAX_OUTPUT_BYTES}"
    )
# The most of one output its file keeps, in MB (0: no cap): past it the file stops, with a
# line saying so, and keeps the output's start (the database keeps its end). A looping agent
# cannot fill the disk with one output (runs/outputs.py).
LOOP_OUTPUT_SPILL_MB = env_int("LOOP_OUTPUT_SPILL_MB", 200)  # runs.outputs.DEFAULT_SPILL_MB
if LOOP_OUTPUT_SPILL_MB < 0 or 0 < LOOP_OUTPUT_SPILL_MB * 1024 * 1024 < LOOP_MAX_OUTPUT_BYTES:
    raise ImproperlyConfigured(
        "LOOP_OUTPUT_SPILL_MB must be 0 (no cap) or at least LOOP_MAX_OUTPUT_BYTES in MB, "
        f"got {LOOP_OUTPUT_SPILL_MB}"
    )

# --- Agents and child processes ----------------------------------------------------------------
# The agent for nodes that name no provider; none by default, so a recipe that forgets
# `provider:` is told so instead of silently talking to the demo agent.
LOOP_DEFAULT_PROVIDER = os.getenv("LOOP_DEFAULT_PROVIDER", "")
# Extra names of the worker's environment that bash steps and agents may see (besides PATH,
# HOME, locale and the run's own LOOP_* values). Secrets of the console itself never pass.
LOOP_CHILD_ENV = env_list("LOOP_CHILD_ENV", [])
_NEVER_TO_CHILDREN = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}
if _NEVER_TO_CHILDREN & set(LOOP_CHILD_ENV):
    raise ImproperlyConfigured(
        "LOOP_CHILD_ENV may not name "
        + ", ".join(sorted(_NEVER_TO_CHILDREN & set(LOOP_CHILD_ENV)))
        + ": child processes never see the console's own secrets"
    )
# Environment variables an API provider's `api_key_env` may name, besides OPENAI_API_KEY (on
# openai providers) and ANTHROPIC_API_KEY (on anthropic ones): `NAME` for a provider of any
# kind, `KIND:NAME` for one kind only (`openai:ANTHROPIC_API_KEY`). The console's own
# secrets are refused whatever this says.
LOOP_PROVIDER_ENV = env_list("LOOP_PROVIDER_ENV", [])
_provider_env_names = {entry.rpartition(":")[2] for entry in LOOP_PROVIDER_ENV}
if _NEVER_TO_CHILDREN & _provider_env_names:
    raise ImproperlyConfigured(
        "LOOP_PROVIDER_ENV may not name "
        + ", ".join(sorted(_NEVER_TO_CHILDREN & _provider_env_names))
        + ": providers never receive the console's own secrets"
    )
for _entry in LOOP_PROVIDER_ENV:
    _kind, _, _name = _entry.rpartition(":")
    if _kind not in ("", "openai", "anthropic") or not _name:
        raise ImproperlyConfigured(
            f"LOOP_PROVIDER_ENV: {_entry!r} is neither NAME nor KIND:NAME with KIND openai "
            "or anthropic (e.g. OPENROUTER_KEY or openai:ANTHROPIC_API_KEY)"
        )
# Hosts a recipe's inline `providers:` may send requests to (`base_url`).
# Public API hosts only: an inline provider on an internal address (127.0.0.1, a private
# network) would let a recipe author reach services behind the worker.
LOOP_PROVIDER_HOSTS = env_list("LOOP_PROVIDER_HOSTS", ["api.openai.com", "api.anthropic.com"])
# Hosts an inline provider may reach over plain http and on any port (a model server on this
# machine or the local network; they are allowed hosts too). Any other host: https, no port.
LOOP_PROVIDER_HTTP_HOSTS = env_list("LOOP_PROVIDER_HTTP_HOSTS", [])

# --- The sandbox of child processes (runs/sandbox/, docs/security.md) ------------------------
# auto: sandbox with bubblewrap when it works here, else run unsandboxed and say so;
# required: refuse to start a process without it; off: never (and say so).
LOOP_SANDBOX = os.getenv("LOOP_SANDBOX", "auto").strip().lower() or "auto"
if LOOP_SANDBOX not in ("auto", "required", "off"):
    raise ImproperlyConfigured(f"LOOP_SANDBOX must be auto, required or off, not {LOOP_SANDBOX!r}")
# The bubblewrap program (default: `bwrap` on PATH).
LOOP_SANDBOX_BWRAP = os.getenv("LOOP_SANDBOX_BWRAP", "")
# Whether steps and gate commands may use the network when their recipe does not say.
LOOP_SANDBOX_NETWORK = os.getenv("LOOP_SANDBOX_NETWORK", "none").strip().lower() or "none"
if LOOP_SANDBOX_NETWORK not in ("none", "on"):
    raise ImproperlyConfigured("LOOP_SANDBOX_NETWORK must be none or on")
# Folders every sandbox shows read-only / read-write, and paths it hides (besides the
# data folder, the checkout and the host's password and key files).
LOOP_SANDBOX_READ = env_list("LOOP_SANDBOX_READ", [])
LOOP_SANDBOX_WRITE = env_list("LOOP_SANDBOX_WRITE", [])
LOOP_SANDBOX_HIDE = env_list("LOOP_SANDBOX_HIDE", [])
# Files of the worker's HOME copied into each run's own HOME (an agent CLI's login).
LOOP_SANDBOX_HOME_COPY = env_list("LOOP_SANDBOX_HOME_COPY", [])
# The most (and the default) each child process may use; 0: no limit. A recipe's `limits:`
# may ask for less.
LOOP_SANDBOX_CPU_SECONDS = env_int("LOOP_SANDBOX_CPU_SECONDS", 3600)
LOOP_SANDBOX_MEMORY_MB = env_int("LOOP_SANDBOX_MEMORY_MB", 4096)
LOOP_SANDBOX_PROCESSES = env_int("LOOP_SANDBOX_PROCESSES", 1024)
LOOP_SANDBOX_FILE_MB = env_int("LOOP_SANDBOX_FILE_MB", 1024)
# Each of a sandbox's /tmp, /var/tmp and /run holds at most this, and at most its memory limit.
LOOP_SANDBOX_TMP_MB = env_int("LOOP_SANDBOX_TMP_MB", 4096)
for _name in (
    "LOOP_SANDBOX_CPU_SECONDS",
    "LOOP_SANDBOX_MEMORY_MB",
    "LOOP_SANDBOX_PROCESSES",
    "LOOP_SANDBOX_FILE_MB",
    "LOOP_SANDBOX_TMP_MB",
):
    if globals()[_name] < 0:
        raise ImproperlyConfigured(f"{_name} must be 0 (no limit) or more")
# Further secrets the console's environment may give as NAME_FILE (the sandbox hides those
# files, beside the console's own and the provider keys': runs/sandbox/bwrap.py).
LOOP_SECRET_FILE_NAMES = env_list("LOOP_SECRET_FILE_NAMES", [])

# --- Notifications (notifications/) -----------------------------------------------------------
# Where people reach the console: links in notifications are built on it.
LOOP_BASE_URL = env_url("LOOP_BASE_URL", ("http", "https")) or "http://127.0.0.1:8000"
# Hosts a webhook subscription may POST to (exact names). Empty: no webhook until set.
LOOP_WEBHOOK_HOSTS = env_list("LOOP_WEBHOOK_HOSTS", [])
LOOP_NOTIFY_MAX_ATTEMPTS = env_int("LOOP_NOTIFY_MAX_ATTEMPTS", 6)
# The first retry waits this long; each later one twice the one before.
LOOP_NOTIFY_RETRY_SECONDS = env_int("LOOP_NOTIFY_RETRY_SECONDS", 30)
LOOP_NOTIFY_TIMEOUT_SECONDS = env_int("LOOP_NOTIFY_TIMEOUT_SECONDS", 10)
if LOOP_NOTIFY_MAX_ATTEMPTS < 1 or LOOP_NOTIFY_RETRY_SECONDS < 1:
    raise ImproperlyConfigured(
        "LOOP_NOTIFY_MAX_ATTEMPTS and LOOP_NOTIFY_RETRY_SECONDS must be >= 1"
    )

# How often each worker writes its heartbeat (shown by /metrics).
LOOP_WORKER_HEARTBEAT_SECONDS = env_int("LOOP_WORKER_HEARTBEAT_SECONDS", 10)

# Modules a driven recipe's hooks may come from (a hook is a function named by a dotted
# path, `package.module:function`); a path outside them is refused when the recipe loads.
LOOP_HOOK_MODULES = env_list(
    "LOOP_HOOK_MODULES",
    [
        "loops.driven.example_hooks",
        "loops.example_hooks",  # the same module's name before the kinds had a folder
        *(["tests.driven"] if env_bool("LOOP_TESTING", False) else []),
    ],
)

try:
    LOOP_DEMO_DELAY = float(os.getenv("LOOP_DEMO_DELAY", "0.03"))
except ValueError:
    raise ImproperlyConfigured("LOOP_DEMO_DELAY must be a number of seconds") from None

# --- Fault tolerance knobs (the fault suite shrinks these) ---------------------------------
# Pending work nobody claimed for this long is sent again by the sweep (its message was lost).
LOOP_STALE_PENDING_SECONDS = env_int("LOOP_STALE_PENDING_SECONDS", 30)
# A tiny visibility timeout makes the broker redeliver unacked messages within seconds (and
# scan for them every second): the fault suite uses it to prove nothing runs twice.
LOOP_VISIBILITY_TIMEOUT = env_int("LOOP_VISIBILITY_TIMEOUT", 0)

# Only the settings themselves go into console.settings (`from console.loop_settings import *`).
__all__ = [name for name in dir() if name.startswith("LOOP_")]
