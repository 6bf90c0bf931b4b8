"""Runs in interesting states, built row by row (no worker needed)."""

import pytest
from django.utils import timezone

from runs import services
from runs.actor import Actor
from runs.engine.completion import gate_text
from runs.models import Gate, Iteration, NodeRun


def add_iteration(run, row, number, *, output="", status="completed", channels=(), **fields):
    now = timezone.now()
    return Iteration.objects.create(
        run=run,
        node_run=row,
        node_id=row.node_id,
        number=number,
        status=status,
        prompt=fields.pop("prompt", f"prompt of iteration {number}"),
        output=output,
        raw_output=fields.pop("raw_output", output),
        channels=list(channels),
        started_at=now,
        finished_at=None if status == "running" else now,
        duration_ms=None if status == "running" else 1200,
        **fields,
    )


def open_loop_gate(run, row, iteration, *, signaled=True):
    fired = ["until"] if signaled else []
    row.status = NodeRun.Status.PAUSED
    row.save()
    run.status = "paused"
    run.save()
    return Gate.objects.create(
        run=run,
        node_run=row,
        iteration=iteration,
        node_id=row.node_id,
        kind=Gate.Kind.LOOP,
        message=gate_text(
            fired=fired,
            declared=["until"],
            output=iteration.output,
            gate_message="Read the draft. Accept it, or write feedback for another pass.",
            signal="DONE",
        ),
        completion_signaled=bool(fired),
        channels=fired,
    )


def quiet_start(recipe, operator, message):
    """Start a run whose rows the fixture then makes by hand: nothing is sent, so no worker
    (the session's, in a test that has one) acts on it meanwhile."""
    from unittest import mock

    with mock.patch("runs.dispatch.deliver"):
        return services.start_run(
            recipe, actor=Actor.operator(operator, "console"), message=message
        )


@pytest.fixture
def guided_run(bundled, operator):
    run = quiet_start(bundled["guided-refine"], operator, "a haiku")
    run.status = "running"
    run.save()
    row = NodeRun.objects.create(
        run=run, node_id="refine", kind="loop", status="running", max_iterations=5
    )
    return run, row


@pytest.fixture
def gated_run(guided_run):
    """guided-refine paused at its first gate, the iteration having signalled completion."""
    run, row = guided_run
    row.iteration_count = 1
    row.save()
    it = add_iteration(run, row, 1, output="First draft.\n\nDONE", channels=["until"])
    gate = open_loop_gate(run, row, it, signaled=True)
    return run, gate


@pytest.fixture
def approval_run(bundled, operator):
    run = quiet_start(bundled["release-approval"], operator, "v1.2")
    run.status = "paused"
    run.save()
    row = NodeRun.objects.create(run=run, node_id="decide", kind="approval", status="paused")
    gate = Gate.objects.create(
        run=run,
        node_run=row,
        node_id="decide",
        kind=Gate.Kind.APPROVAL,
        message="Release notes: 3 changes — ship now or hold?",
        decisions=[{"id": "ship", "label": "Ship it"}, {"id": "hold", "label": "Hold"}],
    )
    return run, gate


def login(client, user):
    client.force_login(user)
    return client
