"""The inbox: gates first (oldest first), running runs with progress, finished runs, counts."""

import pytest
from django.urls import reverse

from runs.actor import Actor
from runs.models import NodeRun, Run
from tests.console.conftest import login

pytestmark = pytest.mark.django_db


def test_inbox_lists_waiting_gates_and_counts(client, viewer, gated_run, approval_run):
    run, gate = gated_run
    other, _ = approval_run
    body = login(client, viewer).get(reverse("inbox")).content.decode()
    assert "Waiting for a decision" in body
    assert body.index(f"Run {run.pk}</a>") < body.index(f"Run {other.pk}</a>")
    assert "<code>refine</code>" in body and "<code>decide</code>" in body
    assert 'badge-paused">paused</span> <span class="count">2</span>' in body


def test_an_empty_inbox_points_a_newcomer_at_the_recipes(client, viewer):
    body = login(client, viewer).get(reverse("inbox")).content.decode()
    assert "Nothing is waiting for you." in body
    assert f'<a href="{reverse("recipe_list")}">Recipes</a> and press <strong>Start run' in body


def test_the_pointer_goes_once_there_are_runs(client, viewer, guided_run):
    body = login(client, viewer).get(reverse("inbox")).content.decode()
    assert "No run yet" not in body


def test_running_runs_show_loop_progress(client, viewer, guided_run):
    run, row = guided_run
    row.iteration_count = 2
    row.save()
    body = login(client, viewer).get(reverse("inbox")).content.decode()
    assert "iteration 2 of 5" in body


def test_finished_runs_are_listed(client, viewer, guided_run):
    run, _ = guided_run
    Run.objects.filter(pk=run.pk).update(status="completed")
    body = login(client, viewer).get(reverse("inbox")).content.decode()
    assert "Recently finished" in body and f"Run {run.pk}" in body


def test_live_part_renders_alone(client, viewer, gated_run):
    body = login(client, viewer).get(reverse("inbox") + "?part=live").content.decode()
    assert body.startswith('<div id="inbox"') and "<html" not in body


def test_inbox_query_count_is_bounded(
    client, viewer, bundled, operator, django_assert_max_num_queries
):
    from runs import services

    for _ in range(30):
        services.start_run(
            bundled["counter-loop"], actor=Actor.operator(operator, "console"), message="x"
        )
    client = login(client, viewer)
    client.get(reverse("inbox"))
    # One of them reads the person's project memberships (console.projects), once.
    with django_assert_max_num_queries(13):
        assert client.get(reverse("inbox")).status_code == 200


def test_outsider_is_forbidden(client, outsider):
    assert login(client, outsider).get(reverse("inbox")).status_code == 403


def test_post_is_405(client, viewer):
    assert login(client, viewer).post(reverse("inbox")).status_code == 405


def test_counts_stop_at_the_cap_so_a_refresh_never_counts_the_whole_table(
    client, viewer, guided_run, monkeypatch
):
    from runs import inbox

    run, _ = guided_run
    monkeypatch.setattr(inbox, "STATUS_COUNT_CAP", 2)
    for _ in range(3):
        Run.objects.create(recipe=run.recipe, recipe_version=run.recipe_version, status="completed")
    body = login(client, viewer).get(reverse("inbox") + "?part=live").content.decode()
    assert 'badge-completed">completed</span> <span class="count">2+</span>' in body
    assert '<span class="count">1</span>' in body  # the guided run, under the cap


def test_the_finished_list_reads_its_index_on_every_database():
    """The inbox's "recently finished" is served by a partial index whose condition must
    name exactly the finished statuses (a kind adding one must add it there too), and whose
    order SQLite can build as well (no NULLS LAST): `make run` migrates on SQLite."""
    (index,) = [i for i in Run._meta.indexes if i.name == "run_finished_recent"]
    statuses = dict(index.condition.children)["status__in"]
    assert statuses == sorted(Run.TERMINAL)
    assert not any(getattr(e, "nulls_last", False) for e in index.expressions)


# --- a run stopped by its budget waits for a person (issue 41) ----------------------------


