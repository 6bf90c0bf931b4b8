"""The console's own services an agent could reach over the network, and that take no password.

Agents share the worker's network namespace (they must reach their model's API), so they
reach whatever the worker's machine reaches: a broker or database on 127.0.0.1 or on the
local network. The embedded default is out of their reach — a Redis listening only on a
unix socket in the data folder (console/embedded.py: `--port 0`) and a SQLite file there,
both hidden by the sandbox — and so is any server on a unix socket (the sandbox's /run,
/tmp and /var are its own). A TCP service is reachable; without a password it is open:
`PSUBSCRIBE *` on a password-less Redis reads every run's live output.

A password in the URL is what can be seen from here; whether the server requires it
(Redis `requirepass`, PostgreSQL not `trust` in pg_hba.conf) cannot.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qs, urlsplit

from django.conf import settings

TCP_BROKERS = {"redis": "Redis", "rediss": "Redis", "amqp": "AMQP", "amqps": "AMQP"}
FIXES = {
    "Redis": "redis://:PASSWORD@host:6379/0, with `requirepass PASSWORD` in redis.conf",
    "AMQP": "amqp://user:PASSWORD@host:5672//, a user of its own",
    "PostgreSQL": (
        "postgres://user:PASSWORD@host:5432/db, with scram-sha-256 (not trust) for TCP "
        "in pg_hba.conf"
    ),
}
WHAT_IT_GIVES = {
    "Redis": "read every run's live output and tamper with the task queue",
    "AMQP": "read and tamper with the task queue",
    "PostgreSQL": "read and change everything the console stores",
}


class Exposed(NamedTuple):
    setting: str  # the variable that names it: REDIS_URL, CELERY_BROKER_URL, DATABASE_URL
    service: str  # Redis, AMQP, PostgreSQL
    address: str  # host:port

    @property
    def fix(self) -> str:
        return FIXES[self.service]


def exposed_services() -> list[Exposed]:
    """The broker and database this console uses over TCP without a password."""
    found: list[Exposed] = []
    seen: set[str] = set()
    for setting in ("REDIS_URL", "CELERY_BROKER_URL"):
        url = getattr(settings, setting, None) or ""
        if url and url not in seen:
            seen.add(url)
            exposed = _broker(setting, url)
            if exposed:
                found.append(exposed)
    database = _database(settings.DATABASES["default"])
    if database:
        found.append(database)
    return found


def _broker(setting: str, url: str) -> Exposed | None:
    parts = urlsplit(url)
    service = TCP_BROKERS.get(parts.scheme)
    if service is None:  # a unix socket (redis+socket://, unix://), memory://
        return None
    if parts.password or parse_qs(parts.query).get("password"):
        return None
    default_port = 5672 if service == "AMQP" else 6379
    return Exposed(
        setting, service, f"{parts.hostname or 'localhost'}:{parts.port or default_port}"
    )


def _database(database: dict) -> Exposed | None:
    if not database.get("ENGINE", "").endswith("postgresql"):
        return None  # SQLite: a file in the data folder, hidden from the sandbox
    host = database.get("HOST") or os.environ.get("PGHOST", "")
    if not host or host.startswith("/"):
        return None  # a unix socket, in a folder the sandbox does not show
    options = database.get("OPTIONS") or {}
    if database.get("PASSWORD") or options.get("password") or options.get("passfile"):
        return None
    # libpq's other places for a password.
    if os.environ.get("PGPASSWORD") or os.environ.get("PGPASSFILE"):
        return None
    if (Path.home() / ".pgpass").is_file():
        return None
    return Exposed("DATABASE_URL", "PostgreSQL", f"{host}:{database.get('PORT') or 5432}")


def warnings() -> list[str]:
    """One plain sentence per exposed service, for the worker's start-up log."""
    return [
        f"{e.setting} names {e.service} at {e.address} without a password. Agents with "
        "network access (every agent whose node does not say `network: none`) can reach it "
        f"on this machine's network and {WHAT_IT_GIVES[e.service]}. Set a password: {e.fix} "
        "(docs/security.md, The network)"
        for e in exposed_services()
    ]
