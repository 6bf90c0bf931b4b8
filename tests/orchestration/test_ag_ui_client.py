"""A small Node script follows runs with the official AG-UI client (@ag-ui/client's
HttpAgent, which checks the event sequence as it goes) against /api/runs/{id}/ag-ui on
uvicorn, with a real worker: a driven loop to its end, and a gated loop through its gate."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading

import pytest

from tests.api.conftest import client_for
from tests.conftest import ROOT, wait_for
from tests.orchestration.conftest import McpHttp, token

NODE_MODULES = ROOT / ".venv" / "lib" / "node_modules"
SCRIPT = ROOT / "tests" / "agui" / "follow_run.cjs"


class Follower:
    """`node follow_run.cjs URL`: the events the client accepted, one JSON object a line."""

    def __init__(self, url: str, secret: str):
        assert shutil.which("node"), "node is needed (make dev installs @ag-ui/client with npm)"
        assert (NODE_MODULES / "@ag-ui" / "client").is_dir(), "run make dev: @ag-ui/client"
        self.proc = subprocess.Popen(
            ["node", str(SCRIPT), url],
            env={**os.environ, "LOOP_TOKEN": secret, "NODE_PATH": str(NODE_MODULES)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        self.events: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def until(self, predicate, message: str) -> list[dict]:
        def seen():
            while not self.lines.empty():
                self.events.append(self.lines.get())
            return any(predicate(e) for e in self.events) or self.proc.poll() not in (None, 0)

        wait_for(seen, 120, message=message)
        assert self.proc.poll() in (None, 0), self.proc.stderr.read()
        return self.events

    def finish(self) -> list[dict]:
        events = self.until(lambda e: e["type"] == "CLIENT_DONE", "the client to finish")
        assert self.proc.wait(timeout=60) == 0, self.proc.stderr.read()
        return events

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def follow(console_server):
    followers: list[Follower] = []

    def start(run_id: int, secret: str) -> Follower:
        followers.append(Follower(f"{console_server}/api/runs/{run_id}/ag-ui", secret))
        return followers[-1]

    yield start
    for follower in followers:
        follower.stop()


def outline(events: list[dict]) -> list[str]:
    """The sequence, one word per event: a message's contents as one CONTENT, state
    deltas by what they change."""
    words: list[str] = []
    for event in events:
        kind = event["type"]
        if kind in ("STEP_STARTED", "STEP_FINISHED"):
            words.append(f"{kind}:{event['stepName']}")
        elif kind == "TEXT_MESSAGE_CONTENT":
            if words[-1] != "TEXT_MESSAGE_CONTENT":
                words.append(kind)
        elif kind == "STATE_DELTA":
            words += [f"DELTA:{op['path']}" for op in event["delta"]]
        elif kind == "RUN_FINISHED" and "outcome" in event:
            words.append(f"RUN_FINISHED:{event['outcome']['type']}")
        else:
            words.append(kind)
    return words


def _index(events: list[dict], kind: str, step: str) -> int:
    return next(i for i, e in enumerate(events) if e["type"] == kind and e["stepName"] == step)


def _messages_within(window: list[dict]) -> set[str]:
    """The messages that start, stream and end within `window`."""

    def ids(kind):
        return {e["messageId"] for e in window if e["type"] == kind}

    return ids("TEXT_MESSAGE_START") & ids("TEXT_MESSAGE_CONTENT") & ids("TEXT_MESSAGE_END")


def test_a_driven_loop_streams_its_steps_texts_and_crumbs(
    live_worker, console_server, follow, bundled, operator
):
    api = client_for(operator)
    run_id = api.post("/api/runs", {"recipe": "launch-note", "message": "Widget 2.0"}).body["id"]
    events = follow(run_id, token(operator, "read")).finish()
    words = outline(events)

    assert words[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert events[0]["threadId"] == f"run-{run_id}" and events[0]["runId"] == f"run-{run_id}"
    assert words[-2:] == ["RUN_FINISHED", "CLIENT_DONE"]
    assert events[-2]["result"] == {"status": "completed"}
    steps = [w for w in words if w.startswith("STEP_")]
    assert steps[:2] == ["STEP_STARTED:host", "STEP_STARTED:host#1"]
    for n in (1, 2, 3):
        for agent in ("researcher", "drafter"):
            # The step's own message starts, streams and ends inside it (the host's message,
            # streaming meanwhile, may interleave: AG-UI messages are told apart by id).
            start = _index(events, "STEP_STARTED", f"{agent}#{n}")
            end = _index(events, "STEP_FINISHED", f"{agent}#{n}")
            assert start < end
            assert _messages_within(events[start : end + 1]), outline(events[start : end + 1])
    assert steps[-2:] == ["STEP_FINISHED:host#1", "STEP_FINISHED:host"]

    # Each crumb is a state change of its loop, in order.
    crumbs = [e for e in events if e["type"] == "STATE_DELTA" and "/loops/" in str(e["delta"])]
    assert [e["delta"][0]["value"]["crumb"] for e in crumbs] == [
        "loop:start",
        *["loop:iteration:start", "loop:iteration:end"] * 3,
        "loop:end",
    ]
    loop = events[-1]["state"]["loops"]
    [(loop_id, final)] = loop.items()
    assert final["status"] == "completed" and final["iterations"] == 3
    assert final["pipeline"] == ["researcher", "drafter"] and final["maxIterations"] == 5
    assert events[-1]["state"]["run"] == {"id": run_id, "status": "completed"}

    # Each pipeline step's text is its output, whole; the host's is what it wrote as it
    # went (its tool calls among it).
    texts: dict[str, str] = {}
    for event in events:
        if event["type"] == "TEXT_MESSAGE_CONTENT":
            texts[event["messageId"]] = texts.get(event["messageId"], "") + event["delta"]
    from runs.models import Iteration

    for it in Iteration.objects.filter(run_id=run_id):
        if it.node_id == "host":
            assert texts[f"it-{it.pk}"].strip()
        else:
            assert texts[f"it-{it.pk}"] == it.raw_output


def test_a_gated_loop_ends_an_agui_run_at_its_gate_and_starts_another_after_it(
    live_worker, console_server, follow, bundled, operator
):
    api = client_for(operator)
    run_id = api.post("/api/runs", {"recipe": "guided-refine", "message": "the sea"}).body["id"]
    follower = follow(run_id, token(operator, "read"))
    events = follower.until(lambda e: e["type"] == "RUN_FINISHED", "the gate")
    from runs.models import Run

    gate = Run.objects.get(pk=run_id).gates.get()
    assert outline(events) == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "DELTA:/run/status",
        "STEP_STARTED:refine",
        "STEP_STARTED:refine#1",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED:refine#1",
        f"DELTA:/gates/{gate.pk}",
        "DELTA:/run/status",
        "STEP_FINISHED:refine",
        "RUN_FINISHED:interrupt",
    ]
    [interrupt] = events[-1]["outcome"]["interrupts"]
    assert interrupt["id"] == f"gate-{gate.pk}" and interrupt["reason"] == "gate"
    assert interrupt["message"].startswith("The agent said DONE.")
    assert interrupt["metadata"]["completionSignaled"] is True
    assert interrupt["metadata"]["iteration"] == 1

    # An orchestrating agent finalizes it; the stream goes on with a new AG-UI run.
    decided = McpHttp(console_server, token(operator)).call("approve", run_id=run_id, accept=True)
    assert decided.structured_content["outcome"] == "accepted"
    events = follower.finish()
    after = events[events.index(next(e for e in events if e["type"] == "RUN_FINISHED")) + 1 :]
    words = outline(after)
    assert words[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert after[0]["runId"].startswith(f"run-{run_id}-")
    snapshot_gate = after[1]["snapshot"]["gates"][str(gate.pk)]
    assert snapshot_gate["status"] == "accepted"
    assert (snapshot_gate["decidedBy"], snapshot_gate["surface"]) == ("otto", "mcp")
    assert words[2:] == [
        "STEP_STARTED:publish",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED:publish",
        "DELTA:/run/status",
        "RUN_FINISHED",
        "CLIENT_DONE",
    ]
    assert after[-1]["state"]["run"]["status"] == "completed"

    # A client that saw up to the pause (Last-Event-ID: its seq) catches up from there: a
    # new AG-UI run that ends at the gate at once, then the one that followed it.
    import httpx

    paused = Run.objects.get(pk=run_id).events.get(kind="run_paused").seq
    answer = httpx.get(
        f"{console_server}/api/runs/{run_id}/ag-ui",
        headers={
            "Authorization": f"Bearer {token(operator, 'read')}",
            "Last-Event-ID": str(paused),
        },
        timeout=60,
    )
    assert answer.status_code == 200 and answer.headers["content-type"] == "text/event-stream"
    frames = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
    assert outline(frames)[:3] == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED:interrupt"]
    assert frames[0]["runId"] == f"run-{run_id}"
    assert outline(frames)[3:5] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert frames[3]["runId"] == after[0]["runId"]
    assert outline(frames)[-1] == "RUN_FINISHED"
    ids = [int(line[3:]) for line in answer.text.splitlines() if line.startswith("id:")]
    assert ids and min(ids) > paused and ids == sorted(ids)
