"""Secrets from the environment or from files, and a process that keeps them to itself.

Every secret the console reads (SECRET_KEY, DATABASE_URL, REDIS_URL, CELERY_BROKER_URL,
provider keys) may be given as `NAME` or as `NAME_FILE`, the path of a file holding it
(the convention of container secrets): a secret in a file is never in the process's
environment block, which `/proc/<pid>/environ` shows to processes of the same user.

`protect_process` makes the calling process non-dumpable: processes of the same user can
then neither read its `/proc/<pid>/environ` and memory nor attach a debugger to it. The
worker, the web server and `manage.py serve` call it at start (console/celery.py,
console/asgi.py, console/management/commands/serve.py).
"""

from __future__ import annotations

import ctypes
import logging
import os

from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger(__name__)
PR_SET_DUMPABLE = 4
# The secrets the console itself reads with `secret` (its own, and the provider keys it
# holds for HTTP providers and agent CLIs): the sandbox hides the file each one's
# NAME_FILE names (runs/sandbox/bwrap.py: secret_files, which adds LOOP_PROVIDER_ENV's and
# LOOP_SECRET_FILE_NAMES's names). Any other `*_FILE` (SSL_CERT_FILE) is not a secret.
SECRET_NAMES = (
    "SECRET_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "LOOP_SLACK_BOT_TOKEN",
    "LOOP_SLACK_SIGNING_SECRET",
    "LOOP_OIDC_CLIENT_SECRET",
)


def secret(name: str) -> str:
    """`NAME` from the environment, else the content of the file `NAME_FILE` names (one
    trailing newline removed); "" when neither is set."""
    value = os.environ.get(name)
    if value:
        return value
    path = os.environ.get(f"{name}_FILE")
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ImproperlyConfigured(
            f"{name}_FILE names {path}, which cannot be read: {exc.strerror or exc}"
        ) from None
    return text.removesuffix("\n").removesuffix("\r")


def protect_process() -> bool:
    """Make this process non-dumpable (Linux); False where that is not possible."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return False
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        log.warning("could not make this process non-dumpable (errno %s)", ctypes.get_errno())
        return False
    return True
