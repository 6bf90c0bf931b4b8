"""Hosts execute a workflow's agent calls and gates. `DirectHost` calls the providers and
records nothing; the recording host (loops.python.recording) puts every call, check and
gate of the run on the console's run kernel."""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import sys
import tempfile

from .agents import Agent, call_provider
from .context import Scope
from .results import GateDecision, GateRequest, WorkflowError


def django_configured() -> bool:
    """Whether this process was given the console's settings (asked when a workflow
    starts, to choose its host). A DJANGO_SETTINGS_MODULE that only importing the console's
    own modules set (console/celery.py) does not count: a plain script stays one."""
    from django.conf import settings

    if settings.configured:
        return True
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        return False
    celery = sys.modules.get("console.celery")
    return not getattr(celery, "SETTINGS_DEFAULTED", False)


def django_ready() -> bool:
    """Whether the console's apps are loaded, so its registry of providers can be read. A
    plain script's run has no console: importing the console's modules on the way (the
    sandbox reads its secrets) sets DJANGO_SETTINGS_MODULE (console/celery.py) but loads
    no apps, so this, not `django_configured`, decides how a provider name resolves."""
    from django.apps import apps

    return apps.ready


def resolve_provider(provider, run=None):
    """A provider object as is; a name (or None, the default) through the console's
    registry, so admin-configured providers work (those `run`'s project may use; no run:
    the shared ones); without Django only `demo` exists."""
    if provider is not None and not isinstance(provider, str):
        return provider
    if django_ready():
        from runs.providers import registry

        return registry.resolve(provider, None, run)
    if provider in (None, "demo"):
        from runs.providers.demo import DemoProvider

        return DemoProvider(delay=0)
    raise WorkflowError(
        f"provider {provider!r} needs the console's settings (DJANGO_SETTINGS_MODULE)"
    )


class DirectHost:
    """Run agents in this process, record nothing. `decide(request) -> GateDecision`
    answers gates (without it, a workflow that reaches a gate stops with an error)."""

    def __init__(self, *, decide=None, workdir: str | None = None, on_output=None):
        self.decide = decide
        self.workdir = workdir
        self.on_output = on_output
        self._made_workdir = False

    async def open(self, root, text: str) -> None:
        if self.workdir is None:
            self.workdir = tempfile.mkdtemp(prefix="loop-python-")
            self._made_workdir = True

    async def close(self, result=None, error: BaseException | None = None) -> None:
        if self._made_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir, self._made_workdir = None, False

    async def call(self, agent: Agent, scope: Scope, prompt: str, feedback: str = ""):
        def work():
            on_chunk = self.on_output or (lambda chunk: None)
            return call_provider(
                agent,
                resolve_provider(agent.provider),
                prompt,
                iteration=scope.iteration,
                workdir=self.workdir,
                output=on_chunk,
                node_id=".".join(scope.path),
            )

        return await asyncio.to_thread(work)

    async def forked_feedback(self, path: tuple[str, ...], iteration: int) -> str | None:
        return None  # only a run forked in the console goes on from a fork point

    def forked_prompt(self, node_id: str, iteration: int) -> str | None:
        return None

    async def note(self, path: tuple[str, ...], kind: str, **data) -> None:
        return None

    async def record_score(self, agent_path, iteration, score, detail, state) -> None:
        return None  # a loop's scores still decide its stop rules; only nothing keeps them

    async def ask(self, request: GateRequest) -> GateDecision:
        if self.decide is None:
            raise WorkflowError(
                f"the loop asks a person after iteration {request.iteration}: run it with the "
                "console's settings so the gate opens in the inbox"
            )
        decision = self.decide(request)
        return await decision if inspect.isawaitable(decision) else decision


def default_host():
    """In a process configured with the console's settings, record the run there."""
    if not django_configured():
        return DirectHost()
    from django.apps import apps

    if not apps.ready:
        import django

        django.setup()
    from .recording import RecordingHost

    return RecordingHost()
