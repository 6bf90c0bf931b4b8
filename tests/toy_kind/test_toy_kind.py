"""A kind defined only here plugs into the kernel: it starts, runs iterations, pauses at a
gate decided from the console form and the API, shows on its run page and in the inbox,
is cancelled and resumed, and no line of runs/ mentions it (issue 24, "Done when")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from recipes import editing
from recipes.validation import validate_source
from runs import services
from runs.actor import Actor
from runs.models import Gate, Iteration, RunEvent
from tests.api.conftest import client_for
from tests.conftest import wait_for, wait_run

from .conftest import TOY_SOURCE

ROOT = Path(__file__).resolve().parents[2]
# The kernel and the catalogue: a kind plugs in without a line of either naming it.
UNTOUCHED = ("runs", "recipes")
worker = pytest.mark.worker


def start(recipe, operator):
    return services.start_run(recipe, actor=Actor.operator(operator, "console"), message="go")


def gate_at(run, number: int) -> Gate:
    """Wait for the run's pending gate after iteration `number`."""

    def found():
        return (
            Gate.objects.filter(run=run, status=Gate.Status.PENDING, iteration__number=number)
            .select_related("iteration")
            .first()
        )

    gate = wait_for(found, message=f"run {run.pk} to wait at a gate after iteration {number}")
    wait_run(run, "paused")
    return gate


def iteration_events(run) -> list[tuple[str, int]]:
    kinds = ["iteration_started", "iteration_completed"]
    events = RunEvent.objects.filter(run=run, kind__in=kinds).order_by("seq")
    return [(event.kind, event.data["iteration"]) for event in events]


# --- the recipe ----------------------------------------------------------------------------


def test_a_registered_kind_reads_its_own_recipes(toy_kind):
    result = validate_source(TOY_SOURCE)
    assert result.ok and result.kind == "toy"
    assert [(node.id, node.kind) for node in result.spec.nodes] == [("count", "toy")]
    assert (result.spec.rounds, result.spec.gate_after) == (4, 2)


def test_its_recipes_are_not_read_as_its_own_once_it_is_gone(toy_kind, db):
    from runs import kinds

    kinds.unregister(toy_kind.name)
    assert validate_source(TOY_SOURCE).kind != "toy"


# --- through a worker ----------------------------------------------------------------------


@worker
def test_it_starts_runs_iterations_and_pauses_at_a_gate(toy_worker, toy_recipe, operator):
    run = start(toy_recipe, operator)
    gate = gate_at(run, 2)
    assert run.status == "paused" and toy_recipe.kind == "toy"
    row = run.nodes.get()
    assert (row.node_id, row.kind, row.status, row.iteration_count) == ("count", "toy", "paused", 2)
    its = list(Iteration.objects.filter(run=run).order_by("number"))
    assert [(it.number, it.status, it.output) for it in its] == [
        (1, "completed", "1"),
        (2, "completed", "2"),
    ]
    assert iteration_events(run) == [
        ("iteration_started", 1),
        ("iteration_completed", 1),
        ("iteration_started", 2),
        ("iteration_completed", 2),
    ]
    assert gate.kind == Gate.Kind.LOOP and gate.node_id == "count"
    assert gate.empty_approve_completes


@worker
def test_decided_from_the_console_form(toy_worker, toy_recipe, operator, client):
    run = start(toy_recipe, operator)
    gate = gate_at(run, 2)
    client.force_login(operator)
    response = client.post(reverse("gate_approve", args=[run.pk, gate.pk]), {"comment": "louder"})
    assert response.status_code == 302
    gate.refresh_from_db()
    assert (gate.status, gate.surface, gate.decided_by) == ("iterated", "console", operator)
    again = gate_at(run, 3)
    third = again.iteration
    assert (third.output, third.feedback, third.after_gate) == ("3 (louder)", "louder", True)
    client.post(reverse("gate_approve", args=[run.pk, again.pk]), {"comment": ""})
    wait_run(run, "completed", "failed")
    assert run.status == "completed"
    assert run.nodes.get().output == "3 (louder)"
    assert ("iteration_started", 4) not in iteration_events(run)


@worker
def test_rejected_from_the_console_form(toy_worker, toy_recipe, operator, client):
    run = start(toy_recipe, operator)
    gate = gate_at(run, 2)
    client.force_login(operator)
    client.post(reverse("gate_reject", args=[run.pk, gate.pk]), {"reason": "wrong count"})
    wait_run(run, "failed", "completed")
    assert run.status == "failed" and "wrong count" in run.error


@worker
def test_decided_from_the_api(toy_worker, toy_recipe, operator):
    run = start(toy_recipe, operator)
    gate_at(run, 2)
    api = client_for(operator)
    response = api.post(f"/api/runs/{run.pk}/approve", {"comment": "slower"})
    assert response.status_code == 200, response.body
    assert Gate.objects.get(run=run, iteration__number=2).surface == "api"
    third = gate_at(run, 3).iteration
    assert third.feedback == "slower"
    assert api.post(f"/api/runs/{run.pk}/approve", {}).status_code == 200
    wait_run(run, "completed", "failed")
    assert run.status == "completed"


