"""The run page as a newcomer read it (issue 41): a gate page's one sentence on where the
run stands, a budget used up by finishing (not exceeded), the name of the recipe version a
run used, a decision recorded for a later resume, and the Nodes card of a driven run and
of a fork, built row by row (no worker)."""

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from recipes.editing import save_source
from recipes.models import Recipe
from runs import services
from runs.actor import Actor
from runs.models import Iteration, NodeRun, Run
from tests.api.conftest import client_for
from tests.console.conftest import add_iteration, login
from tests.driven.conftest import drive, driven_run  # noqa: F401 - a fixture
from tests.history.test_budget_pages import running_loop

pytestmark = pytest.mark.django_db


def _page(client, user, run) -> str:
    return login(client, user).get(reverse("run_detail", args=[run.pk])).content.decode()


def _nodes(client, user, run) -> str:
    url = reverse("run_part", args=[run.pk, "nodes"])
    return login(client, user).get(url).content.decode()


def test_the_gate_page_says_where_the_run_is_in_one_sentence(client, viewer, approval_run):
    run, gate = approval_run
    services.approve(gate.pk, Actor.operator(run.started_by, "console"), decision="ship")
    Run.objects.filter(pk=run.pk).update(status="completed", finished_at=timezone.now())
    url = reverse("gate_detail", args=[run.pk, gate.pk])
    page = login(client, viewer).get(url).content.decode()
    now = page.split('<p class="run-now">', 1)[1].split("</p>", 1)[0]
    assert " ".join(re.sub(r"<[^>]+>", "", now).split()) == f"Run {run.pk} is now completed."


def test_a_run_that_finishes_at_its_iterations_limit_used_it_and_did_not_exceed_it(
    client, bundled, operator
):
    run = running_loop(bundled, operator, 3, {"iterations": 3})
    Run.objects.filter(pk=run.pk).update(status="completed", finished_at=timezone.now())
    page = _page(client, operator, run)
    meter = page.split('data-budget-limit="iterations"', 1)[1].split("</li>", 1)[0]
    assert "3 of 3" in meter and "stopped the run" not in meter and "all used" in meter
    assert 'budget-limit exceeded"' not in page
    (limit,) = client_for(operator).get(f"/api/runs/{run.pk}/budget").body["limits"]
    assert (limit["exceeded"], limit["reached"]) == (False, True)


def test_a_run_stopped_by_its_iterations_limit_exceeded_it(client, bundled, operator):
    run = running_loop(bundled, operator, 3, {"iterations": 3})
    Run.objects.filter(pk=run.pk).update(status="budget_exceeded")
    page = _page(client, operator, run)
    meter = page.split('data-budget-limit="iterations"', 1)[1].split("</li>", 1)[0]
    assert "stopped the run" in meter
    (limit,) = client_for(operator).get(f"/api/runs/{run.pk}/budget").body["limits"]
    assert (limit["exceeded"], limit["reached"]) == (True, True)


def test_a_run_shows_the_name_of_the_recipe_version_it_used(client, viewer, guided_run, editor):
    run, _ = guided_run
    recipe = Recipe.objects.get(pk=run.recipe_id)
    result = save_source(
        recipe, recipe.source.replace("name: Guided refine", "name: Guided rewrite"), user=editor
    )
    assert result.ok
    recipe.refresh_from_db()
    assert recipe.name == "Guided rewrite" and recipe.current_version_id != run.recipe_version_id
    header = _page(client, viewer, run).split('id="run-header"', 1)[1].split("</section>", 1)[0]
    assert "Guided refine" in header and "Guided rewrite" not in header
    part = client.get(reverse("run_part", args=[run.pk, "header"])).content.decode()
    assert "Guided refine" in part and "Guided rewrite" not in part


