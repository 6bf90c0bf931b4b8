"""A run as AG-UI events (the `ag-ui-protocol` package's event types and encoder).

Pure translation: run events (`seq`, `kind`, `step`, `data`, as the log and the live
feed carry them) and streamed output go in, AG-UI events come out. The view
(runs.ag_ui_views) reads the feed and the texts; nothing here touches the database.

The mapping (docs/api.md has it as a table):
- a console run is an AG-UI thread (`threadId` "run-42"); each stretch of it between
  waits is an AG-UI run: RUN_STARTED, then RUN_FINISHED when it ends — with the
  `interrupt` outcome when it waits for a person (a gate, a blocked step machine, a
  budget stop; one interrupt per pending gate), `cancelled` when cancelled — or
  RUN_ERROR when it failed. When it goes on after a wait, a new AG-UI run starts
  (`runId` "run-42-<seq>", the seq of the event that resumed it);
- nodes and iterations are steps: STEP_STARTED / STEP_FINISHED named after the node
  ("refine"; "loop.review@2" for a loop_group's body node in its 2nd round) and the
  iteration ("refine#3");
- what an agent or a step writes is a text message whose id is the live stream's target
  ("it-<iteration id>", "node-<node run id>"): TEXT_MESSAGE_START, CONTENT as it streams,
  END when the iteration or node ends (the rest of its text, from the database, first);
- the run's state (its status, its gates, the loops its crumbs describe) is a
  STATE_SNAPSHOT when an AG-UI run starts, then a STATE_DELTA (JSON Patch) per change.
"""

from __future__ import annotations

import copy

