"""A worker killed in the middle of a Python loop's agent call: another worker takes the
`workflow` node over and replays what was recorded, so only the interrupted call runs
again and the run ends as it would have."""

from __future__ import annotations

from recipes.editing import create_recipe
from recipes.models import Recipe
from runs import services
from runs.actor import ENGINE
from runs.models import Iteration, ProviderConfig
from tests.conftest import wait_for
from tests.python.test_gates import GATED

SLOW_REVIEWER = (
    GATED.replace("gate=True,\n", "")
    .replace(
        'Agent("reviewer", "Score it.", provider="PROVIDER"',
        'Agent("reviewer", "Score it.", provider="slow-demo"',
    )
    .replace("PROVIDER", "demo")
)


def test_killed_worker_mid_call_replays_and_completes(fault_engine, tmp_path):
    ProviderConfig.objects.create(name="slow-demo", kind="demo", options={"delay": 0.2})
    path = tmp_path / "slow_reviewer.py"
    path.write_text(SLOW_REVIEWER)
    recipe, _ = create_recipe(
        SLOW_REVIEWER, slug="slow-reviewer", origin=Recipe.Origin.PROJECT, source_path=str(path)
    )
    worker = fault_engine.start_worker()
    run = services.start_run(recipe, actor=ENGINE, message="survive a kill")

    def reviewing_two():
        it = Iteration.objects.filter(run=run, node_id="reviewer", number=2).first()
        return it and it.status == "running" and it.raw_output

    wait_for(reviewing_two, 60, interval=0.02, message="reviewer iteration 2 streaming")
    worker.kill()
    fault_engine.start_worker()
    fault_engine.sweep_until([run], timeout=120)

    assert run.status == "completed", run.error
    rows = {(it.node_id, it.number): it for it in Iteration.objects.filter(run=run).order_by("id")}
    assert sorted(rows) == [(n, i) for n in ("reviewer", "writer") for i in (1, 2, 3)]
    assert all(it.status == "completed" for it in rows.values())
    attempts = {key: it.attempts for key, it in rows.items()}
    assert attempts.pop(("reviewer", 2)) == 2  # the interrupted call, and only it, ran again
    assert set(attempts.values()) == {1}
    assert rows[("reviewer", 3)].structured["score"] == 85
    assert run.nodes.get(node_id="workflow").attempts == 2
    assert run.events.get(kind="run_completed").data["ended"] == "condition_met"
