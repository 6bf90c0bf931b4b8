"""The inbox: gates first (oldest first), running runs with progress, finished runs, counts."""

import pytest
from django.urls import reverse

from runs.actor import Actor
from runs.models import Run
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
    with django_assert_max_num_queries(12):
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
