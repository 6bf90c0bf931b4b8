"""The crumbs on the run's live stream (the ASGI path browsers and frontends use): each is
an event of its own name whose data is exactly the crumb's fields, in seq order; a client
that connects late, or a seq published out of order, gets every crumb from the log."""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from django.urls import reverse

from loops.driven.models import LoopIteration
from runs import live
from runs.live_views import run_change_events
from tests.console.test_live import parse_sse, read_stream
from tests.driven.conftest import drive

pytestmark = pytest.mark.django_db


def crumbs(text: str) -> list[tuple[str, dict, str]]:
    return [
        (e["event"], json.loads(e["data"]), e.get("id"))
        for e in parse_sse(text)
        if e.get("event", "").startswith("loop:")
    ]


def test_a_late_client_gets_every_crumb_in_order(viewer, driven_run):
    run, _, turn = driven_run
    loop = drive(run, turn, iterations=2)
    run.refresh_from_db()
    text = read_stream(
        viewer, reverse("run_live", args=[run.pk]) + "?after=0", until="loops-changed"
    )
    got = crumbs(text)
    assert [name for name, _, _ in got] == [
        "loop:start",
        "loop:iteration:start",
        "loop:iteration:end",
        "loop:iteration:start",
        "loop:iteration:end",
        "loop:end",
    ]
    assert got[0][1] == {
        "loopId": loop.pk,
        "pipeline": ["researcher", "drafter"],
        "maxIterations": 5,
    }
    assert got[2][1] == {"loopId": loop.pk, "iteration": 1, "output": "draft 1"}
    assert got[-1][1] == {
        "loopId": loop.pk,
        "status": "completed",
        "iterations": 2,
        "result": "draft 2",
    }
    seqs = [int(event_id) for _, _, event_id in got]
    assert seqs == sorted(seqs) and seqs[-1] <= run.last_seq


def test_live_crumbs_and_a_gap_in_the_seqs(viewer, driven_run):
    run, _, turn = driven_run
    loop = drive(run, turn, iterations=1, status="open")
    run.refresh_from_db()
    after = run.last_seq
    with transaction.atomic():  # two crumbs; only the second one's publication arrives
        it = loop.begin_iteration(run, input="draft 1")
        loop.end_iteration(
            run, it, output="draft 2", shown="draft 2", status=LoopIteration.Status.COMPLETED
        )
    second = run.events.get(seq=after + 2)

    def publish():
        live.publish_event(run.pk, second.as_dict())

    text = read_stream(
        viewer,
        reverse("run_live", args=[run.pk]),
        headers={"Last-Event-ID": str(after)},
        then=publish,
        until="loops-changed",
    )
    assert [(name, data) for name, data, _ in crumbs(text)] == [
        ("loop:iteration:start", {"loopId": loop.pk, "iteration": 2}),
        ("loop:iteration:end", {"loopId": loop.pk, "iteration": 2, "output": "draft 2"}),
    ]


def test_crumbs_refresh_the_loop_panel_and_the_timeline():
    assert run_change_events({"loop:iteration:end"}) == [
        "run-changed",
        "iterations-changed",
        "loops-changed",
    ]
    assert "loops-changed" not in run_change_events({"node_started"})
