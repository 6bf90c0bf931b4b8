"""A repository's `.archon` workflows through a real worker: bash, a named uv script, an
included block and a fan-out over three child runs (one fails), for both join rules; the
cancel cascade, resumed parents, and the sweep recovering a parent whose message was lost."""

from __future__ import annotations

import json

import pytest

from recipes.models import Recipe
from recipes.sync import sync
from runs import services
from runs.actor import ENGINE, Actor
from runs.executor import sweep as sweeper
from runs.models import Run, RunEvent
from runs.serializers import run_summary
from tests.archon_repo import make_archon_repo
from tests.conftest import requires_runtime, wait_for, wait_run

from .conftest import node


@pytest.fixture
def archon(live_worker, tmp_path, settings):
    root = make_archon_repo(tmp_path / "checkout")
    settings.LOOP_RECIPE_DIRS = [str(root)]
    sync()
    return {r.slug: r for r in Recipe.objects.filter(origin="project")}


def children_of(run) -> list[Run]:
    return list(Run.objects.filter(parent=run).order_by("child_index"))


def test_all_done_join_keeps_every_child_result_and_completes(archon):
    run = services.start_run(archon["fan-all-done"], actor=ENGINE, message="ship it")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert node(run, "setup").output == "setup for ship it"
    # The included block: namespaced nodes, its inputs as data, `$prepare.output` = returns.
    assert node(run, "prepare__gather").output == "gathered setup for ship it"
    assert node(run, "prepare__shape").output == "plain it"
    assert node(run, "prepare__audit").status == "completed"
    assert json.loads(node(run, "list").output) == ["alpha", "fail-me", "it"]
    kids = children_of(run)
    assert [(c.child_index, c.message, c.status) for c in kids] == [
        (0, "alpha", "completed"),
        (1, "fail-me", "failed"),
        (2, "it", "completed"),
    ]
    assert all(c.recipe.slug == "handle-item" and c.parent_node.node_id == "each" for c in kids)
    each = node(run, "each")
    assert each.status == "completed"
    results = json.loads(each.output)  # item order, the failure as data in its slot
    assert results[0] == "handled alpha" and results[2] == "handled it"
    assert results[1]["archon_failed"] is True and results[1]["status"] == "failed"
    assert "bash exited with status 3" in results[1]["error"]
    assert node(run, "report").output == "2 of 3 handled"
    # The API and the CLI read the same links both ways.
    summary = run_summary(run)
    assert next(n for n in summary["nodes"] if n["node"] == "each")["child_runs"] == [
        c.pk for c in kids
    ]
    assert summary["parent"] is None
    assert run_summary(kids[1])["parent"] == {"run": run.pk, "node": "each", "item": 1}
    # max_parallel 2: the third child started only once one of the first two had ended.
    events = list(RunEvent.objects.filter(run=run, step="each").order_by("seq"))
    started = [e.seq for e in events if e.kind == "child_run_started"]
    finished = [e.seq for e in events if e.kind == "child_run_finished"]
    assert len(started) == 3 and len(finished) == 3 and started[2] > finished[0]


def test_all_success_join_fails_the_node_after_every_child_ended(archon):
    run = services.start_run(archon["fan-all-success"], actor=ENGINE, message="ship it")
    wait_run(run, "completed", "failed")
    assert run.status == "failed"
    each = node(run, "each")
    assert each.status == "failed"
    assert "1 of 3 child runs did not complete (join all_success)" in each.error
    failed_child = children_of(run)[1]
    assert f"run {failed_child.pk} (item 1) failed" in each.error
    # Children are independent: the others still ran to the end.
    assert [c.status for c in children_of(run)] == ["completed", "failed", "completed"]
    assert node(run, "report").status == "skipped"
    assert "'each' failed" in run.error