@worker
def test_the_last_round_ends_it_without_a_gate(toy_worker, toy_recipe, operator):
    run = start(toy_recipe, operator)
    services.approve(gate_at(run, 2).pk, Actor.operator(operator, "console"), comment="on")
    services.approve(gate_at(run, 3).pk, Actor.operator(operator, "console"), comment="on")
    wait_run(run, "completed", "failed")
    assert run.status == "completed"
    assert run.nodes.get().output == "4 (on)"
    assert Gate.objects.filter(run=run).count() == 2


@worker
def test_it_shows_on_its_run_page(toy_worker, toy_recipe, operator, viewer, client):
    run = start(toy_recipe, operator)
    gate_at(run, 2)
    client.force_login(viewer)
    response = client.get(reverse("run_detail", args=[run.pk]))
    body = response.content.decode()
    assert response.status_code == 200 and "Toy counter" in body
    assert "Waiting for a decision at <code>count</code> · iteration 2" in body
    assert "Counted to 2. Accept, or write feedback for one more." in body
    for number in (1, 2):
        assert f"<strong>count · iteration {number}</strong>" in body
        assert f"<pre>say {number}</pre>" in body


@worker
def test_it_shows_in_the_inbox(toy_worker, toy_recipe, operator, viewer, client):
    run = start(toy_recipe, operator)
    gate_at(run, 2)
    client.force_login(viewer)
    body = client.get(reverse("inbox")).content.decode()
    assert "Waiting for a decision" in body
    assert f"Run {run.pk}</a>" in body and "<code>count</code>" in body


@worker
def test_its_own_status_word_shows_on_pages_api_and_inbox(
    toy_worker, toy_recipe, operator, viewer, client
):
    """At its gate the toy says `counted` (its phase, a word of its own): the kernel's
    status stays `paused`, and every surface shows the toy's word."""
    run = start(toy_recipe, operator)
    gate_at(run, 2)
    wait_for(lambda: run.refresh_from_db() or run.phase == "counted", message="the toy's word")
    assert (run.status, run.status_word) == ("paused", "counted")
    assert "a person decides whether to go on" in run.status_meaning
    client.force_login(viewer)
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "counted" in page
    listed = client.get(reverse("run_list") + "?status=counted").content.decode()
    assert f"Run {run.pk}" in listed or f"/runs/{run.pk}/" in listed
    answer = client_for(operator).get(f"/api/runs/{run.pk}")
    assert answer.status_code == 200
    assert (answer.body["status"], answer.body["phase"]) == ("counted", "counted")
    inbox = client.get(reverse("inbox")).content.decode()
    assert f"Run {run.pk}</a>" in inbox and "counted" in inbox


@worker
def test_it_is_cancelled_and_resumed(toy_worker, toy_recipe, operator):
    actor = Actor.operator(operator, "console")
    run = start(toy_recipe, operator)
    first = gate_at(run, 2)
    services.cancel_run(run, actor, reason="enough")
    run.refresh_from_db()
    first.refresh_from_db()
    assert (run.status, first.status) == ("cancelled", "cancelled")
    assert run.nodes.get().status == "cancelled"
    services.resume_run(run, actor)
    again = gate_at(run, 2)
    assert again.pk != first.pk
    row = run.nodes.get()
    assert (row.status, row.generation) == ("paused", 1)
    numbers = Iteration.objects.filter(run=run, generation=1).values_list("number", flat=True)
    assert sorted(numbers) == [1, 2]


# --- the kernel ----------------------------------------------------------------------------


@pytest.mark.parametrize("package", UNTOUCHED)
def test_no_line_of_the_kernel_or_the_catalogue_mentions_the_toy(package):
    word = re.compile(r"\btoy", re.IGNORECASE)
    mentions = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / package).rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if word.search(line)
    ]
    assert mentions == []


# --- the catalogue -------------------------------------------------------------------------


def test_its_source_is_shell_to_an_editor_though_it_declares_none(toy_recipe, editor, shell_author):
    """The toy says nothing of shell parts: its whole source counts as one, so an editor
    without the shell permission changes none of it (recipes.shell_parts fails closed)."""
    changed = TOY_SOURCE.replace("rounds: 4", "rounds: 5")
    with pytest.raises(editing.ShellNotAllowed) as refused:
        editing.save_source(toy_recipe, changed, user=editor)
    assert refused.value.where == ["source"]
    editing.save_source(toy_recipe, changed, user=shell_author)
    toy_recipe.refresh_from_db()
    assert toy_recipe.current_version.number == 2 and "rounds: 5" in toy_recipe.source
