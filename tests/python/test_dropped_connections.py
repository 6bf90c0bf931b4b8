"""A Python run survives its database connection dropping between its steps, as a
workflow iteration does: the session that recorded an agent call's start is terminated
after the agent's last output, and the call's end is recorded on a new connection. The
tasks are run here, in order, as a worker would (messages kept in a list)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from loops.python import recording
from recipes.editing import create_recipe
from recipes.models import Recipe
from runs import dispatch, services
from runs.actor import ENGINE
from runs.executor import handover, scheduler
from runs.models import Iteration, NodeRun
from runs.providers.base import AgentResult as ProviderResult

pytestmark = pytest.mark.django_db(transaction=True)

SOURCE = '''"""One writer"""
from loops.python import Agent

workflow = Agent("writer", "Write.", provider="demo")
'''


def terminate_this_threads_session() -> None:
    """Terminate, from another session, the database session of the calling thread."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


class DroppingProvider:
    """Answers, then has the worker's database session terminated (the soak's fault at
    the end of an agent call: after the stream's last flush, before the call is recorded)."""

    name = "dropping"
    structured_output = "best_effort"

    def run(self, request, on_chunk) -> ProviderResult:
        on_chunk("the draft")
        terminate_this_threads_session()
        return ProviderResult(text="the draft", tokens_in=1, tokens_out=1, cost_usd=None)


def test_a_connection_dropped_at_the_end_of_a_call_does_not_fail_the_run(monkeypatch, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: a server session to terminate")
    sent: list = []
    monkeypatch.setattr(dispatch, "deliver", lambda name, *args: sent.append((name, args)))
    monkeypatch.setattr(recording, "resolve_provider", lambda name, run: DroppingProvider())
    path = tmp_path / "one_writer.py"
    path.write_text(SOURCE)
    recipe, _ = create_recipe(
        SOURCE, slug="one-writer", origin=Recipe.Origin.PROJECT, source_path=str(path)
    )
    run = services.start_run(recipe, actor=ENGINE, message="Write")
    tasks = {"advance_run": scheduler.advance_run, "start_node": handover.start_node}
    while sent:
        name, args = sent.pop(0)
        tasks[name](*args)
    run.refresh_from_db()
    assert run.status == "completed", run.error
    writer = Iteration.objects.get(run=run, node_id="writer")
    assert (writer.status, writer.output, writer.attempts) == ("completed", "the draft", 1)
    assert not NodeRun.objects.filter(run=run, status="running").exists()


def test_a_connection_dropped_before_the_provider_is_looked_up(monkeypatch, tmp_path):
    """The call's start is recorded, then the session drops before the provider's row is
    read (an admin-configured provider): looked up again on a new connection, not failed as
    the agent's error."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: a server session to terminate")
    from runs.models import ProviderConfig

    ProviderConfig.objects.create(name="slow-demo", kind="demo", options={"delay": 0})
    real = recording.resolve_provider
    dropped = []

    def dropping_first(name, run):
        if not dropped:
            dropped.append(name)
            terminate_this_threads_session()
        return real(name, run)

    sent: list = []
    monkeypatch.setattr(dispatch, "deliver", lambda name, *args: sent.append((name, args)))
    monkeypatch.setattr(recording, "resolve_provider", dropping_first)
    source = SOURCE.replace('provider="demo"', 'provider="slow-demo"')
    path = tmp_path / "slow_writer.py"
    path.write_text(source)
    recipe, _ = create_recipe(
        source, slug="slow-writer", origin=Recipe.Origin.PROJECT, source_path=str(path)
    )
    run = services.start_run(recipe, actor=ENGINE, message="Write")
    tasks = {"advance_run": scheduler.advance_run, "start_node": handover.start_node}
    while sent:
        name, args = sent.pop(0)
        tasks[name](*args)
    run.refresh_from_db()
    assert dropped and run.status == "completed", run.error
    assert Iteration.objects.get(run=run, node_id="writer").status == "completed"
