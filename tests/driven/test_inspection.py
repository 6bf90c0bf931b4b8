"""Loops are kept and served read-only: `GET /api/loops?session=&agent=&status=`,
`GET /api/loops/{id}` → {loop, iterations[]}, the /loops pages, and the run page's loop
panel; every page costs a fixed number of queries however many loops or iterations."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs import services
from runs.actor import Actor
from runs.models import Iteration, NodeRun
from tests.console.conftest import login
from tests.driven.conftest import drive, driven_recipe

pytestmark = pytest.mark.django_db


# --- the API ---------------------------------------------------------------------------------


def test_the_api_lists_loops_with_filters_and_pages(
    client, viewer, driven_run, make_recipe, operator
):
    run, _, turn = driven_run
    done = drive(run, turn)
    other_run = services.start_run(
        make_recipe(driven_recipe("demo"), slug="other"),
        actor=Actor.operator(operator, "console"),
        message="Widget 2.0",
    )
    other_host = NodeRun.objects.create(run=other_run, node_id="editor", kind="driven")
    other_turn = Iteration.objects.create(
        run=other_run, node_run=other_host, node_id="editor", number=1
    )
    open_one = drive(other_run, other_turn, status="open", agent="editor", iterations=1)
    client = login(client, viewer)

    everything = client.get("/api/loops").json()
    assert [item["id"] for item in everything["items"]] == [open_one.pk, done.pk]
    first = everything["items"][1]
    assert (
        first["session"] == run.pk
        and first["agent"] == "host"
        and first["recipe"] == "driven-pages"
    )
    assert first["pipeline"] == ["researcher", "drafter"] and first["iterations"] == 2
    assert first["status"] == "completed" and first["result"] == "draft 2"
    assert first["url"].endswith(f"/loops/{done.pk}/") and first["run_url"].endswith(
        f"/runs/{run.pk}/"
    )
    assert [i["id"] for i in client.get(f"/api/loops?session={run.pk}").json()["items"]] == [
        done.pk
    ]
    assert [i["id"] for i in client.get("/api/loops?agent=editor").json()["items"]] == [open_one.pk]
    assert [i["id"] for i in client.get("/api/loops?status=open").json()["items"]] == [open_one.pk]
    assert client.get("/api/loops?status=open&agent=host").json()["items"] == []
    page = client.get("/api/loops?limit=1").json()
    assert page["next_cursor"] == open_one.pk
    assert [
        i["id"] for i in client.get(f"/api/loops?limit=1&cursor={open_one.pk}").json()["items"]
    ] == [done.pk]
    bad = client.get("/api/loops?stauts=open")
    assert bad.status_code == 422 and "stauts" in bad.json()["detail"]
    assert client.get("/api/loops?status=sleeping").status_code == 422


def test_the_api_gives_a_loop_with_its_iterations(client, viewer, driven_run):
    run, _, turn = driven_run
    loop = drive(run, turn)
    body = login(client, viewer).get(f"/api/loops/{loop.pk}").json()
    assert body["loop"]["id"] == loop.pk and body["loop"]["max_iterations"] == 5
    one, two = body["iterations"]
    assert (one["number"], one["input"], one["output"], one["feedback"]) == (
        1,
        "Widget 2.0",
        "draft 1",
        "",
    )
    assert (two["input"], two["feedback"], two["status"]) == ("draft 1", "Shorter.", "completed")
    assert one["started_at"] and one["finished_at"] and one["duration_ms"] is not None
    (step,) = one["steps"]
    assert step["agent"] == "drafter" and step["status"] == "completed"
    assert step["output"] == f"<b>draft 1</b> of loop {loop.pk}"
    assert login(client, viewer).get("/api/loops/999999").status_code == 404


def test_the_api_needs_a_reader(client, outsider, driven_run):
    run, _, turn = driven_run
    loop = drive(run, turn)
    assert client.get("/api/loops").status_code == 401
    assert client.get(f"/api/loops/{loop.pk}").status_code == 401
    client = login(client, outsider)
    assert client.get("/api/loops").status_code == 403
    assert client.get(f"/api/loops/{loop.pk}").status_code == 403


def test_a_script_reads_loops_with_a_bearer_token(viewer, outsider, driven_run):
    from console.models import ApiToken
    from tests.api.conftest import ApiClient, client_for

    run, _, turn = driven_run
    loop = drive(run, turn)
    _, read_only = ApiToken.issue(viewer, name="reader", scope="read")
    for api in (client_for(viewer), ApiClient(read_only)):
        listed = api.get("/api/loops", session=run.pk)
        assert listed.status_code == 200, listed.body
        assert [item["id"] for item in listed.body["items"]] == [loop.pk]
        detail = api.get(f"/api/loops/{loop.pk}")
        assert detail.status_code == 200, detail.body
        assert detail.body["loop"]["id"] == loop.pk
        assert [i["output"] for i in detail.body["iterations"]] == ["draft 1", "draft 2"]
    for path in ("/api/loops", f"/api/loops/{loop.pk}"):
        assert ApiClient("not-a-token").get(path).status_code == 401
        assert client_for(outsider).get(path).status_code == 403


# --- the pages -------------------------------------------------------------------------------


def test_the_loops_page_lists_and_filters(client, viewer, driven_run):
    run, _, turn = driven_run
    first = drive(run, turn)
    second = drive(run, turn, status="exhausted", pipeline=("drafter",))
    client = login(client, viewer)
    body = client.get(reverse("loop_list")).content.decode()
    assert f"Loop {first.pk}" in body and f"Loop {second.pk}" in body
    assert "researcher → drafter" in body and "badge-exhausted" in body
    only = client.get(reverse("loop_list") + "?status=exhausted").content.decode()
    assert f"Loop {second.pk}</a>" in only and f"Loop {first.pk}</a>" not in only
    none = client.get(reverse("loop_list") + f"?session={run.pk + 1}").content.decode()
    assert "No loops match" in none


def test_a_loop_page_replays_the_history_escaped(client, viewer, driven_run):
    run, _, turn = driven_run
    loop = drive(run, turn)
    body = login(client, viewer).get(reverse("loop_detail", args=[loop.pk])).content.decode()
    assert "Iteration 1" in body and "Iteration 2" in body
    assert "The host's feedback" in body and "Shorter." in body
    assert "<b>draft 1</b>" not in body and "draft 1" in body  # agent output never becomes markup
    assert f"/api/loops/{loop.pk}" in body and "the host was satisfied" in body
    assert login(client, viewer).get(reverse("loop_detail", args=[999999])).status_code == 404


def test_pages_cost_the_same_queries_for_many_loops_and_iterations(
    client, viewer, driven_run, django_assert_max_num_queries
):
    run, _, turn = driven_run
    small = drive(run, turn, iterations=3)
    for _ in range(11):  # more steps than a page of the run's timeline (20) from the start
        drive(run, turn, iterations=2)
    client = login(client, viewer)
    for url in (
        reverse("loop_list"),
        reverse("loop_detail", args=[small.pk]),
        reverse("run_detail", args=[run.pk]),
    ):
        assert client.get(url).status_code == 200
    budget = {}
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for name, url in (
        ("list", reverse("loop_list")),
        ("detail", reverse("loop_detail", args=[small.pk])),
        ("run", reverse("run_detail", args=[run.pk])),
    ):
        with CaptureQueriesContext(connection) as seen:
            client.get(url)
        budget[name] = len(seen)
    big = drive(run, turn, iterations=30)
    for _ in range(30):
        drive(run, turn, iterations=2)
    with django_assert_max_num_queries(budget["list"]):
        assert client.get(reverse("loop_list")).status_code == 200
    with django_assert_max_num_queries(budget["detail"]):
        body = client.get(reverse("loop_detail", args=[big.pk])).content.decode()
    assert "Iteration 30" in body
    with django_assert_max_num_queries(budget["run"]):
        assert client.get(reverse("run_detail", args=[run.pk])).status_code == 200


def test_an_operators_run_page_asks_no_query_per_pipeline_step(client, operator, driven_run):
    """Each step's card asks whether it can be forked (is its row a driven run's step?):
    asked once per node, not once per card."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run, _, turn = driven_run
    drive(run, turn, iterations=2)
    client = login(client, operator)
    url = reverse("run_detail", args=[run.pk])
    client.get(url)  # warm caches (content types, permissions)
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    for _ in range(3):  # still under a page of the timeline (20 cards)
        drive(run, turn, iterations=2)
    assert Iteration.objects.filter(run=run).count() < 20
    with CaptureQueriesContext(connection) as more:
        body = client.get(url).content.decode()
    assert body.count("data-fork-link") == 8  # one per loop iteration: its last step
    assert len(more) == len(few)


