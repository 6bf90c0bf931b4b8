"""The Celery application; configuration comes from Django settings (CELERY_*)."""

import os

from celery import Celery, bootsteps
from celery.signals import (
    task_postrun,
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
)

# Whether the settings module is only this default: importing any console module sets it,
# which must not make a plain script look like a process given the console's settings
# (loops/python/hosts.py: django_configured).
SETTINGS_DEFAULTED = "DJANGO_SETTINGS_MODULE" not in os.environ
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class SweepWhenTheBrokerReturns(bootsteps.StartStopStep):
    """Beat cannot send the sweep while the broker is down, and after an outage its next
    tick may be a whole interval away: work lost in the outage (a killed worker's lease, a
    message the broker dropped) would wait for it. The worker's consumer starts again each
    time its broker connection comes back, and then sends one sweep itself."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent, **kwargs):
        super().__init__(parent, **kwargs)
        self.connected_before = False

    def start(self, parent) -> None:
        if not self.connected_before:
            # The worker's first connection: no outage of its own to recover from (one
            # started while the broker was down waits for beat's next tick, as before).
            self.connected_before = True
            return
        import logging

        from runs import dispatch

        try:
            dispatch.send_now("sweep")
        except dispatch.BROKER_ERRORS as exc:  # gone again: beat's next tick sends it
            logging.getLogger("console.worker").warning("sweep after reconnecting: %r", exc)


app.steps["consumer"].add(SweepWhenTheBrokerReturns)


@worker_init.connect
def keep_secrets(**_) -> None:
    """No process of the same user reads this worker's environment or memory (the pool's
    processes inherit it; they say so again below, in case a pool does not fork)."""
    from console.secrets import protect_process

    protect_process()


@worker_init.connect
def decide_sandbox(**_) -> None:
    """Whether children run sandboxed, decided once here before the pool forks: every pool
    process inherits the answer its heartbeat reports (runs/sandbox/mode.py)."""
    from runs.sandbox import status

    status()


@worker_process_init.connect
def keep_secrets_in_pool(**_) -> None:
    from console.secrets import protect_process

    protect_process()


@worker_init.connect
def keep_database_connections(**_) -> None:
    """With connections kept between tasks (CELERY_DB_REUSE_MAX), a health check before
    each task's first query would be one more round trip per task: workers check a
    connection only after an error instead (below). Runs before the pool forks.

    The main process runs no task, yet Django's system checks (run by Celery as the worker
    starts) query the database from it (runs/checks.py): Celery's own fix-up closes that
    connection here only when connections are not kept, so it is closed here, or the main
    process would hold an idle connection for the worker's life."""
    from django.conf import settings
    from django.db import connections

    if not settings.CELERY_DB_REUSE_MAX:
        return
    connections.close_all()
    for database in settings.DATABASES.values():
        database["CONN_HEALTH_CHECKS"] = False


@task_postrun.connect
def drop_broken_connections(**_) -> None:
    """A connection that raised (the server restarted, a network cut) is closed after its
    task, so the next task opens a fresh one; an unbroken one costs nothing here. Also
    closes a connection older than CONN_MAX_AGE (or hands it back to the pool)."""
    from django.conf import settings
    from django.db import connections

    if not settings.CELERY_DB_REUSE_MAX:
        return  # Celery's own fix-up closes them all
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


@worker_ready.connect
def start_heartbeat(sender=None, **_) -> None:
    """Write this worker's heartbeat for /metrics (runs/executor/heartbeat.py), with
    whether its steps and agents run sandboxed, which it also logs, with a warning for each
    password-less broker or database agents could reach over the network."""
    import logging

    from runs import sandbox
    from runs.executor import heartbeat
    from runs.sandbox import exposure

    app.loop_worker_name = getattr(sender, "hostname", "") or "worker"
    state = sandbox.status()
    log = logging.getLogger("console.worker")
    if state.active:
        log.info("steps and agents run sandboxed (%s)", state.detail)
    else:
        log.warning(
            "steps and agents run WITHOUT a sandbox: %s. They can read this machine's "
            "files and processes as the worker's user (see docs/security.md, The sandbox)",
            state.detail,
        )
    # Agents share this machine's network: a broker or database without a password is open
    # to them (runs/sandbox/exposure.py).
    for warning in exposure.warnings():
        log.warning("%s", warning)
    heartbeat.start(app.loop_worker_name, sandbox=state)


@worker_shutdown.connect
def stop_heartbeat(**_) -> None:
    from runs.executor import heartbeat

    name = getattr(app, "loop_worker_name", "")
    if name:
        heartbeat.stop(name)
