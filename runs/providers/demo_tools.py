"""The demo agent as a tool caller: a scripted host, with no network and no model.

When a call offers tools, the demo agent calls them instead of writing prose:
- with a `tool_calls` script in its options (a list of `{name, arguments}`), it makes those
  calls in order, whatever they answer (tests and demos of refusals use this);
- otherwise, offered the driven-loop tools, it drives a loop the way a careful host would:
  it starts a pipeline of every agent of its pool but itself, iterates with feedback until
  it has seen `iterations` outputs (or the cap says stop), and finishes the loop.
Its answer tells what it did, so the run page reads like a host's judgement.
"""

from __future__ import annotations

import json
import re

from .activity import summarize_arguments, tool_event
from .base import AgentRequest, OnChunk

START, ITERATE, FINISH = "core_start_loop", "core_iterate_loop", "core_finish_loop"
POOL = re.compile(r"pool:\s*([A-Za-z0-9_, -]+)", re.I)
FEEDBACK = (
    "Good start. Make it shorter and say who it is for.",
    "Better. End with one clear next step for the reader.",
    "Nearly there. Cut every sentence the reader does not need.",
)


class DemoToolCaller:
    def __init__(self, request: AgentRequest, on_chunk: OnChunk):
        self.request = request
        self.tools = request.tools
        self.on_chunk = on_chunk
        self.records: list[dict] = []
        self.lines: list[str] = []

    def call(self, name: str, arguments: dict) -> tuple[bool, object]:
        result = self.tools.call(name, arguments)
        self.records.append(
            tool_event(self.on_chunk, name, summarize_arguments(arguments), ok=result.ok)
        )
        try:
            value = json.loads(result.content)
        except ValueError:
            value = result.content
        return result.ok, value

    def follow(self, script: list) -> str:
        for step in script:
            name = str(step.get("name", "")) if isinstance(step, dict) else str(step)
            arguments = step.get("arguments") or {} if isinstance(step, dict) else {}
            ok, value = self.call(name, arguments)
            verdict = "done" if ok else "refused"
            self.lines.append(f"{name}: {verdict}: {_short(value)}")
        return self.answer("Demo agent: I made the calls I was scripted to make.")

    def host(self, iterations: int) -> str:
        pipeline = self._pipeline()
        ok, value = self.call(START, {"pipeline": pipeline})
        if not ok and "still open" in str(value):
            # A loop is already open (a forked run goes on from one): judge it and close it.
            self.lines.append("A loop was already open, its latest output before me.")
            return self._finish()
        if not ok:
            self.lines.append(f"I could not start the loop: {_short(value)}")
            return self.answer("Demo host: no loop ran.")
        self.lines.append(f"Started loop {value['loopId']}: {' → '.join(pipeline)}.")
        seen = 1
        while seen < iterations and value.get("canIterate"):
            feedback = FEEDBACK[(seen - 1) % len(FEEDBACK)]
            ok, value = self.call(ITERATE, {"feedback": feedback})
            if not ok:
                self.lines.append(f"Iterating was refused: {_short(value)}")
                break
            if value.get("status") == "exhausted":
                self.lines.append("The loop reached its cap; its last output is the result.")
                return self.answer("Demo host: done.")
            seen = value["iteration"]
            self.lines.append(f"Iteration {seen}, after my feedback: “{feedback}”")
        return self._finish()

    def _finish(self) -> str:
        ok, value = self.call(FINISH, {})
        if ok:
            self.lines.append(f"Satisfied after {value['iterations']} iterations; finished.")
        else:
            self.lines.append(f"Finishing was refused: {_short(value)}")
        return self.answer("Demo host: done.")

    def _pipeline(self) -> list[str]:
        spec = self.tools.get(START).spec()
        found = POOL.search(spec.get("description", ""))
        pool = [p.strip() for p in found.group(1).split(",") if p.strip()] if found else []
        return [agent for agent in pool if agent != self.request.node_id] or pool

    def answer(self, headline: str) -> str:
        text = "\n".join([headline, *self.lines]) + "\n"
        self.on_chunk("\n" + text)
        return text


def drives_a_loop(request: AgentRequest) -> bool:
    return bool(request.tools) and request.tools.get(START) is not None


def _short(value, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