def budget_stopped(run, row):
    """guided-refine stopped by its budget of two iterations, after the second."""
    from tests.console.conftest import add_iteration

    for number in (1, 2):
        add_iteration(run, row, number, structured={"score": 40 + number})
    NodeRun.objects.filter(pk=row.pk).update(status="paused", iteration_count=2)
    Run.objects.filter(pk=run.pk).update(
        status="budget_exceeded",
        budget={"iterations": 2},
        error="Stopped by its budget before the next iteration: iterations: 2 of 2.",
    )
    return Run.objects.get(pk=run.pk)


def test_a_run_stopped_by_its_budget_needs_a_person_not_running(guided_run):
    from runs import inbox

    run = budget_stopped(*guided_run)
    found = inbox.inbox()
    assert run not in found["running"]
    (listed,) = found["attention"]
    assert listed == run
    label, url = listed.person_action
    assert (
        label == "Raise the budget" and url == reverse("run_detail", args=[run.pk]) + "#run-budget"
    )


def test_the_inbox_page_offers_the_budget_action_under_needs_a_person(client, viewer, guided_run):
    run = budget_stopped(*guided_run)
    body = login(client, viewer).get(reverse("inbox")).content.decode()
    attention = body.split("<h2>Needs a person</h2>", 1)[1].split("</section>", 1)[0]
    assert f"Run {run.pk}</a>" in attention
    # Which limit stopped it, and where its loop stands (with its sparkline).
    assert 'data-budget-flag="iterations">Budget: iterations: 2 of 2 — stopped' in attention
    assert "iteration 2 of 5" in attention and 'data-sparkline="refine"' in attention
    assert f'href="/runs/{run.pk}/#run-budget">Raise the budget</a>' in attention
    running = body.split("<h2>Running</h2>", 1)[1].split("</section>", 1)[0]
    assert f"Run {run.pk}</a>" not in running and "No run is running." in running
    assert "No run yet" not in body  # there is one, stopped


# --- the chips and the wording (issue 41) ----------------------------------------------------


def test_only_statuses_with_runs_get_a_chip_and_the_total_counts_them_all(
    client, viewer, guided_run
):
    run, _ = guided_run
    for status in ("completed", "completed", "failed"):
        Run.objects.create(recipe=run.recipe, recipe_version=run.recipe_version, status=status)
    body = login(client, viewer).get(reverse("inbox") + "?part=live").content.decode()
    counts = body.split('<ul class="counts">', 1)[1].split("</ul>", 1)[0]
    assert counts.count("<li>") == 4  # all, running, completed, failed
    assert '<span class="count">0</span>' not in counts
    assert 'badge-completed">completed</span> <span class="count">2</span>' in counts
    assert f'href="{reverse("run_list")}">all runs <span class="count">4</span>' in counts


def test_a_capped_count_keeps_the_total_a_lower_bound(client, viewer, guided_run, monkeypatch):
    from runs import inbox

    run, _ = guided_run
    monkeypatch.setattr(inbox, "STATUS_COUNT_CAP", 2)
    for _ in range(3):
        Run.objects.create(recipe=run.recipe, recipe_version=run.recipe_version, status="completed")
    body = login(client, viewer).get(reverse("inbox") + "?part=live").content.decode()
    assert 'all runs <span class="count">3+</span>' in body  # 2+ completed, 1 running


def test_a_gate_that_just_opened_waits_under_a_minute_and_a_run_just_finished(
    client, viewer, gated_run, approval_run
):
    from django.utils import timezone

    other, _ = approval_run
    Run.objects.filter(pk=other.pk).update(status="completed", finished_at=timezone.now())
    body = login(client, viewer).get(reverse("inbox")).content.decode()
    assert "0 minutes" not in body
    assert ">under a minute</time>" in body and "waiting under a minute" in body
    assert ">just now</time>" in body


def test_the_time_words_say_minutes_once_there_are_some():
    from datetime import timedelta

    from django.utils import timezone

    from runs.templatetags.console_tags import ago, since, until

    now = timezone.now()
    assert since(now) == "under a minute" and ago(now) == "just now"
    assert since(now - timedelta(minutes=3, seconds=5)) == "3\xa0minutes"
    assert ago(now - timedelta(hours=2)) == "2\xa0hours ago"
    assert until(now + timedelta(seconds=20)) == "under a minute"
    assert until(now + timedelta(minutes=40, seconds=30)) == "40\xa0minutes"