from ag_ui.core import (
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from ag_ui.encoder import EventEncoder

from runs.live_feed import is_crumb

PROTOCOL_VERSION = "1.0"
# Run statuses that end the AG-UI stream, and those that end an AG-UI run with an
# interrupt (the run waits for someone; the stream stays open and goes on after it). The
# kernel's: a kind's phase (`run_approved`) tells its status in its event (`run_status`).
SUCCEEDED = {"completed"}
WAITING = {"paused", "budget_exceeded"}
STEP_OPENERS = {"node_started", "iteration_started"}
STEP_CLOSERS = {"node_completed", "node_failed", "node_skipped"}
ITERATION_ENDS = {"iteration_completed", "iteration_failed"}
GATE_EVENTS = {"approval_requested", "gate_decided"}
ENDINGS = WAITING | SUCCEEDED | {"failed", "cancelled"}


def node_step(event: dict) -> str:
    number = (event.get("data") or {}).get("iteration")
    return f"{event['step']}@{number}" if number else event["step"]


def iteration_step(event: dict) -> str:
    return f"{event['step']}#{(event.get('data') or {}).get('iteration')}"


def run_status(event: dict) -> tuple[str, str] | None:
    """A run's status event (`run_<word>`) as (the word the run shows, its status): a kind's
    phase logs its status in the event's data (Run.set_status, Run.set_phase)."""
    kind = event["kind"]
    if not kind.startswith("run_") or kind == "run_created":
        return None
    word = kind.removeprefix("run_")
    return word, (event.get("data") or {}).get("status") or word


def is_state_event(kind: str) -> bool:
    return kind.startswith("run_") or kind in GATE_EVENTS or is_crumb(kind)


def _pointer(key) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


class RunState:
    """The state an AG-UI client keeps for a run, folded from its events: `run` (id,
    status), `gates` by id (each gate's structured state), `loops` by
    loopId (every crumb's fields merged, and the last crumb's name). Each change is also
    returned as JSON Patch operations, for STATE_DELTA."""

    def __init__(self, run_id: int):
        self.value: dict = {"run": {"id": run_id, "status": "pending"}, "gates": {}, "loops": {}}

    def apply(self, event: dict) -> list[dict]:
        kind, data = event["kind"], event.get("data") or {}
        if kind.startswith("run_") and kind != "run_created":
            return self._set(("run", "status"), kind.removeprefix("run_"))
        if kind == "approval_requested":
            gate = {
                "id": data.get("gate"),
                "node": event["step"],
                "kind": data.get("kind"),
                "iteration": data.get("iteration"),
                "completionSignaled": bool(data.get("completion_signaled")),
                "message": data.get("message", ""),
                "deadline": data.get("deadline"),
                "decisions": data.get("decisions") or [],
                "status": "pending",
            }
            return self._set(("gates", str(data.get("gate"))), gate)
        if kind == "gate_decided":
            key = str(data.get("gate"))
            gate = {
                **self.value["gates"].get(key, {"id": data.get("gate"), "node": event["step"]}),
                "status": data.get("status"),
                "decidedBy": data.get("by"),
                "surface": data.get("surface"),
                "comment": data.get("comment", ""),
                "decision": data.get("answered") or data.get("decision", ""),
            }
            return self._set(("gates", key), gate)
        if is_crumb(kind):
            key = str(data.get("loopId", ""))
            loop = {**self.value["loops"].get(key, {}), **data, "crumb": kind}
            return self._set(("loops", key), loop)
        return []

    def _set(self, path: tuple, value) -> list[dict]:
        *parents, last = path
        target = self.value
        for part in parents:
            target = target[part]
        if target.get(last) == value:
            return []
        target[last] = value
        pointer = "/" + "/".join(_pointer(p) for p in path)
        return [{"op": "add", "path": pointer, "value": copy.deepcopy(value)}]

    def pending_gates(self) -> list[dict]:
        return [g for g in self.value["gates"].values() if g.get("status") == "pending"]


class AgUiRun:
    """Translates one run's feed into AG-UI events for one stream. `open(prior)` folds the
    state events up to where the stream starts and opens an AG-UI run; `events(...)` and
    `outputs(...)` translate what follows; `ended` once the run is over (the stream ends)."""

    def __init__(self, run_id: int):
        self.run_id = run_id
        self.thread_id = f"run-{run_id}"
        self.state = RunState(run_id)
        self.segment = 0  # the seq of the event that started the current AG-UI run
        self.active = False  # between RUN_STARTED and its RUN_FINISHED / RUN_ERROR
        self.waiting = False  # the run waits (an interrupt ended the last AG-UI run)
        self.ended = False
        self.steps: list[str] = []  # open, in the order they opened
        self.suspended: list[str] = []  # open when the run began to wait
        self.texts: dict[str, str] = {}  # open text messages: the text sent so far
        self.closed: set[str] = set()

    @property
    def agui_run_id(self) -> str:
        return self.thread_id if not self.segment else f"{self.thread_id}-{self.segment}"

    # --- opening ----------------------------------------------------------------------

    def open(self, prior: list[dict]) -> list:
        """Fold the state events the stream starts after, then open an AG-UI run (and end
        it at once when the run already waits or is over)."""
        ending: dict = {}
        last = ("pending", "pending")
        for event in prior:
            self.state.apply(event)
            if (said := run_status(event)) is not None:
                ending, last = event.get("data") or {}, said
                if said[1] in WAITING:
                    self.waiting = True
                elif self.waiting:
                    self.waiting, self.segment = False, event["seq"]
        out = self._start()
        if last[1] in ENDINGS:
            out += self._end(last, ending)
        return out

    def _start(self) -> list:
        self.active, self.waiting = True, False
        out = [
            RunStartedEvent(
                thread_id=self.thread_id,
                run_id=self.agui_run_id,
                protocol_version=PROTOCOL_VERSION,
            ),
            StateSnapshotEvent(snapshot=copy.deepcopy(self.state.value)),
        ]
        for name in self.suspended:
            out.append(StepStartedEvent(step_name=name))
            self.steps.append(name)
        self.suspended = []
        return out

    # --- run events -------------------------------------------------------------------

    def events(self, events: list[dict], texts: dict) -> list[tuple]:
        """AG-UI events for run events, each paired with the seq it came from. `texts`
        maps (kind, step, iteration) of an iteration's or a node's end to (target, its
        whole text), read by the view."""
        out: list[tuple] = []
        for event in events:
            if self.ended:
                break
            out += [(e, event["seq"]) for e in self._event(event, texts)]
        return out

    def _event(self, event: dict, texts: dict) -> list:
        kind = event["kind"]
        said = run_status(event)  # (the word it shows, the status) of a run_<word> event
        status = said[1] if said is not None else None
        if self.waiting and said is not None and status not in WAITING:
            self.segment = event["seq"]
            self.state.apply(event)
            out = self._start()
            if status in ENDINGS:
                out += self._end(said, event.get("data") or {})
            return out
        delta = self.state.apply(event) if is_state_event(kind) else []
        if self.waiting:
            if kind in STEP_CLOSERS and node_step(event) in self.suspended:
                self.suspended.remove(node_step(event))
            return []  # the state is kept and goes out with the next RUN_STARTED
        out: list = [StateDeltaEvent(delta=delta)] if delta else []
        if kind == "node_started":
            out += self._open_step(node_step(event))
        elif kind == "iteration_started":
            out += self._open_step(iteration_step(event))
        elif kind in ITERATION_ENDS or kind in STEP_CLOSERS:
            found = texts.get((kind, event["step"], (event.get("data") or {}).get("iteration")))
            if found is not None:
                out += self._finish_text(*found)
            name = iteration_step(event) if kind in ITERATION_ENDS else node_step(event)
            out += self._close_step(name)
        elif status in ENDINGS:
            out += self._end(said, event.get("data") or {})
        return out

    def _open_step(self, name: str) -> list:
        if name in self.steps:
            return []  # a retried iteration starts again: its step is open already
        self.steps.append(name)
        return [StepStartedEvent(step_name=name)]

    def _close_step(self, name: str) -> list:
        if name not in self.steps:
            return []  # opened before this stream did (a reconnect), or never (a skip)
        self.steps.remove(name)
        return [StepFinishedEvent(step_name=name)]

    def _end(self, said: tuple[str, str], data: dict) -> list:
        """Close what is open and end the AG-UI run as the run's status says (`said`: the
        word it shows, its status)."""
        word, status = said
        out = [TextMessageEndEvent(message_id=t) for t in self.texts]
        self.closed.update(self.texts)
        self.texts = {}
        waiting = status in WAITING
        for name in reversed(self.steps):
            out.append(StepFinishedEvent(step_name=name))
        self.suspended = list(self.steps) if waiting else []
        self.steps = []
        self.active = False
        if waiting:
            self.waiting = True
            return [*out, self._interrupted(word, status, data)]
        self.ended = True
        ids = {"thread_id": self.thread_id, "run_id": self.agui_run_id}
        if status == "failed":
            message = data.get("error") or "The run failed."
            return [*out, RunErrorEvent(message=message, code="failed")]
        if status == "cancelled":
            return [*out, RunFinishedEvent(**ids, outcome=RunFinishedCancelledOutcome())]
        return [*out, RunFinishedEvent(**ids, result={"status": word})]

    def _interrupted(self, word: str, status: str, data: dict) -> RunFinishedEvent:
        gates = self.state.pending_gates() if status == "paused" else []
        interrupts = [
            Interrupt(
                id=f"gate-{gate['id']}",
                reason="gate",
                message=gate.get("message") or "",
                metadata={
                    "run": self.run_id,
                    "gate": gate["id"],
                    "node": gate.get("node"),
                    "kind": gate.get("kind"),
                    "iteration": gate.get("iteration"),
                    "completionSignaled": gate.get("completionSignaled", False),
                    # What POST /api/runs/{run}/respond takes, by id.
                    "decisions": gate.get("decisions", []),
                },
            )
            for gate in gates
        ] or [
            Interrupt(
                id=f"{self.thread_id}-{word}",
                reason=word,
                message=data.get("error") or f"The run is {word.replace('_', ' ')}.",
                metadata={"run": self.run_id},
            )
        ]
        return RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.agui_run_id,
            outcome=RunFinishedInterruptOutcome(interrupts=interrupts),
        )

    # --- streamed output --------------------------------------------------------------

    def missing(self, message: dict) -> bool:
        """Whether this chunk starts after what the stream has sent of its target (the
        chunks in between were not seen): the view then reads the target's whole buffer."""
        target = message.get("target")
        return (
            self.active
            and target not in self.closed
            and message.get("offset", 0) > len(self.texts.get(target, ""))
        )

    def outputs(self, messages: list[dict]) -> list:
        out: list = []
        for message in messages:
            target, offset, chunk = (
                message.get("target"),
                message.get("offset"),
                message.get("chunk"),
            )
            if not self.active or not isinstance(target, str) or target in self.closed:
                continue
            if not isinstance(offset, int) or not chunk:
                continue
            out += self._append(target, offset, chunk)
        return out

    def _append(self, target: str, offset: int, chunk: str) -> list:
        sent = self.texts.get(target, "")
        if offset > len(sent) or offset + len(chunk) <= len(sent):
            return []
        out: list = []
        if target not in self.texts:
            out.append(TextMessageStartEvent(message_id=target, role="assistant"))
        delta = chunk[len(sent) - offset :]
        out.append(TextMessageContentEvent(message_id=target, delta=delta))
        self.texts[target] = sent + delta
        return out

    def _finish_text(self, target: str, text: str) -> list:
        """End a message with the rest of its text from the database: what the stream has
        not carried yet, when the stored text goes on from what was streamed (an agent may
        store less or other text than it streamed: then what streamed stands)."""
        if target in self.closed:
            return []
        sent = self.texts.get(target, "")
        out = self._append(target, 0, text) if text.startswith(sent) else []
        if target in self.texts:
            out.append(TextMessageEndEvent(message_id=target))
            del self.texts[target]
        self.closed.add(target)
        return out


_encoder = EventEncoder()


def encode(event, event_id: int | None = None) -> str:
    """One server-sent event: the encoder's `data:` line, after our `id:` (the run event's
    seq, for Last-Event-ID) when the event came from one."""
    frame = _encoder.encode(event)
    return frame if event_id is None else f"id: {int(event_id)}\n{frame}"
