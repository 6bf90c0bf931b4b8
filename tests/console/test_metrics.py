"""/metrics: Prometheus' text format, parsed by prometheus_client's own parser; for staff
or a token with the `metrics` scope only; the numbers follow what the database holds; the
queue depth and the workers' heartbeats come from Redis."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from console.models import ApiToken
from runs.models import Gate, Iteration, NodeRun, Run
from tests.conftest import wait_for


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return {
        family.name: family for family in text_string_to_metric_families(response.content.decode())
    }


def value(families, name, sample_name=None, **labels):
    family = families[name]
    for sample in family.samples:
        if sample.name == (sample_name or name) and all(
            sample.labels.get(k) == v for k, v in labels.items()
        ):
            return sample.value
    raise AssertionError(f"no sample {sample_name or name} {labels}")


@pytest.fixture
def history(bundled, operator):
    """Two runs with iterations, usage and gates, written row by row."""
    recipe = bundled["guided-refine"]
    now = timezone.now()
    done = Run.objects.create(
        recipe=recipe, recipe_version=recipe.current_version, status="completed"
    )
    waiting = Run.objects.create(
        recipe=recipe, recipe_version=recipe.current_version, status="paused"
    )
    row = NodeRun.objects.create(
        run=done, node_id="refine", kind="loop", status="completed", state={"provider": "demo"}
    )
    for number, status in enumerate(["completed", "failed", "pending"], start=1):
        Iteration.objects.create(
            run=done,
            node_run=row,
            node_id="refine",
            number=number,
            status=status,
            started_at=None if status == "pending" else now,
            tokens_in=100,
            tokens_out=20,
            cost_usd=Decimal("0.25"),
        )
    summary = NodeRun.objects.create(
        run=done, node_id="summary", kind="prompt", status="completed", state={"provider": "claude"}
    )
    Iteration.objects.create(  # a prompt step's one agent call
        run=done,
        node_run=summary,
        node_id="summary",
        number=1,
        status="completed",
        started_at=now,
        tokens_in=7,
        tokens_out=3,
        cost_usd=Decimal("0.5"),
    )
    other = NodeRun.objects.create(run=waiting, node_id="refine", kind="loop", status="paused")
    decided = Gate.objects.create(
        run=done, node_run=row, node_id="refine", kind="loop", message="m", status="accepted"
    )
    Gate.objects.filter(pk=decided.pk).update(
        created_at=now - timedelta(minutes=10), decided_at=now
    )
    Gate.objects.create(
        run=waiting,
        node_run=other,
        node_id="refine",
        kind="loop",
        message="m",
        deadline_at=now - timedelta(minutes=1),
        on_timeout="remind",
    )
    return done, waiting


def test_who_may_read_the_metrics(client, viewer, admin_user, operator, db):
    assert client.get("/metrics").status_code == 401
    _, read_secret = ApiToken.issue(operator, scope="read")
    refused = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {read_secret}")
    assert refused.status_code == 403
    assert "needs a token with scope 'metrics'" in refused.json()["detail"]
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer nonsense").status_code == 401
    client.force_login(viewer)
    assert client.get("/metrics").status_code == 403
    client.force_login(admin_user)
    scrape(client)
    client.logout()
    token, secret = ApiToken.issue(operator, scope="metrics")
    scrape(client, HTTP_AUTHORIZATION=f"Bearer {secret}")
    # A metrics token opens nothing of the API.
    assert client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 403


def test_the_numbers_follow_the_database(client, admin_user, history):
    client.force_login(admin_user)
    families = scrape(client)
    assert value(families, "loop_runs", status="completed") == 1
    assert value(families, "loop_runs", status="paused") == 1
    assert value(families, "loop_runs", status="failed") == 0
    assert value(families, "loop_iterations_started", "loop_iterations_started_total") == 3
    finished = "loop_iterations_finished_total"
    assert value(families, "loop_iterations_finished", finished, status="completed") == 2
    assert value(families, "loop_iterations_finished", finished, status="failed") == 1
    wait = "loop_gate_wait_seconds"
    assert value(families, wait, wait + "_count") == 1
    assert value(families, wait, wait + "_sum") == pytest.approx(600, abs=1)
    assert value(families, wait, wait + "_bucket", le="300.0") == 0
    assert value(families, wait, wait + "_bucket", le="900.0") == 1
    assert value(families, "loop_gates_waiting") == 1
    assert value(families, "loop_gates_overdue") == 1
    tokens = "loop_provider_tokens_total"
    assert value(families, "loop_provider_tokens", tokens, provider="demo", direction="in") == 300
    assert value(families, "loop_provider_tokens", tokens, provider="claude", direction="out") == 3
    cost = "loop_provider_cost_usd_total"
    assert value(families, "loop_provider_cost_usd", cost, provider="demo") == pytest.approx(0.75)
    assert value(families, "loop_provider_cost_usd", cost, provider="claude") == 0.5


def test_queue_depth_and_worker_heartbeats(live_worker, client, admin_user, settings):
    client.force_login(admin_user)
    families = wait_for(
        lambda: (f := scrape(client)) and value(f, "loop_workers_alive") >= 1 and f,
        message="the worker's heartbeat",
    )
    beats = families["loop_worker_heartbeat_timestamp_seconds"].samples
    assert any(s.labels["worker"].startswith("test-") for s in beats)
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    assert value(families, "loop_queue_depth", queue=queue) >= 0
    # A message nobody consumes is counted.
    from console.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.client.lpush(queue + "-metrics-probe", "x")
    settings.CELERY_TASK_DEFAULT_QUEUE = queue + "-metrics-probe"
    try:
        assert value(scrape(client), "loop_queue_depth", queue=queue + "-metrics-probe") == 1
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.client.delete(queue + "-metrics-probe")


def test_a_scrape_costs_the_same_queries_however_much_history(client, admin_user, history):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(admin_user)
    client.get("/metrics")  # warm the session and permission caches
    with CaptureQueriesContext(connection) as small:
        scrape(client)
    done, _ = history
    row = done.nodes.get(node_id="refine")
    Iteration.objects.bulk_create(
        Iteration(run=done, node_run=row, node_id="refine", number=n, status="completed")
        for n in range(10, 1010)
    )
    with CaptureQueriesContext(connection) as big:
        families = scrape(client)
    assert len(big.captured_queries) == len(small.captured_queries) <= 15
    assert value(families, "loop_iterations_started", "loop_iterations_started_total") == 3
    finished = "loop_iterations_finished_total"
    assert value(families, "loop_iterations_finished", finished, status="completed") == 1002