def test_cancelling_the_parent_cancels_its_children(archon, make_recipe):
    make_recipe("name: slow\nnodes:\n  - {id: wait, bash: 'sleep 60'}\n", slug="slow-child")
    parent = make_recipe(
        """
name: waits
nodes:
  - id: list
    bash: echo '["a", "b", "c"]'
  - id: each
    workflow: slow-child
    depends_on: [list]
    fan_out: {items: $list.output, max_parallel: 2}
""",
        slug="waits",
    )
    run = services.start_run(parent, actor=ENGINE, message="go")
    wait_for(
        lambda: Run.objects.filter(parent=run, status="running").count() == 2,
        message="two running children",
    )
    services.cancel_run(run, Actor("engine"), reason="enough")
    for child in children_of(run):
        wait_run(child, "cancelled")
        assert f"run {run.pk}, which started it, stopped: enough" in child.error
    assert len(children_of(run)) == 2  # the third item never started
    run.refresh_from_db()
    assert run.status == "cancelled" and node(run, "each").status == "cancelled"


def test_resuming_a_parent_keeps_completed_children_and_resumes_failed_ones(archon):
    run = services.start_run(archon["fan-all-success"], actor=ENGINE, message="ship it")
    wait_run(run, "completed", "failed")
    first = children_of(run)
    services.resume_run(run, Actor("engine"))
    wait_for(
        lambda: RunEvent.objects.filter(run=run, kind="child_run_resumed").exists(),
        message="the failed child resumed",
    )
    wait_run(run, "failed", "completed")
    # The failing item fails again; nothing new was started for the completed items.
    assert [c.pk for c in children_of(run)] == [c.pk for c in first]
    assert run.status == "failed"


def test_sweep_advances_a_parent_whose_child_message_was_lost(archon, make_recipe, settings):
    make_recipe("name: quick\nnodes:\n  - {id: a, bash: echo done}\n", slug="quick-child")
    parent = make_recipe(
        "name: p\nnodes:\n  - {id: one, workflow: quick-child}\n  - {id: after, bash: echo "
        "$one.output, depends_on: [one]}\n",
        slug="lost-parent",
    )
    run = services.start_run(parent, actor=ENGINE, message="go")
    wait_for(lambda: Run.objects.filter(parent=run).exists(), message="the child run")
    child = children_of(run)[0]
    wait_run(child, "completed")
    wait_run(run, "completed")
    # Now lose the message: put the parent back as it was before it heard of its child.
    each = node(run, "one")
    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None)
    each.status, each.output, each.finished_at = "running", "", None
    each.state = {**each.state, "seen": 0, "reported": []}
    each.save()
    after = node(run, "after")
    after.reset_for_resume()
    assert sweeper.sweep()["advanced"] == 0  # too recent: the message may still arrive
    settings.LOOP_STALE_PENDING_SECONDS = 0
    Run.objects.filter(pk=child.pk).update(finished_at=child.finished_at.replace(year=2000))
    counts = sweeper.sweep()
    assert counts["advanced"] >= 1
    wait_run(run, "completed")
    assert node(run, "after").output == "done"


@requires_runtime("bun")
def test_bun_and_uv_scripts_run_for_real(archon, make_recipe, tmp_path):
    repo = tmp_path / "checkout" / ".archon"
    (repo / "scripts" / "shout.ts").write_text(
        "const m: string = process.env.USER_MESSAGE ?? '';\nconsole.log(m.toUpperCase());\n"
    )
    flow = repo / "workflows" / "both-runtimes.yaml"
    flow.write_text(
        "name: both\nnodes:\n"
        "  - {id: shout, script: shout, runtime: bun}\n"
        "  - id: count\n    runtime: bun\n    depends_on: [shout]\n"
        "    with: {loud: $shout.output}\n"
        "    script: console.log(process.env.INPUTS_LOUD.length)\n"
        "  - id: py\n    runtime: uv\n    depends_on: [count]\n    with: {n: $count.output}\n"
        "    script: |\n      import os, sys\n      print(int(os.environ['INPUTS_N']) * 2, "
        "sys.version_info >= (3, 8))\n"
    )
    sync()
    run = services.start_run(
        Recipe.objects.get(slug="both-runtimes"), actor=ENGINE, message="$(id) hey"
    )
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert node(run, "shout").output == "$(ID) HEY"
    assert node(run, "count").output == "9"
    assert node(run, "py").output == "18 True"
    assert node(run, "shout").state["runtime"] == "bun" and node(run, "py").state["runtime"] == "uv"
