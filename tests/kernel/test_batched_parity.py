"""The one-statement hot path (runs/models/batched.py) and the ORM transitions it stands in
for leave the same rows and the same log: each loop below runs once through each path, on
PostgreSQL, and every Run, NodeRun, Iteration and Gate column (ids and times aside) and
every event (its kind, step and data) must agree."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from django.db import connection
from django.db.models import AutoField, DateTimeField, ForeignKey

from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Gate, Iteration, NodeRun, Run, batched
from runs.providers import demo
from runs.providers.base import ProviderError

SIGNALLED = """
name: parity-signal
provider: demo
nodes:
  - id: write
    loop:
      prompt: "Write the next part. When all parts are done, output: COMPLETE (after 3 iterations)"
      until: COMPLETE
      max_iterations: 5
  - id: after
    depends_on: [write]
    bash: echo done
"""

EXHAUSTED = """
name: parity-limit
provider: demo
nodes:
  - id: write
    loop:
      prompt: "Write the next part. When all parts are done, output: COMPLETE (after 9 iterations)"
      until: COMPLETE
      max_iterations: 3
"""

BROKEN = """
name: parity-broken
provider: demo
nodes:
  - id: write
    loop:
      prompt: "BREAK on the third part. Output: COMPLETE (after 9 iterations)"
      until: COMPLETE
      max_iterations: 5
"""

GATED = """
name: parity-gate
interactive: true
provider: demo
nodes:
  - id: draft
    loop:
      prompt: "Draft it. When the draft is done, output: COMPLETE (after 3 iterations)"
      until: COMPLETE
      max_iterations: 5
  - id: write
    depends_on: [draft]
    loop:
      prompt: "Improve it; once it reads well, output: DONE (after 2 iterations). $LOOP_PREV_OUTPUT"
      until: DONE
      max_iterations: 5
      interactive: true
      gate_message: Read it.
"""

# What differs between two runs of the same loop by construction: ids, times, durations.
VOLATILE_DATA = {"duration_ms", "gate", "deadline"}


@pytest.fixture(autouse=True)
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement path exists on PostgreSQL only")


@pytest.fixture
def deterministic_demo(monkeypatch):
    """The demo agent with one session id (a new one is random) and a failure on demand."""
    monkeypatch.setattr(demo, "uuid", SimpleNamespace(uuid4=lambda: uuid.UUID(int=7)))
    answer = demo.DemoProvider.run

    def run(self, request, on_chunk):
        if "BREAK" in request.prompt and request.iteration == 3:
            raise ProviderError("the agent broke on its third part")
        return answer(self, request, on_chunk)

    monkeypatch.setattr(demo.DemoProvider, "run", run)


@pytest.fixture
def paths(monkeypatch):
    """Count the calls of the one-statement path; `orm()` turns it off for this process."""
    calls = {"claim_logged": 0, "finish_then_next": 0}
    for name in calls:
        original = getattr(batched, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(batched, name, counted)

    def orm():
        monkeypatch.setattr(batched, "in_use", lambda: False)

    return SimpleNamespace(calls=calls, orm=orm)


def _gated(run, broker, operator):
    """Iterate once with feedback at the first gate, accept the signalled second."""
    actor = Actor.operator(operator, "console")
    services.approve(services.pending_gate(run).pk, actor, comment="Shorter, please.")
    broker.deliver()
    services.approve(services.pending_gate(run).pk, actor)
    broker.deliver()


def _columns(model) -> list[str]:
    """What a row says, less what names or times it (ids, foreign keys, timestamps)."""
    return [
        f.attname
        for f in model._meta.concrete_fields
        if not isinstance(f, AutoField | ForeignKey | DateTimeField)
        and f.name not in ("duration_ms", "recipe_version", "recipe")
    ]


def snapshot(run: Run) -> dict:
    rows = {
        "run": list(Run.objects.filter(pk=run.pk).values(*_columns(Run))),
        "nodes": list(
            NodeRun.objects.filter(run=run)
            .order_by("node_id", "generation", "iteration")
            .values(*_columns(NodeRun))
        ),
        "iterations": list(
            Iteration.objects.filter(run=run)
            .order_by("node_id", "generation", "number")
            .values(*_columns(Iteration))
        ),
        "gates": list(Gate.objects.filter(run=run).order_by("id").values(*_columns(Gate))),
    }
    events = [
        (e.kind, e.step, {k: v for k, v in e.data.items() if k not in VOLATILE_DATA})
        for e in run.events.order_by("seq")
    ]
    shapes = [(e.kind, e.step, sorted(e.data)) for e in run.events.order_by("seq")]
    return {"rows": rows, "events": events, "shapes": shapes}


def run_once(recipe, broker, then=None) -> dict:
    run = services.start_run(recipe, ENGINE, message="parity")
    broker.deliver()
    if then is not None:
        then(run)
    run.refresh_from_db()
    return snapshot(run)


@pytest.mark.parametrize(
    ("source", "status"),
    [
        (SIGNALLED, Run.Status.COMPLETED),
        (EXHAUSTED, Run.Status.FAILED),
        (BROKEN, Run.Status.FAILED),
        (GATED, Run.Status.COMPLETED),
    ],
    ids=["signal", "max-iterations", "fails", "gate"],
)
def test_the_batched_and_the_orm_path_leave_the_same_rows_and_events(
    make_recipe, broker, deterministic_demo, paths, operator, source, status
):
    recipe = make_recipe(source, "parity")
    then = (lambda run: _gated(run, broker, operator)) if source is GATED else None
    fast = run_once(recipe, broker, then)
    assert paths.calls["claim_logged"] and paths.calls["finish_then_next"], paths.calls
    assert fast["rows"]["run"][0]["status"] == status, fast["rows"]["run"][0]["error"]
    taken = dict(paths.calls)
    paths.orm()
    slow = run_once(recipe, broker, then)
    assert paths.calls == taken  # the second run never took the one-statement path
    assert slow["shapes"] == fast["shapes"]
    assert slow["events"] == fast["events"]
    for table, rows in fast["rows"].items():
        assert slow["rows"][table] == rows, table
