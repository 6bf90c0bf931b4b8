"""A provider that answers from a function and remembers every prompt it was sent."""

from __future__ import annotations

import threading

from runs.providers.base import AgentRequest
from runs.providers.base import AgentResult as ProviderResult


class ScriptedProvider:
    def __init__(self, answer, *, structured_output="best_effort", name="scripted"):
        self.answer = answer  # answer(request, calls_so_far) -> text
        self.structured_output = structured_output
        self.name = name
        self.requests: list[AgentRequest] = []
        self.lock = threading.Lock()

    def run(self, request: AgentRequest, on_chunk) -> ProviderResult:
        with self.lock:
            self.requests.append(request)
            count = len(self.requests)
        text = self.answer(request, count)
        on_chunk(text)
        return ProviderResult(text=text, tokens_in=10, tokens_out=5, cost_usd=None)

    def prompts_for(self, node_id: str) -> list[str]:
        return [r.prompt for r in self.requests if r.node_id == node_id]


def run_async(coroutine):
    """`asyncio.run` in a thread of its own: this test process may have an event loop
    running already (Playwright's, for the browser tests), as a script never does."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
