"""The inbox's order (issue 40): what needs attention first, with the reason in each row,
the same from the function (runs/inbox.py: ranked_attention), the page, GET /api/inbox and
the MCP tool `inbox`. Rows are made by hand: no worker is needed for the order."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.engine.stop_rules import Plateau, Point, plateau_near
from runs.models import Gate, NodeRun, Run
from tests.console.conftest import add_iteration, login, quiet_start

pytestmark = pytest.mark.django_db

PLATEAU = {"plateau": {"iterations": 3, "min_gain": 0.01, "then": "gate"}}


@dataclass
class Seeded:
    """The seeded runs by what they show, and the order and reasons the ranking gives."""

    runs: dict[str, Run]
    expected: list[tuple[str, str, str]]  # (run's name, item kind, reason)

    def order(self) -> list[tuple[int, str, str]]:
        return [(self.runs[name].pk, kind, reason) for name, kind, reason in self.expected]


def _run(bundled, operator, recipe, name, status, minutes_ago, **fields):
    run = quiet_start(bundled[recipe], operator, name)
    started = timezone.now() - timedelta(minutes=minutes_ago)
    Run.objects.filter(pk=run.pk).update(status=status, started_at=started, **fields)
    run.refresh_from_db()
    return run


def _gate(run, opened_minutes_ago, deadline=None):
    row = NodeRun.objects.create(run=run, node_id="ship", kind="approval", status="paused")
    gate = Gate.objects.create(
        run=run, node_run=row, node_id="ship", kind=Gate.Kind.APPROVAL, message="Ship it?"
    )
    Gate.objects.filter(pk=gate.pk).update(
        created_at=timezone.now() - timedelta(minutes=opened_minutes_ago),
        deadline_at=deadline,
        on_timeout=Gate.OnTimeout.REMIND if deadline else "",
    )
    return gate


def _spent(run, usd: str):
    row = NodeRun.objects.create(run=run, node_id="work", kind="loop", status="running")
    add_iteration(run, row, 1, tokens_in=100, tokens_out=10, cost_usd=Decimal(usd))


def _scored_loop(run, scores, stop=PLATEAU):
    row = NodeRun.objects.create(
        run=run, node_id="refine", kind="loop", status="running", max_iterations=20
    )
    NodeRun.objects.filter(pk=row.pk).update(state={"stop": stop, "score": "field"})
    for number, score in enumerate(scores, 1):
        add_iteration(run, row, number, structured={"score": score}, score=score)
    return row


def seed(bundled, operator) -> Seeded:
    """A gate overdue, a gate due soon (in a dear run: a deadline ranks first all the same),
    a run burning $0.42 a minute, a run stopped by its budget that burnt less, a loop one
    flat iteration from its plateau gate, and plain ones: a gate without a deadline, a run
    running half an hour, a loop still gaining (a plateau rule, not near), a finished run."""
    now = timezone.now()
    runs = {}
    runs["overdue"] = _run(bundled, operator, "release-approval", "overdue", "paused", 70)
    _gate(runs["overdue"], 60, deadline=now - timedelta(minutes=3, seconds=30))
    runs["due"] = _run(bundled, operator, "release-approval", "due", "paused", 10)
    _gate(runs["due"], 5, deadline=now + timedelta(minutes=12, seconds=30))
    _spent(runs["due"], "10")
    runs["burning"] = _run(bundled, operator, "counter-loop", "burning", "running", 10)
    _spent(runs["burning"], "4.20")
    runs["stopped"] = _run(
        bundled,
        operator,
        "counter-loop",
        "stopped",
        "budget_exceeded",
        60,
        budget={"cost_usd": 0.3},
    )
    _spent(runs["stopped"], "0.30")
    runs["stalled"] = _run(bundled, operator, "guided-refine", "stalled", "running", 20)
    _scored_loop(runs["stalled"], [0.4, 0.6, 0.8, 0.8, 0.8])
    runs["plain gate"] = _run(bundled, operator, "release-approval", "plain", "paused", 130)
    _gate(runs["plain gate"], 120)
    runs["plain run"] = _run(bundled, operator, "counter-loop", "plain run", "running", 30)
    runs["gaining"] = _run(bundled, operator, "guided-refine", "gaining", "running", 5)
    _scored_loop(runs["gaining"], [0.4, 0.5, 0.6, 0.7])
    _run(bundled, operator, "counter-loop", "done", "completed", 90, finished_at=now)
    expected = [
        ("overdue", "gate", "overdue by 3 minutes"),
        ("due", "gate", "deadline in 12 minutes"),
        ("burning", "running", "burning $0.42 a minute"),
        ("stopped", "needs_person", "spent $0.0050 a minute"),
        ("stalled", "running", "plateau at refine: one more flat iteration opens its gate"),
        ("plain gate", "gate", "waiting 2 hours"),
        ("plain run", "running", "running 30 minutes"),
        ("gaining", "running", "running 5 minutes"),
    ]
    return Seeded(runs, expected)


@pytest.fixture
def seeded(bundled, operator):
    return seed(bundled, operator)


def test_the_function_ranks_by_deadline_burn_rate_plateau_then_waiting(seeded):
    from runs.inbox import ranked_attention

    ranked = ranked_attention()
    assert [(i.run.pk, i.kind, i.reason) for i in ranked] == seeded.order()
    assert [i.tier for i in ranked] == [
        "deadline",
        "deadline",
        "burn_rate",
        "burn_rate",
        "plateau",
        "waiting",
        "waiting",
        "waiting",
    ]
    assert [i.rank for i in ranked] == list(range(1, 9))
    stopped = ranked[3]
    assert stopped.path == reverse("run_detail", args=[stopped.run.pk]) + "#run-budget"
    assert ranked[0].path == reverse("gate_detail", args=[ranked[0].run.pk, ranked[0].gate.pk])
    assert ranked[2].as_dict()["burn_usd_per_minute"] == pytest.approx(0.42, abs=0.001)
    assert ranked[4].as_dict()["node"] == "refine"


def _rows(body: str) -> list[str]:
    """The ranked card's rows, as their text (tags dropped, spaces collapsed)."""
    table = body.split('<table class="ranked-rows">', 1)[1].split("</table>", 1)[0]
    rows = re.split(r"(?=<tr )", table.split("<tbody>", 1)[1])[1:]
    return [" ".join(re.sub(r"<[^>]+>", " ", row).split()) for row in rows]


