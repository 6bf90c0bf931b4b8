"""The bundled "Scored polish" shows a new user scores and a stop rule with the demo agent:
its scores go 55, 70, 85, 100, 100, 100 and the plateau rule asks at iteration 6."""

from runs import services
from runs.actor import Actor
from tests.conftest import pending_gate, wait_run


def test_the_bundled_scored_polish_asks_at_its_plateau_and_accepting_keeps_the_draft(
    live_worker, bundled, operator
):
    actor = Actor.operator(operator, "console")
    run = services.start_run(bundled["scored-polish"], actor, message="Loops are great.")
    run = wait_run(run, "paused", "completed", "failed")
    gate = pending_gate(run)
    assert gate is not None, run.error
    assert gate.iteration.number == 6
    assert gate.message.startswith("Stop rule plateau: no gain above 1 for 2 iterations")
    scores = list(run.iterations.order_by("number").values_list("score", flat=True))
    assert scores == [55, 70, 85, 100, 100, 100]
    services.approve(gate.pk, actor)
    run = wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
