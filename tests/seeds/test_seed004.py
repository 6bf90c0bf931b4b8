"""Seed 004 (agent-driven loops): its example host and its completion cases, run through a
real worker on the demo agent, checked against the design: the tools' results, the crumbs
on the run's live stream with exactly their fields, the persisted loop and its iterations
at the read-only inspection endpoints.
"""

from __future__ import annotations

from pathlib import Path

from django.test import Client

from loops.driven.models import Loop
from recipes.editing import create_recipe
from runs import services
from runs.actor import Actor
from tests.conftest import wait_run
from tests.driven.conftest import api_get, crumbs_on_stream

HERE = Path(__file__).parent / "seed004"
TASK = "A launch note for Widget 2.0"


def start(name: str, operator):
    path = HERE / f"{name}.yaml"
    recipe, _ = create_recipe(path.read_text(), slug=f"seed004-{name}", source_path=str(path))
    run = services.start_run(recipe, actor=Actor.operator(operator, "console"), message=TASK)
    wait_run(run, "completed", "failed", timeout=120)
    assert run.status == "completed", run.error
    return run


def test_the_host_composes_its_pool_iterates_with_feedback_and_finishes(live_worker, operator):
    run = start("host", operator)
    (loop,) = Loop.objects.filter(run=run)
    assert loop.pipeline == ["researcher", "drafter", "critic"] and loop.max_iterations == 10
    # Satisfied: the host called core_finish_loop; the result defaults to the last output.
    assert loop.status == "completed" and loop.result == loop.last_output

    got = crumbs_on_stream(operator, run)
    assert [name for name, _ in got] == [
        "loop:start",
        "loop:iteration:start",
        "loop:iteration:end",
        "loop:iteration:start",
        "loop:iteration:end",
        "loop:end",
    ]
    assert got[0][1] == {
        "loopId": loop.pk,
        "pipeline": ["researcher", "drafter", "critic"],
        "maxIterations": 10,
    }
    assert got[1][1] == {"loopId": loop.pk, "iteration": 1}
    assert set(got[2][1]) == {"loopId", "iteration", "output"}
    assert got[-1][1] == {
        "loopId": loop.pk,
        "status": "completed",
        "iterations": 2,
        "result": loop.result,
    }

    # GET /loops?session= and /loops/<id> (here under /api): the loop and its iterations,
    # each with its input, output and timing; read-only.
    listed = api_get(operator, f"/api/loops?session={run.pk}")["items"]
    assert [item["id"] for item in listed] == [loop.pk]
    body = api_get(operator, f"/api/loops/{loop.pk}")
    assert set(body) == {"loop", "iterations"}
    one, two = body["iterations"]
    assert one["input"] == TASK
    # iterating with feedback: the next input is {previousOutput, feedback}
    assert set(two["input"]) == {"previousOutput", "feedback"}
    assert two["input"]["previousOutput"] == one["output"] and two["feedback"]
    assert all(i["started_at"] and i["finished_at"] for i in (one, two))
    # each iteration ran the pipeline in order, each step's output feeding the next
    assert [s["agent"] for s in one["steps"]] == ["researcher", "drafter", "critic"]
    client = Client()
    client.force_login(operator)
    assert client.post("/api/loops").status_code == 405


def test_iterating_past_the_cap_closes_the_loop_as_exhausted(live_worker, operator):
    run = start("cap", operator)
    (loop,) = Loop.objects.filter(run=run)
    assert (loop.status, loop.max_iterations) == ("exhausted", 2)
    assert loop.result == loop.last_output  # the last output is recorded as the result
    got = crumbs_on_stream(operator, run)
    assert got[-1] == (
        "loop:end",
        {"loopId": loop.pk, "status": "exhausted", "iterations": 2, "result": loop.result},
    )
    assert [name for name, _ in got].count("loop:iteration:start") == 2


def test_a_loop_left_open_when_the_run_ends_is_closed_as_completed(live_worker, operator):
    run = start("left-open", operator)
    (loop,) = Loop.objects.filter(run=run)
    assert (loop.status, loop.iteration_count) == ("completed", 1)
    assert loop.result == loop.last_output
    assert crumbs_on_stream(operator, run)[-1] == (
        "loop:end",
        {"loopId": loop.pk, "status": "completed", "iterations": 1, "result": loop.result},
    )