def test_the_page_shows_the_same_order_with_the_reason_in_each_row(client, viewer, seeded):
    body = login(client, viewer).get(reverse("inbox") + "?part=live").content.decode()
    rows = _rows(body)
    assert len(rows) == len(seeded.expected)
    for row, (pk, _, reason) in zip(rows, seeded.order(), strict=True):
        assert row.startswith(f"{reason} Run {pk} "), row
    # The gates keep their keys (j / k select them) and their deadline's badge.
    assert body.count("<tr data-gate-item") == 3
    assert '<span class="badge badge-overdue">overdue</span> by 3 minutes' in body
    assert 'title="then a reminder is sent">deadline in 12 minutes</time>' in body
    # Something waits for a person: the card does not say nothing does.
    assert "Nothing is waiting for you." not in body.split("Needs a person", 1)[0]


def test_the_api_gives_the_same_items_in_the_same_order(client, viewer, seeded):
    answer = login(client, viewer).get("/api/inbox")
    assert answer.status_code == 200, answer.content
    items = answer.json()["items"]
    assert [(i["run"], i["kind"], i["reason"]) for i in items] == seeded.order()
    first = items[0]
    assert first["rank"] == 1 and first["why"] == "deadline" and first["gate_kind"] == "approval"
    assert first["url"].endswith(f"/runs/{first['run']}/gates/{first['gate']}/")
    assert first["deadline_at"] is not None and first["node"] == "ship"
    assert items[2]["burn_usd_per_minute"] == pytest.approx(0.42, abs=0.001)
    assert items[4]["why"] == "plateau" and items[4]["node"] == "refine"
    assert items[5]["why"] == "waiting" and items[5]["burn_usd_per_minute"] is None
    refused = client.get("/api/inbox?limit=3")
    assert refused.status_code == 422 and "takes no query parameter" in refused.json()["detail"]


