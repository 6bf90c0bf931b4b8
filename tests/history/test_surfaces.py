"""Fork, compare, chart and budget on every surface: the console's pages (permissions,
methods, plain words), the API and `manage.py run`; and bounded queries for big runs."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs import chart, services
from runs.actor import ENGINE, Actor
from runs.models import Iteration, NodeRun
from tests.api.conftest import client_for
from tests.conftest import wait_run
from tests.console.conftest import add_iteration, login

from .conftest import iterations

pytestmark = pytest.mark.django_db


def scored_run(bundled, operator, scores=(55, 70, 85), slug="guided-refine"):
    run = services.start_run(bundled[slug], actor=Actor.operator(operator, "console"), message="m")
    row = NodeRun.objects.create(
        run=run, node_id="refine", kind="loop", status="completed", max_iterations=9
    )
    its = [
        add_iteration(
            run,
            row,
            n,
            output=f"draft {n}\nsame line",
            structured={"score": score, "done": False, "label": "x"},
            tokens_in=10 * n,
            tokens_out=5,
        )
        for n, score in enumerate(scores, start=1)
    ]
    return run, row, its


def cli(*args) -> str:
    out = StringIO()
    call_command("run", *args, stdout=out)
    return out.getvalue()


# --- chart -------------------------------------------------------------------------------


def test_chart_picks_the_score_and_offers_every_numeric_field(bundled, operator):
    run, _, _ = scored_run(bundled, operator)
    (series,) = chart.run_chart(run)
    assert series.metric == "field:score" and [p.value for p in series.points] == [55, 70, 85]
    assert [k for k, _ in series.options] == ["field:score", "duration", "tokens", "cost"]
    assert series.path.count(",") == 3
    (tokens,) = chart.run_chart(run, metrics={"refine": "tokens"})
    assert [p.value for p in tokens.points] == [15, 25, 35]
    # An unknown metric falls back to the default instead of drawing nothing.
    assert chart.run_chart(run, metrics={"refine": "field:nope"})[0].metric == "field:score"


def test_chart_of_a_thousand_iterations_is_one_query(bundled, operator):
    run, row, _ = scored_run(bundled, operator, scores=(1,))
    now = timezone.now()
    Iteration.objects.bulk_create(
        Iteration(
            run=run,
            node_run=row,
            node_id="refine",
            number=n,
            status="completed",
            structured={"score": n % 100},
            duration_ms=n,
            started_at=now,
            finished_at=now,
        )
        for n in range(2, 1001)
    )
    with CaptureQueriesContext(connection) as queries:
        (series,) = chart.run_chart(run)
    assert len(queries) == 1 and len(series.points) == 1000


def test_run_page_and_inbox_cost_the_same_queries_for_3_or_1000_iterations(
    client, bundled, operator
):
    run, row, _ = scored_run(bundled, operator, scores=range(25))  # more than a page
    run.status = "running"
    run.budget = {"iterations": 2000}
    run.save()
    login(client, operator)

    def count(path):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(path).status_code == 200
        return len(queries)

    small = (count(run.get_absolute_url()), count("/"))
    now = timezone.now()
    Iteration.objects.bulk_create(
        Iteration(
            run=run,
            node_run=row,
            node_id="refine",
            number=n,
            status="completed",
            structured={"score": 1},
            started_at=now,
            finished_at=now,
        )
        for n in range(26, 1001)
    )
    assert (count(run.get_absolute_url()), count("/")) == small


def test_chart_part_keeps_the_chosen_metric_and_the_page_renders_svg(
    client, bundled, viewer, operator
):
    run, _, _ = scored_run(bundled, operator)
    login(client, viewer)
    page = client.get(run.get_absolute_url()).content.decode()
    assert '<svg class="chart-svg"' in page and "score per iteration" in page
    part = client.get(f"/runs/{run.pk}/part/chart/", {"metric-refine": "tokens"}).content.decode()
    assert "tokens per iteration" in part and 'value="tokens" selected' in part
    # The figures table has one column per figure: tokens, chosen, is not shown twice; a
    # field of the iteration's own (score) gets a column of its own.
    assert part.count("<th>Tokens</th>") == 1 and "<th>tokens</th>" not in part
    assert "<th>score</th>" in page and page.count("<th>Tokens</th>") == 1


# --- compare -------------------------------------------------------------------------------


def test_compare_page_keeps_the_comparison_in_its_address(client, bundled, viewer, operator):
    run, _, its = scored_run(bundled, operator)
    login(client, viewer)
    response = client.get("/runs/compare/", {"a": its[2].pk})
    assert response.status_code == 302
    assert response["Location"] == f"/runs/compare/?a={its[1].pk}&b={its[2].pk}"
    page = client.get(response["Location"]).content.decode()
    assert "draft 2" in page and "draft 3" in page and "table" in page
    unified = client.get(
        "/runs/compare/", {"a": its[0].pk, "b": its[2].pk, "view": "unified"}
    ).content.decode()
    assert '<span class="d-del">-draft 1</span>' in unified
    assert '<span class="d-add">+draft 3</span>' in unified
    assert "Structured output" in unified and "&quot;score&quot;: 85" in unified
    assert client.get("/runs/compare/", {"a": 999999}).status_code == 404


def test_compare_refuses_two_recipes_in_plain_words(client, bundled, viewer, operator):
    _, _, ours = scored_run(bundled, operator)
    _, _, theirs = scored_run(bundled, operator, slug="counter-loop")
    login(client, viewer)
    response = client.get("/runs/compare/", {"a": ours[0].pk, "b": theirs[0].pk})
    assert response.status_code == 409
    page = response.content.decode()
    assert "runs of different recipes" in page
    # The "To" picker offers iterations of this recipe's run only, not the refused one.
    picker = page.split('<select name="b">', 1)[1].split("</select>", 1)[0]
    assert f'value="{theirs[0].pk}"' not in picker
    assert all(f'value="{it.pk}"' in picker for it in ours)


def test_compare_says_when_neither_iteration_has_a_field(client, bundled, viewer, operator):
    run, row, its = scored_run(bundled, operator)
    for it in its[:2]:
        it.structured = None
        it.save(update_fields=["structured"])
    login(client, viewer)
    page = client.get("/runs/compare/", {"a": its[0].pk, "b": its[1].pk}).content.decode()
    assert 'Structured output <span class="muted">— neither iteration has any</span>' in page
    assert '<colgroup><col class="n"><col><col class="n"><col></colgroup>' in page


def test_compare_api_and_cli(bundled, operator, viewer):
    _, _, its = scored_run(bundled, operator)
    api = client_for(viewer)
    body = api.get("/api/iterations/compare", a=its[0].pk, b=its[1].pk).body
    assert body["fields"]["output"]["added"] == 1 and body["fields"]["prompt"]["removed"] == 1
    assert "+draft 2" in body["fields"]["output"]["unified"]
    assert api.get("/api/iterations/compare", a=its[0].pk).status_code == 422
    out = cli("compare", str(its[0].pk), str(its[1].pk))
    assert "== Output: +1 -1" in out and "+draft 2" in out


# --- API and CLI reads ---------------------------------------------------------------------


def test_chart_api_and_cli(bundled, operator, viewer):
    run, _, _ = scored_run(bundled, operator)
    body = client_for(viewer).get(f"/api/runs/{run.pk}/chart").body
    (loop,) = body["loops"]
    assert loop["metric"] == "field:score" and [p["value"] for p in loop["points"]] == [55, 70, 85]
    assert loop["points"][0]["tokens"] == 15 and loop["points"][0]["fields"] == {"score": 55}
    tokens = client_for(viewer).get(f"/api/runs/{run.pk}/chart", metric="tokens").body
    assert [p["value"] for p in tokens["loops"][0]["points"]] == [15, 25, 35]
    out = cli("chart", str(run.pk))
    assert "refine — score" in out and "85" in out
    data = json.loads(cli("chart", str(run.pk), "--json"))
    assert data["loops"][0]["node"] == "refine"


def test_budget_api_validates_and_the_start_takes_a_budget(bundled, operator, viewer):
    api = client_for(operator)
    refused = api.post("/api/runs", {"recipe": "counter-loop", "budget": {"tokens": "lots"}})
    assert refused.status_code == 422 and "budget.tokens" in refused.body["errors"]
    started = api.post(
        "/api/runs", {"recipe": "counter-loop", "message": "m", "budget": {"cost_usd": "0.5"}}
    )
    assert started.status_code == 201
    run_id = started.body["id"]
    got = client_for(viewer).get(f"/api/runs/{run_id}/budget").body
    assert got["budget"] == {"cost_usd": "0.5"} and got["limits"][0]["limit"] == "cost_usd"
    assert client_for(viewer).put(f"/api/runs/{run_id}/budget", {"tokens": 9}).status_code == 403
    changed = api.put(f"/api/runs/{run_id}/budget", {"tokens": 900, "cost_usd": None}).body
    assert changed["budget"] == {"tokens": 900}
    out = cli("budget", str(run_id), "--iterations", "7")
    assert "iterations: 0 of 7" in out and "tokens: 0 of 900" in out


def test_console_pages_check_roles_and_methods(client, bundled, viewer, operator):
    run, _, its = scored_run(bundled, operator)
    login(client, viewer)
    fork_url = f"/runs/{run.pk}/fork/?node=refine&iteration=1"
    assert client.get(fork_url).status_code == 403
    assert client.post(f"/runs/{run.pk}/budget/", {"iterations": "3"}).status_code == 403
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Fork from here" not in page and "Compare…" in page
    login(client, operator)
    assert client.get(f"/runs/{run.pk}/budget/").status_code == 405
    form = client.get(fork_url).content.decode()
    assert "Fork and continue" in form and "Feedback for iteration 2" in form
    refused = client.post(
        f"/runs/{run.pk}/budget/", {"iterations": "three"}, HTTP_HX_REQUEST="true"
    )
    assert "must be a whole number above 0, not &#x27;three&#x27;" in refused.content.decode()
    assert 'value="three"' in refused.content.decode()  # what was typed is kept
    negative = client.post(f"/runs/{run.pk}/budget/", {"iterations": "-3"}, HTTP_HX_REQUEST="true")
    assert "must be a whole number above 0, not -3" in negative.content.decode()
    # The same words for a limit on the run page as on the start form, styled like any box.
    panel = client.get(f"/runs/{run.pk}/part/budget/").content.decode()
    assert '<label>Cost (USD) <input type="text" name="cost_usd"' in panel
    start = client.get("/recipes/guided-refine/start/").content.decode()
    assert '<label for="id_budget_cost_usd">Cost (USD)</label>' in start


# --- through a worker ----------------------------------------------------------------------

LOOP = """
nodes:
  - id: work
    loop:
      prompt: "Go. $LOOP_USER_INPUT\\n@*: step\\n@4: <promise>DONE</promise>"
      until: DONE
      max_iterations: 6
