"""A loop_group whose node was claimed but not started yet (its worker is slow, or was lost
and the sweep gave the node back) has no body to run: advancing the run meanwhile makes no
body rows. The fault suite found a round 0 of the body made and run in that window, an
agent call paid for nothing."""

from __future__ import annotations

import pytest

from loops.workflow import steps
from runs import services, tasks
from runs.actor import ENGINE
from runs.models import NodeRun

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_claimed_group_not_yet_started_gets_no_body(broker, bundled):
    run = services.start_run(bundled["writer-reviewer"], actor=ENGINE, message="m")
    tasks.advance_run(run.pk)
    group = NodeRun.objects.get(run=run, node_id="draft-loop")
    assert NodeRun.objects.claim(group.pk)  # a worker took it; start_group has not run
    tasks.advance_run(run.pk)  # e.g. the sweep, or another node's end
    assert not NodeRun.objects.filter(run=run, node_id__startswith="draft-loop.").exists()
    steps.start(run, NodeRun.objects.get(pk=group.pk))  # its worker goes on: round 1
    tasks.advance_run(run.pk)
    body = NodeRun.objects.filter(run=run, node_id__startswith="draft-loop.")
    assert list(body.values_list("node_id", "iteration")) == [("draft-loop.write", 1)]
