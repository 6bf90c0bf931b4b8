"""Workers keep their database connections between tasks (CELERY_DB_REUSE_MAX)."""

from django.db import connection

from runs import services
from tests.conftest import WORKER_APP_NAME, wait_run

LOOP = """
nodes:
  - id: work
    provider: instant
    loop:
      prompt: "Step. When done, output: COMPLETE"
      until: COMPLETE
      max_iterations: 6
providers:
  instant: {kind: demo, delay: 0, complete_after: 6}
"""


def worker_backends() -> set[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [WORKER_APP_NAME],
        )
        return set(cursor.fetchall())


def test_a_worker_keeps_its_connections_from_one_task_to_the_next(live_worker, make_recipe):
    recipe = make_recipe("name: kept\n" + LOOP, slug="kept")
    # The session's worker may be older than CONN_MAX_AGE (60 s): its first tasks here close
    # connections that old, by design. Warm up so the connections measured are fresh ones.
    for _ in range(2):
        wait_run(services.start_run(recipe, message="warm-up"), "completed")
    first = services.start_run(recipe, message="one")
    wait_run(first, "completed")
    after_first = worker_backends()
    second = services.start_run(recipe, message="two")
    wait_run(second, "completed")
    after_second = worker_backends()
    # Celery's default closes every connection after each task: none would be left, and
    # each of the second run's tasks would have opened its own.
    assert after_first, "the worker closed its connections after its tasks"
    assert after_first & after_second, "the second run's tasks did not reuse a connection"
    assert len(after_second - after_first) <= 4  # at most one new per pool process
