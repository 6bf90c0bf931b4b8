"""Forking a driven loop through a real worker: from a pipeline step (its loop iteration) or a
finished host turn, a new run holds the history up to there (carried, not run again) and goes
on: the pipeline's next iteration with the fork's feedback, then the host judges it."""

from __future__ import annotations

from django.test import Client

from loops.driven.models import Loop
from runs.models import Iteration, Run
from tests.api.conftest import client_for
from tests.conftest import wait_run
from tests.driven.conftest import driven_recipe

# The host starts a loop and is satisfied at once; in a fork it finds its loop open (the fork
# ran the next iteration), so its start is refused and it finishes that loop.
HOST = (
    "host-agent: {kind: demo, tool_calls: ["
    "{name: core_start_loop, arguments: {pipeline: [researcher, drafter]}}, "
    "{name: core_finish_loop, arguments: {}}]}"
)
FEEDBACK = "Say who it is for."


def started(run) -> list[tuple[str, int]]:
    """The agent calls this run made itself: one `iteration_started` each (carried copies
    were never started here)."""
    return [
        (e.step, e.data["iteration"])
        for e in run.events.filter(kind="iteration_started").order_by("seq")
    ]


def snapshot(run) -> tuple:
    return (
        run.status,
        run.events.count(),
        sorted(Iteration.objects.filter(run=run).values_list("pk", "status", "output")),
        sorted(Loop.objects.filter(run=run).values_list("pk", "status", "iteration_count")),
    )


def test_fork_a_driven_loop_after_a_loop_iteration(live_worker, start_driven, operator):
    original = wait_run(start_driven(driven_recipe("host-agent", providers=HOST)))
    assert original.status == "completed", original.error
    first = Loop.objects.get(run=original).iterations.get()
    before = snapshot(original)

    answer = client_for(operator).post(
        f"/api/runs/{original.pk}/fork", {"node": "drafter", "iteration": 1, "feedback": FEEDBACK}
    )
    assert answer.status_code == 201, answer.body
    fork = wait_run(Run.objects.get(pk=answer.body["id"]), "completed", "failed", "cancelled")
    assert fork.status == "completed", fork.error
    assert fork.forked_from_id == original.pk

    # Only iteration 2 of the pipeline and a new host turn ran; iteration 1 was carried.
    assert started(fork) == [("host", 1), ("researcher", 2), ("drafter", 2)]
    carried = Iteration.objects.filter(run=fork, carried_from__isnull=False)
    assert sorted(carried.values_list("node_id", "number")) == [("drafter", 1), ("researcher", 1)]
    assert {it.carried_from.run_id for it in carried} == {original.pk}

    loop = Loop.objects.get(run=fork)
    assert (loop.status, loop.iteration_count) == ("completed", 2)
    one, two = loop.iterations.order_by("number")
    assert (one.input, one.output) == (first.input, first.output)
    assert two.input == {"previousOutput": first.output, "feedback": FEEDBACK}
    assert two.feedback == FEEDBACK and loop.result == two.output
    drafts = Iteration.objects.filter(run=fork, node_id="drafter").order_by("number")
    assert [step["iteration"] for step in one.steps] == [
        Iteration.objects.get(run=fork, node_id="researcher", number=1).pk,
        drafts[0].pk,
    ]
    # The host was told where it is, and judged the fork's iteration as usual.
    turn = Iteration.objects.get(run=fork, node_id="host")
    assert loop.host_iteration_id == turn.pk
    assert "forked from another after iteration 1" in turn.prompt and FEEDBACK in turn.prompt
    assert "core_finish_loop: done" in turn.output
    # The live stream's crumbs tell the carried loop first, then its new iteration.
    crumbs = [
        (e.kind, e.data.get("iteration"))
        for e in fork.events.filter(kind__startswith="loop:").order_by("seq")
    ]
    assert crumbs == [
        ("loop:start", None),
        ("loop:iteration:start", 1),
        ("loop:iteration:end", 1),
        ("loop:iteration:start", 2),
        ("loop:iteration:end", 2),
        ("loop:end", None),
    ]

    assert snapshot(original) == before  # the original is untouched
    assert list(original.forks.all()) == [fork]
    web = Client()
    web.force_login(operator)
    page = web.get(original.get_absolute_url()).content.decode()
    assert fork.get_absolute_url() in page and "Fork from here" in page
    assert original.get_absolute_url() in web.get(fork.get_absolute_url()).content.decode()


def test_fork_a_driven_run_after_its_host_turn(live_worker, start_driven, operator):
    original = wait_run(start_driven(driven_recipe("host-agent", providers=HOST)))
    before = snapshot(original)
    answer = client_for(operator).post(
        f"/api/runs/{original.pk}/fork", {"node": "host", "iteration": 1, "feedback": FEEDBACK}
    )
    assert answer.status_code == 201, answer.body
    fork = wait_run(Run.objects.get(pk=answer.body["id"]), "completed", "failed", "cancelled")
    assert fork.status == "completed", fork.error
    # The whole first turn is carried (its loop, closed, and its steps); the host's second
    # turn is told the feedback and drives a new loop.
    assert started(fork) == [("host", 2), ("researcher", 2), ("drafter", 2)]
    one, two = Iteration.objects.filter(run=fork, node_id="host").order_by("number")
    assert one.carried_from.run_id == original.pk and two.carried_from_id is None
    assert "after your turn 1" in two.prompt and FEEDBACK in two.prompt
    old, new = Loop.objects.filter(run=fork).order_by("id")
    assert (old.host_iteration_id, old.status, old.iteration_count) == (one.pk, "completed", 1)
    assert (new.host_iteration_id, new.status) == (two.pk, "completed")
    assert snapshot(original) == before


def test_fork_refuses_what_a_driven_loop_cannot_continue(live_worker, start_driven, operator):
    capped = driven_recipe("host-agent", providers=HOST, max_iterations=1)
    original = wait_run(start_driven(capped))
    api = client_for(operator)
    at_cap = api.post(f"/api/runs/{original.pk}/fork", {"node": "drafter", "iteration": 1})
    assert at_cap.status_code == 409 and "no next iteration" in str(at_cap.body)
    prompt = api.post(
        f"/api/runs/{original.pk}/fork", {"node": "host", "iteration": 1, "prompt": "Be terse."}
    )
    assert prompt.status_code == 422 and "feedback only" in str(prompt.body)
    assert not Run.objects.filter(forked_from=original).exists()
