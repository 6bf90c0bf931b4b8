"""A deterministic demo agent: no network, no model, the same answer every time.

It exists so the bundled recipes show real loops on a fresh machine, and so tests and
benchmarks have an agent that behaves predictably:
- it reports which iteration and session turn it is on (sessions thread like a real agent's);
- when the prompt asks it to output a completion signal (`output: COMPLETE`, or
  `<promise>COMPLETE</promise>`), it emits `<promise>COMPLETE</promise>` from iteration N on,
  where N comes from "after N iterations" in the prompt (default 3, or `complete_after`);
- when the prompt names a file of the working directory that says "N failing", it "fixes"
  one: the file then says "N-1 failing" (so an `until_bash` check can turn green);
- with an output schema it answers JSON that fits it; an integer `score` grows each
  iteration (55, 70, 85, ...) and booleans turn true once the score reaches 80;
- offered tools, it calls them as scripted (runs/providers/demo_tools.py): the driven
  loop's host starts, iterates with feedback (`iterations` outputs, default 2) and finishes.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

from runs import kinds
from runs.sandbox import files

from .base import AgentRequest, AgentResult, OnChunk
from .demo_tools import DemoToolCaller, drives_a_loop

SIGNAL_TAG = re.compile(r"<promise>\s*([A-Za-z0-9_-]+)\s*</promise>", re.I)
SIGNAL_ASK = re.compile(r"\boutput:?\s+([A-Z][A-Z0-9_]{2,})\b")
AFTER = re.compile(r"after\s+(\d+)\s+iterations?", re.I)
# Each pattern may only start where its run of characters starts (the lookbehinds): one
# allowed to start anywhere rescans a long run from every position, quadratic in the
# prompt, and a 100,000-character message would pin a worker for most of a minute.
FILE_NAME = re.compile(r"(?<![\w./-])[\w./-]+\.(?:txt|md|json)\b")
FAILING = re.compile(r"(?<!\d)(\d+)\s+failing")
# The largest file it "fixes" (a longer one is left alone).
FIXED_FILE_LIMIT = 1 << 20
# Feedback a driven loop's host passed down ({"previousOutput": ..., "feedback": "..."}).
FEEDBACK = re.compile(r'"feedback":\s*("(?:[^"\\]|\\.){0,2000}")')
# ... or an earlier demo step's note of it, passed down the pipeline.
REVISED = re.compile(r"Revised for the feedback: “([^”\n]{0,2000})”")


class DemoProvider:
    structured_output = "enforced"

    def __init__(
        self,
        name: str = "demo",
        delay: float = 0.03,
        complete_after: int | None = None,
        *,
        tool_calls: list | None = None,
        iterations: int = 2,
    ):
        self.name = name
        self.delay = float(delay)
        self.complete_after = complete_after
        self.tool_calls = tool_calls
        try:
            self.iterations = max(1, int(iterations or 2))
        except (TypeError, ValueError):
            self.iterations = 2

    def run(self, request: AgentRequest, on_chunk: OnChunk) -> AgentResult:
        for kind in kinds.all_kinds():  # a kind's agent it plays its own way (a role)
            if kind.plays(request):
                return kind.demo_turn(self, request, on_chunk)
        if request.tools and (self.tool_calls or drives_a_loop(request)):
            return self._call_tools(request, on_chunk)
        session_id = request.session_id or uuid.uuid4().hex
        turn = self._next_turn(request.run_id, session_id)
        n = request.iteration or turn
        if request.output_schema:
            text = json.dumps(self._payload(request.output_schema, n, request.prompt))
        else:
            text = self._prose(request, n, turn, session_id)
        for piece in re.findall(r"\S+\s*|\s+", text):
            on_chunk(piece)
            if self.delay:
                time.sleep(self.delay)
        return AgentResult(
            text=text,
            session_id=session_id,
            tokens_in=len(request.prompt.split()),
            tokens_out=len(text.split()),
        )

    def _call_tools(self, request: AgentRequest, on_chunk: OnChunk) -> AgentResult:
        caller = DemoToolCaller(request, on_chunk)
        if self.tool_calls:
            text = caller.follow(list(self.tool_calls))
        else:
            text = caller.host(self.iterations)
        return AgentResult(
            text=text,
            session_id=request.session_id or uuid.uuid4().hex,
            tokens_in=len(request.prompt.split()),
            tokens_out=len(text.split()),
            tool_calls=caller.records,
        )

    def _threshold(self, prompt: str) -> int:
        if self.complete_after:
            return int(self.complete_after)
        match = AFTER.search(prompt)
        return int(match.group(1)) if match else 3

    def _prose(self, request: AgentRequest, n: int, turn: int, session_id: str) -> str:
        lines = [f"Demo agent: iteration {n}, turn {turn} of session {session_id[:8]}."]
        lines += self._fix_files(request)
        lines += self._feedback(request.prompt)
        lines.append(f"I read {len(request.prompt)} characters of instructions.")
        signal = SIGNAL_TAG.search(request.prompt) or SIGNAL_ASK.search(request.prompt)
        if signal and n >= self._threshold(request.prompt):
            lines.append(f"All done.\n\n<promise>{signal.group(1)}</promise>")
        elif signal:
            lines.append("Not finished yet; more to do next iteration.")
        return "\n".join(lines) + "\n"

    def _feedback(self, prompt: str) -> list[str]:
        found = FEEDBACK.search(prompt)
        try:
            feedback = json.loads(found.group(1)) if found else None
        except ValueError:
            feedback = None
        if feedback is None and (noted := REVISED.search(prompt)):
            feedback = noted.group(1)
        return [f"Revised for the feedback: “{feedback}”"] if feedback else []

    def _fix_files(self, request: AgentRequest) -> list[str]:
        """It runs in the worker, not in a sandbox: the files it edits are read and written
        like any file of an agent's workspace (runs/sandbox/files.py)."""
        notes = []
        if request.read_only:
            return notes
        for name in dict.fromkeys(FILE_NAME.findall(request.prompt)):
            try:
                found = files.read_file(request.workdir, name, limit=FIXED_FILE_LIMIT)
            except OSError:  # missing, outside the tree, a link, a FIFO...
                continue
            content = found.text()
            match = FAILING.search(content)
            if found.cut or not (match and int(match.group(1)) > 0):
                continue
            left = int(match.group(1)) - 1
            fixed = FAILING.sub(f"{left} failing", content, count=1)
            try:
                files.write_file(request.workdir, name, fixed.encode("utf-8", "replace"))
            except OSError:
                continue
            notes.append(f"Fixed one failing test in {name}: {left} failing left.")
        return notes

    def _payload(self, schema: dict, n: int, prompt: str):
        score = min(100, 40 + 15 * n)
        done = (
            score >= 80
            if "score" in (schema.get("properties") or {})
            else n >= self._threshold(prompt)
        )
        return self._value(schema, "", n, score, done)

    def _value(self, schema: dict, name: str, n: int, score: int, done: bool):
        if "enum" in schema:
            return schema["enum"][0]
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if kind == "object" or "properties" in schema:
            props = schema.get("properties") or {}
            return {key: self._value(sub, key, n, score, done) for key, sub in props.items()}
        if kind == "array":
            return []
        if kind == "boolean":
            return done
        if kind in ("integer", "number"):
            return score if "score" in name.lower() else n
        return f"Demo {name or 'answer'} for iteration {n}."

    def _next_turn(self, run_id: int | None, session_id: str) -> int:
        """Count the session's turns like a real agent's transcript would. They live in the
        run's data folder (iterations of one run may land on different workers), never in
        the working tree: that is the user's. Without a run, in this process only."""
        if run_id is None:
            turn = _UNBOUND_TURNS.get(session_id, 0) + 1
            _UNBOUND_TURNS[session_id] = turn
            return turn
        from django.conf import settings

        folder = Path(settings.LOOP_DATA_DIR) / "runs" / str(run_id) / "demo-sessions"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{Path(session_id).name}.json"
        turn = json.loads(path.read_text())["turns"] + 1 if path.exists() else 1
        path.write_text(json.dumps({"turns": turn}))
        return turn


_UNBOUND_TURNS: dict[str, int] = {}