def test_a_read_token_reads_the_inbox_and_an_outsider_cannot(client, viewer, outsider, seeded):
    from console.models import ApiToken

    secret = ApiToken.issue(viewer, name="inbox", scope="read")[1]
    answer = client.get("/api/inbox", headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code == 200 and len(answer.json()["items"]) == len(seeded.expected)
    assert client.get("/api/inbox").status_code == 401
    assert login(client, outsider).get("/api/inbox").status_code == 403


def test_the_mcp_tool_gives_the_same_items_in_the_same_order(
    transactional_db, bundled, operator, viewer
):
    from mcp import Client

    from runs.orchestration.tools import Caller, CallerOf, build_server
    from tests.orchestration.conftest import run_async

    seeded = seed(bundled, operator)
    server = build_server(CallerOf(Caller(viewer)))

    async def call():
        async with Client(server) as client:
            return await client.call_tool("inbox", {})

    result = run_async(call)
    assert not result.is_error, result.content
    items = result.structured_content["items"]
    assert [(i["run"], i["kind"], i["reason"]) for i in items] == seeded.order()
    assert items[0]["url"].endswith(f"/runs/{items[0]['run']}/gates/{items[0]['gate']}/")


def test_nothing_waiting_while_runs_run_says_so_above_them(client, viewer, bundled, operator):
    run = _run(bundled, operator, "counter-loop", "alone", "running", 3)
    body = login(client, viewer).get(reverse("inbox") + "?part=live").content.decode()
    card = body.split('aria-labelledby="waiting-title"', 1)[1].split("</section>", 1)[0]
    assert "Nothing is waiting for you." in card
    (row,) = _rows(body)
    assert row.startswith(f"running 3 minutes Run {run.pk} ")


@pytest.mark.parametrize(
    "scores",
    [
        [0.9, 0.1, 0.2, 0.5, 0.5],  # the best came first: long flat, not "about to"
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.8],  # one flat: about to
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],  # still gaining
        [0.5, 0.5],  # too few to tell
        [0.3] * 12,  # flat for long: fired already, not "about to"
    ],
)
def test_reading_the_latest_scores_decides_as_all_of_them_would(bundled, operator, scores):
    """The inbox reads a loop's last scores only (the oldest carrying the best before it):
    it must say what `plateau_near` says on every score."""
    from runs.inbox import plateaus_near

    run = _run(bundled, operator, "guided-refine", "long", "running", 5)
    _scored_loop(run, scores)
    rule = Plateau(iterations=3, min_gain=0.01)
    every = [Point(n, s) for n, s in enumerate(scores, 1)]
    assert (run.pk in plateaus_near([run])) == plateau_near(rule, every)


def test_the_ranking_costs_the_same_queries_for_2_or_12_runs(bundled, operator):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs.inbox import attention_candidates, ranked_attention

    def cost() -> int:
        candidates = attention_candidates()
        with CaptureQueriesContext(connection) as queries:
            ranked_attention(*candidates)
        return len(queries)

    for name in ("a", "b"):
        _scored_loop(_run(bundled, operator, "guided-refine", name, "running", 5), [0.1, 0.2])
    few = cost()
    for n in range(10):
        run = _run(bundled, operator, "guided-refine", f"more {n}", "running", 5)
        _scored_loop(run, [0.1] * (n + 3))
        _spent(run, "0.5")
    assert cost() == few == 4