"""


@pytest.mark.django_db(transaction=True)
def test_fork_over_the_api_and_budget_resume_from_the_cli(
    live_worker, make_scripted_recipe, operator, viewer
):
    run = services.start_run(make_scripted_recipe(LOOP), actor=ENGINE, budget={"iterations": 2})
    wait_run(run, "budget_exceeded", "completed", "failed")
    assert run.status == "budget_exceeded"
    api = client_for(operator)
    assert (
        client_for(viewer)
        .post(f"/api/runs/{run.pk}/fork", {"node": "work", "iteration": 1})
        .status_code
        == 403
    )
    missing = api.post(f"/api/runs/{run.pk}/fork", {"node": "work", "iteration": 7})
    assert missing.status_code == 404
    forked = api.post(
        f"/api/runs/{run.pk}/fork", {"node": "work", "iteration": 1, "feedback": "tighter"}
    )
    assert forked.status_code == 201, forked.body
    fork = wait_run(
        type(run).objects.get(pk=forked.body["id"]), "budget_exceeded", "completed", "failed"
    )
    # The fork has its own budget: the carried-over iteration is not counted against it.
    assert fork.status == "budget_exceeded" and fork.budget == {"iterations": 2}
    assert [it.number for it in iterations(fork, "work")] == [1, 2, 3]
    with pytest.raises(CommandError, match="still over its budget"):
        cli("budget", str(run.pk), "--resume")
    out = cli("budget", str(run.pk), "--iterations", "10", "--resume")
    assert "run " in out
    wait_run(run, "completed", "failed", "budget_exceeded")
    assert run.status == "completed" and len(iterations(run, "work")) == 4
    out = json.loads(cli("fork", str(run.pk), "--node", "work", "--iteration", "3", "--json"))
    assert out["forked_from"] == run.pk
    last = wait_run(type(run).objects.get(pk=out["id"]), "completed", "failed", "budget_exceeded")
    assert [it.number for it in iterations(last, "work")] == [1, 2, 3, 4]


SHORT_LOOP = """
nodes:
  - id: work
    loop:
      prompt: "Go.\\n@*: step"
      until: DONE
      max_iterations: 2
"""


@pytest.mark.django_db(transaction=True)
def test_resume_from_the_cli_says_what_runs_again_and_how_to_keep_it(
    live_worker, make_scripted_recipe
):
    """A loop that failed after two finished iterations: `run resume` says on stderr that
    they run again, and names the fork that keeps them, as the console's confirmation does."""
    run = wait_run(
        services.start_run(make_scripted_recipe(SHORT_LOOP), actor=ENGINE), "completed", "failed"
    )
    assert run.status == "failed"
    err = StringIO()
    call_command("run", "resume", str(run.pk), stdout=StringIO(), stderr=err)
    said = err.getvalue()
    assert "note: work starts over at iteration 1: its 2 finished iteration(s) run again" in said
    # Iteration 2 was the last max_iterations allows, so a fork goes on after iteration 1
    # (the point the console's "Continue from …" offers too).
    assert f"manage.py run fork {run.pk} --node work --iteration 1" in said
