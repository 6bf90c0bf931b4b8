"""Workers keep their database connections between tasks (CELERY_DB_REUSE_MAX).

On a worker of its own (the session's worker is shared, and its connections age past
CONN_MAX_AGE on a long, busy suite), named in pg_stat_activity, with connections that do
not age out during the test: what is measured is reuse, nothing else."""

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


def backends(name: str) -> set[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [name],
        )
        return set(cursor.fetchall())


def settled_backends(name: str) -> set[tuple]:
    """The worker's connections once its pool's are all that is left: a lease keeper's
    thread (runs.executor.lease.keep_lease) holds one of its own while it beats and closes
    it as it ends, which a loaded machine may catch between the two."""
    return wait_for(
        lambda: (found := backends(name)) and len(found) <= 2 and found,
        message="the worker's connections to be its two pool processes'",
    )


def test_a_worker_keeps_its_connections_from_one_task_to_the_next(fault_engine, make_recipe):
    if connection.vendor != "postgresql":
        return  # SQLite has no server connections; CI runs this on PostgreSQL
    name = f"kept-connections-{os.getpid()}"
    # Each iteration takes longer than the in-task fast path's window, so each is a task.
    fault_engine.start_worker(
        concurrency=2, PGAPPNAME=name, LOOP_DB_CONN_MAX_AGE=3600, LOOP_DEMO_DELAY="0.1"
    )
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
    assert after_first, "the worker closed its connections after its tasks"
    assert after_first <= after_second, "a connection of the first run's tasks was closed"
    assert len(after_second) <= 2, "the second run's tasks opened new connections"