def test_a_recorded_decision_waits_for_resume_on_the_page_and_in_run_status(
    client, operator, gated_run
):
    run, gate = gated_run
    services.approve(gate.pk, Actor.operator(operator, "cli"), record_only=True)
    run.refresh_from_db()
    assert run.status == "paused"

    out = StringIO()
    call_command("run", "status", str(run.pk), stdout=out)
    said = out.getvalue()
    assert f"Accepted at refine by {operator.get_username()}, recorded" in said
    assert f"manage.py run resume {run.pk}" in said

    header = _page(client, operator, run).split('id="run-header"', 1)[1].split("</section>", 1)[0]
    assert f"Accepted at refine by {operator.get_username()}, recorded" in header
    assert reverse("run_resume", args=[run.pk]) in header

    # Once resumed, nothing is waiting any more: neither surface says so.
    services.resume_run(run, Actor.operator(operator, "console"))
    out = StringIO()
    call_command("run", "status", str(run.pk), stdout=out)
    assert "recorded" not in out.getvalue()
    header = _page(client, operator, run).split('id="run-header"', 1)[1].split("</section>", 1)[0]
    assert "recorded" not in header


def test_a_pipeline_step_between_its_calls_shows_its_last_calls_status(
    client,
    viewer,
    driven_run,  # noqa: F811
):
    run, _host, turn = driven_run
    drive(run, turn, iterations=1, status="completed")
    # The host's turn goes on after its loop ended: the drafter's row is still "running".
    NodeRun.objects.filter(run=run, node_id="drafter").update(
        status="running", started_at=timezone.now()
    )
    card = _nodes(client, viewer, run)
    drafter = card.split('<code class="node-id">drafter</code>', 1)[1].split("</li>", 1)[0]
    assert ">completed<" in drafter and ">running<" not in drafter
    host = card.split('<code class="node-id">host</code>', 1)[1].split("</li>", 1)[0]
    assert ">running<" in host


def test_a_forks_nodes_show_their_own_durations(client, viewer, guided_run):
    original, row = guided_run
    long_ago = timezone.now() - timedelta(minutes=5)
    fork = services.start_run(
        original.recipe, actor=Actor.operator(original.started_by, "console"), message="fork"
    )
    Run.objects.filter(pk=fork.pk).update(status="running", forked_from=original)
    # Carried from the original: one that ran again in the fork, one that did not.
    again = NodeRun.objects.create(
        run=fork,
        node_id="researcher",
        kind="loop",
        status="completed",
        carried_from=row,
        started_at=long_ago,
        finished_at=timezone.now(),
    )
    add_iteration(fork, again, 1, output="carried", carried_from=add_iteration(original, row, 1))
    own = add_iteration(fork, again, 2, output="the fork's own")
    Iteration.objects.filter(pk=own.pk).update(started_at=timezone.now() - timedelta(seconds=3))
    NodeRun.objects.create(
        run=fork,
        node_id="drafter",
        kind="loop",
        status="completed",
        carried_from=row,
        started_at=long_ago,
        finished_at=long_ago + timedelta(seconds=42),
    )
    card = _nodes(client, viewer, fork)
    researcher = card.split('<code class="node-id">researcher</code>', 1)[1].split("</li>", 1)[0]
    assert " s</span>" in researcher and "min" not in researcher
    drafter = card.split('<code class="node-id">drafter</code>', 1)[1].split("</li>", 1)[0]
    assert "42.0 s" in drafter


def test_a_row_never_claimed_is_timed_by_its_calls(client, viewer, guided_run):
    """A Python loop's agent row is made by its first call, not claimed, and ends with the
    script: the Nodes card times it by its calls (the newcomer review: a one-shot agent of
    content-pipeline showed no duration)."""
    run, _ = guided_run
    long_ago = timezone.now() - timedelta(minutes=10)
    row = NodeRun.objects.create(
        run=run, node_id="research", kind="agent", status="completed", finished_at=timezone.now()
    )
    call = add_iteration(run, row, 1, output="notes")
    Iteration.objects.filter(pk=call.pk).update(
        started_at=long_ago, finished_at=long_ago + timedelta(seconds=2)
    )
    card = _nodes(client, viewer, run)
    research = card.split('<code class="node-id">research</code>', 1)[1].split("</li>", 1)[0]
    assert "2.0 s" in research
