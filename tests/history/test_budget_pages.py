"""What a person sees of budgets and forks: the 80 % warning on the run page and in the
inbox (and none below it); "Fork from here" only on iterations whose node kind can be
forked, and a plain 409 from the API for a turn that cannot go on."""

import pytest

from runs import services
from runs.actor import Actor
from runs.models import NodeRun
from tests.api.conftest import client_for
from tests.console.conftest import add_iteration, login
from tests.driven.conftest import driven_recipe

pytestmark = pytest.mark.django_db

FORK = "Fork from here"


def running_loop(bundled, operator, done: int, budget: dict):
    run = services.start_run(
        bundled["guided-refine"], actor=Actor.operator(operator, "console"), message="m"
    )
    row = NodeRun.objects.create(
        run=run, node_id="refine", kind="loop", status="running", max_iterations=9
    )
    for n in range(1, done + 1):
        add_iteration(run, row, n, output=f"draft {n}", tokens_in=100, tokens_out=0)
    run.status, run.budget = "running", budget
    run.save()
    return run


@pytest.mark.parametrize(
    "budget, limit",
    [({"iterations": 5}, "iterations"), ({"tokens": 500}, "tokens")],
)
def test_run_page_and_inbox_warn_at_80_percent_and_not_below(
    client, bundled, operator, budget, limit
):
    login(client, operator)
    below = running_loop(bundled, operator, 3, budget)  # 60 %
    at = running_loop(bundled, operator, 4, budget)  # 80 %
    inbox = client.get("/").content.decode()
    assert inbox.count(f'class="budget-flag warning" data-budget-flag="{limit}"') == 1
    assert f"run-{at.pk}" in inbox or f"/runs/{at.pk}/" in inbox
    warned = client.get(at.get_absolute_url()).content.decode()
    assert f'budget-limit warning" data-budget-limit="{limit}"' in warned
    assert "nearly spent" in warned and "(80 %)" in warned
    calm = client.get(below.get_absolute_url()).content.decode()
    assert f'data-budget-limit="{limit}"' in calm and "(60 %)" in calm
    assert "nearly spent" not in calm and "budget-limit warning" not in calm


PLANE = """
schema: planeai.loop.recipe.v1
id: forkless
name: Forkless
roles:
  maker: {provider: demo, mode: write, isolation: project}
steps:
  - {id: first, kind: session.create, role: maker, prompt: "go"}
"""


def _finished(run, node_id: str, kind: str, **fields):
    row = NodeRun.objects.create(run=run, node_id=node_id, kind=kind, status="completed", **fields)
    add_iteration(run, row, 1, output="done")
    return row


def test_fork_is_offered_only_where_the_kind_can_be_forked(client, bundled, make_recipe, operator):
    login(client, operator)
    api = client_for(operator)
    loop = running_loop(bundled, operator, 2, {})
    assert client.get(loop.get_absolute_url()).content.decode().count(FORK) == 2

    plane = services.start_run(
        make_recipe(PLANE, slug="forkless"), actor=Actor.operator(operator, "console")
    )
    _finished(plane, "maker", "session")
    page = client.get(plane.get_absolute_url()).content.decode()
    assert page.count(FORK) == 1 and "Compare…" in page  # loops/stepmachine/forking.py
    # A turn made by hand comes without the machine's position a sent turn logs: the fork
    # itself refuses it, with a 409 that says why.
    refused = api.post(f"/api/runs/{plane.pk}/fork", {"node": "maker", "iteration": 1})
    assert refused.status_code == 409, refused.body
    assert "machine's position" in str(refused.body)


def test_fork_is_offered_on_a_driven_loop_s_host_turns_and_steps(
    client, python_recipe, make_recipe, operator
):
    """loops/driven/forking.py: a step stands for its loop iteration; one that belongs to none is
    refused by the fork itself, with a 409 that says so."""
    login(client, operator)
    driven = services.start_run(
        make_recipe(driven_recipe("demo"), slug="d"),
        actor=Actor.operator(operator, "console"),
        message="Widget 2.0",
    )
    _finished(driven, "host", "driven")
    _finished(driven, "drafter", "pipeline_step")
    assert client.get(driven.get_absolute_url()).content.decode().count(FORK) == 2
    refused = client_for(operator).post(
        f"/api/runs/{driven.pk}/fork", {"node": "drafter", "iteration": 1}
    )
    assert refused.status_code == 409 and "not a step of any loop iteration" in str(refused.body)
    # An agent call outside any loop, in a Python run, is still not offered: the fork of
    # an `agent` row of a run that is not driven is the Python kind's to refuse.
    solo = services.start_run(python_recipe(), Actor.operator(operator, "console"), message="m")
    _finished(solo, "solo", "agent")
    assert FORK not in client.get(solo.get_absolute_url()).content.decode()
    refused = client_for(operator).post(
        f"/api/runs/{solo.pk}/fork", {"node": "solo", "iteration": 1}
    )
    assert refused.status_code == 409 and "not inside a loop" in str(refused.body)


def test_inbox_draws_a_sparkline_for_step_machine_and_driven_loops(client, make_recipe, operator):
    login(client, operator)
    plane = services.start_run(
        make_recipe(PLANE, slug="forkless"), actor=Actor.operator(operator, "console")
    )
    driven = services.start_run(
        make_recipe(driven_recipe("demo"), slug="d"),
        actor=Actor.operator(operator, "console"),
        message="Widget 2.0",
    )
    for run, node_id, kind in [(plane, "maker", "session"), (driven, "drafter", "pipeline_step")]:
        row = NodeRun.objects.create(
            run=run, node_id=node_id, kind=kind, status="running", iteration_count=3
        )
        for n in (1, 2, 3):
            add_iteration(run, row, n, output=f"turn {n}", tokens_in=10 * n, tokens_out=5)
        run.status = "running"
        run.save()
    inbox = client.get("/").content.decode()
    assert 'data-sparkline="maker"' in inbox and 'data-sparkline="drafter"' in inbox
    assert "turn 3" in inbox and "of ?" not in inbox
