"""What the run page says: the event log in sentences, gates without empty boxes, honest
progress, generations told apart, re-run naming its recipe version, the inbox's order."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from recipes.models import Recipe
from runs.actor import Actor
from runs.models import Gate, NodeRun, Run

from .conftest import add_iteration, login

pytestmark = pytest.mark.django_db


def _page(client, user, run) -> str:
    return login(client, user).get(reverse("run_detail", args=[run.pk])).content.decode()


def test_event_log_reads_as_sentences_and_is_a_live_part(client, viewer, gated_run):
    run, gate = gated_run
    with transaction.atomic():
        run.append_event("iteration_completed", "refine", iteration=1, channels=["until"])
        run.append_event("gate_decided", "refine", status="iterated", by="otto", comment="shorter")
    page = _page(client, viewer, run)
    assert "refine iteration 1 finished — the agent said it was done." in page
    assert "otto asked for another iteration at refine: “shorter”" in page
    assert '{"channels"' not in page  # no raw JSON
    part = client.get(reverse("run_part", args=[run.pk, "events"])).content.decode()
    assert part.startswith('<div id="event-log">') and "otto asked for another" in part
    assert "sse:run-changed" in page and reverse("run_part", args=[run.pk, "events"]) in page


def test_running_run_duration_is_marked_for_the_clock(client, viewer, guided_run):
    run, _ = guided_run
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=90))
    page = _page(client, viewer, run)
    assert "data-running-since=" in page and "console-clock.js" in page


def test_approval_gate_without_a_message_draws_no_box(client, operator, approval_run):
    run, gate = approval_run
    Gate.objects.filter(pk=gate.pk).update(message="")
    page = _page(client, operator, run)
    assert 'class="gate-message' not in page and 'class="status-line' not in page
    Gate.objects.filter(pk=gate.pk).update(message="Ship v1.2?")
    page = _page(client, operator, run)
    assert '<div class="gate-message pre">Ship v1.2?</div>' in page


def test_a_loop_completing_early_shows_a_full_bar(client, viewer, guided_run):
    run, row = guided_run
    NodeRun.objects.filter(pk=row.pk).update(status="completed", iteration_count=3)
    page = _page(client, viewer, run)
    assert '<progress max="1" value="1">' in page
    assert "completed at iteration 3 (of at most 5)" in page


def test_a_resumed_run_tells_its_attempts_apart(client, viewer, guided_run):
    run, row = guided_run
    add_iteration(run, row, 1, output="first try")
    add_iteration(run, row, 1, output="second try", generation=1)
    NodeRun.objects.filter(pk=row.pk).update(generation=1, iteration_count=1)
    page = _page(client, viewer, run)
    assert page.count("refine · iteration 1 · attempt 2") == 1
    assert page.count("refine · iteration 1</strong>") == 1


def test_a_finished_run_without_a_loop_does_not_wait_for_iterations(client, viewer, approval_run):
    run, _ = approval_run
    Run.objects.filter(pk=run.pk).update(status="completed", finished_at=timezone.now())
    page = _page(client, viewer, run)
    assert "No iterations yet" not in page and "This run had no loop iterations." in page
    # No empty Convergence card either: nothing will ever be charted.
    assert '<section id="run-chart" hidden></section>' in page and "Convergence" not in page


def test_rerun_names_the_version_and_offers_the_current_one(client, operator, guided_run):
    run, _ = guided_run
    Run.objects.filter(pk=run.pk).update(status="completed", finished_at=timezone.now())
    recipe = Recipe.objects.get(pk=run.recipe_id)
    old_number = run.recipe_version.number
    page = _page(client, operator, run)
    assert f"Re-run on v{old_number}" in page and "Re-run on the current version" not in page
    recipe.record_version(recipe.source.replace("DONE", "FINISHED"), author=operator)
    recipe.refresh_from_db()
    page = _page(client, operator, run)
    assert f"Re-run on the current version (v{recipe.current_version.number})" in page

    response = client.post(reverse("run_rerun", args=[run.pk]), {"version": "current"}, follow=True)
    new_run = Run.objects.exclude(pk=run.pk).latest("id")
    assert new_run.recipe_version_id == recipe.current_version_id
    assert f"on recipe version {recipe.current_version.number}" in response.content.decode()
    client.post(reverse("run_rerun", args=[run.pk]))
    assert Run.objects.latest("id").recipe_version.number == old_number


def test_inbox_lists_recently_finished_by_finish_time(client, viewer, bundled, operator):
    from runs import services

    now = timezone.now()
    first = services.start_run(
        bundled["counter-loop"], actor=Actor.operator(operator, "console"), message="finished last"
    )
    second = services.start_run(
        bundled["counter-loop"], actor=Actor.operator(operator, "console"), message="finished first"
    )
    Run.objects.filter(pk=first.pk).update(status="completed", finished_at=now)
    Run.objects.filter(pk=second.pk).update(
        status="completed", finished_at=now - timedelta(minutes=5)
    )
    page = login(client, viewer).get(reverse("inbox")).content.decode()
    finished = page.split("Recently finished")[1]
    assert finished.index("finished last") < finished.index("finished first")


def test_runs_list_has_duration_and_usage_columns(client, viewer, guided_run):
    from decimal import Decimal

    run, row = guided_run
    add_iteration(run, row, 1, output="a", tokens_in=100, tokens_out=20, cost_usd=Decimal("0.25"))
    add_iteration(run, row, 2, output="b", tokens_in=10, tokens_out=5)
    Run.objects.filter(pk=run.pk).update(
        status="completed",
        started_at=timezone.now() - timedelta(seconds=75),
        finished_at=timezone.now(),
    )
    page = login(client, viewer).get(reverse("run_list")).content.decode()
    assert "<th>Duration</th><th>Usage</th>" in page
    assert "1 min 15 s" in page
    assert "135 tokens · $0.2500+" in page  # the + says part of the usage had no price