def test_the_run_page_shows_the_loops_and_refreshes_them(client, viewer, driven_run):
    run, _, turn = driven_run
    loop = drive(run, turn, status="open", iterations=1)
    client = login(client, viewer)
    body = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert 'id="driven-loops"' in body and "sse:loops-changed" in body
    assert "iteration 1 of 5" in body and f"Loop {loop.pk}" in body
    part = client.get(reverse("run_loops_part", args=[run.pk])).content.decode()
    assert part.startswith('<section id="driven-loops"') or 'id="driven-loops"' in part
    assert "researcher" in part and "draft 1" in part


def test_a_workflow_run_page_has_no_loop_panel(client, viewer, bundled, operator):
    run = services.start_run(
        bundled["counter-loop"], actor=Actor.operator(operator, "console"), message="x"
    )
    body = login(client, viewer).get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "driven-loops" not in body


def test_long_histories_are_read_a_page_at_a_time(client, viewer, driven_run):
    run, _, turn = driven_run
    loop = drive(run, turn, iterations=130, status="open")
    client = login(client, viewer)
    first = client.get(reverse("loop_detail", args=[loop.pk])).content.decode()
    assert "Iteration 1</strong>" in first and "Iteration 100</strong>" in first
    assert "Iteration 101</strong>" not in first and "?from=101" in first
    rest = client.get(reverse("loop_detail", args=[loop.pk]) + "?from=101").content.decode()
    assert "Iteration 130</strong>" in rest and "Iteration 100</strong>" not in rest
    assert "?from=1" in rest and "Iterations 101 to 130 of 130" in rest
    # The run page shows the latest iterations and sends the reader to the whole history.
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "Iteration 130</strong>" in page and "Iteration 110</strong>" not in page
    assert "the whole history" in page
    # The API gives it whole.
    api = client.get(f"/api/loops/{loop.pk}").json()
    assert len(api["iterations"]) == 130
