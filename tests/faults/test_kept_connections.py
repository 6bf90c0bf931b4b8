"""Workers keep their database connections between tasks (CELERY_DB_REUSE_MAX).

On a worker of its own (the session's worker is shared, and its connections age past
CONN_MAX_AGE on a long, busy suite), named in pg_stat_activity, with connections that do
not age out during the test: what is measured is reuse, nothing else.

The worker's main process runs no task and keeps no connection: the one Django's system
checks open as it starts (runs/checks.py queries the recipes) is closed before the pool
forks (console/celery.py). Held for the worker's life, it was a third connection beside
its two pool processes'."""

import os

from django.db import connection

from runs import services
from runs.actor import ENGINE
from tests.conftest import wait_for, wait_run

LOOP = """
name: kept
nodes:
  - id: work
    provider: slow
    loop:
      prompt: "Take one step, in a few words. When done, output: COMPLETE"
      until: COMPLETE
      max_iterations: 6
providers:
  slow: {kind: demo, complete_after: 6}
"""


def backends(name: str) -> dict[tuple, tuple]:
    """The worker's connections: (pid, backend_start) → (state, its last query)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start, state, query FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [name],
        )
        return {(pid, start): (state, query) for pid, start, state, query in cursor.fetchall()}


def described(found: dict[tuple, tuple]) -> str:
    return (
        "; ".join(
            f"pid {pid} since {start:%H:%M:%S.%f} {state}: {query[:200]!r}"
            for (pid, start), (state, query) in sorted(found.items())
        )
        or "none"
    )


def wait_for_backends(name: str, wanted, message: str) -> set[tuple]:
    """The worker's connections once `wanted(them)` holds: a connection closed a moment
    ago may still be listed until its server process has exited. Failing, it names the
    connections it saw last."""
    seen: list[dict] = [{}]

    def settled():
        seen[0] = backends(name)
        return wanted(seen[0])

    try:
        wait_for(settled, message=message)
    except AssertionError as error:
        raise AssertionError(f"{error}; it has {described(seen[0])}") from None
    return set(seen[0])


def settled_backends(name: str) -> set[tuple]:
    return wait_for_backends(
        name,
        lambda found: 0 < len(found) <= 2,
        "the worker's connections to be its two pool processes'",
    )


def test_a_worker_keeps_its_connections_from_one_task_to_the_next(fault_engine, make_recipe):
    if connection.vendor != "postgresql":
        return  # SQLite has no server connections; CI runs this on PostgreSQL
    name = f"kept-connections-{os.getpid()}"
    # Each iteration takes longer than the in-task fast path's window, so each is a task.
    fault_engine.start_worker(
        concurrency=2, PGAPPNAME=name, LOOP_DB_CONN_MAX_AGE=3600, LOOP_DEMO_DELAY="0.1"
    )
    # Before its first task, the worker holds none (its main process closed what its start
    # opened): every connection counted below is a pool process's.
    wait_for_backends(name, lambda found: not found, "the worker to hold no connection")
    recipe = make_recipe(LOOP, slug="kept")
    first = wait_run(services.start_run(recipe, actor=ENGINE, message="one"), "completed", "failed")
    assert first.status == "completed", first.error
    after_first = settled_backends(name)
    second = wait_run(
        services.start_run(recipe, actor=ENGINE, message="two"), "completed", "failed"
    )
    assert second.status == "completed", second.error
    assert second.events.filter(kind="iteration_started").count() == 6
    after_second = settled_backends(name)
    # Celery's default closes every connection after each task: none would be left, and
    # each of the second run's tasks would have opened its own. Which of the two pool
    # processes takes a task is the broker's choice: one may have its first task only in
    # the second run, so that run may add a connection, but none is replaced.
    assert after_first <= after_second, "a connection of the first run's tasks was closed"
