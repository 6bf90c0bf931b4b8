"""Step-machine tests: recipes from YAML, a scripted role agent, git repositories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from runs.actor import Actor

AGENT = Path(__file__).with_name("role_agent.py")


@pytest.fixture
def scripted(db):
    """The scripted role agent as an admin-configured provider named `scripted`."""
    from runs.models import ProviderConfig

    return ProviderConfig.objects.create(
        name="scripted", kind="command", command=f"{sys.executable} {AGENT}"
    )


@pytest.fixture
def house_default(bundled):
    """A default provider (the demo agent): the verbatim no-mistakes, whose roles use the
    default provider, becomes runnable (its stored verdict is refreshed at once)."""
    from runs.models import ProviderConfig

    ProviderConfig.objects.create(name="house", kind="demo", is_default=True)
    for recipe in bundled.values():
        recipe.refresh_from_db()
    return bundled


@pytest.fixture
def plane_recipe(make_recipe):
    """A step-machine recipe from YAML (its slug is its id)."""

    def make(source: str):
        import yaml

        return make_recipe(source, slug=yaml.safe_load(source)["id"])

    return make


def calls(run) -> list[dict]:
    path = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "artifacts" / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def git(*args, cwd) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README.md").write_text("hello\n")
    git("add", ".", cwd=path)
    git("commit", "-q", "-m", "first", cwd=path)
    git("branch", "feature", cwd=path)
    return path


def events(run, kind: str) -> list:
    return list(run.events.filter(kind=kind).order_by("seq"))


def machine(run):
    from loops.stepmachine.machine import MachineState, machine_row

    return MachineState.of(machine_row(run))


def settled(run, *states, timeout: float = 120):
    """Wait for the run to show one of `states` (its status, or its phase: `approved`) with
    no agent turn still in flight."""
    from runs.models import Iteration
    from tests.conftest import wait_for

    def done():
        run.refresh_from_db()
        if run.is_terminal and run.status_word not in states:
            raise AssertionError(f"run {run.pk} ended {run.status_word}: {run.error}")
        busy = Iteration.objects.filter(run=run, status__in=["pending", "running"]).exists()
        return run.status_word in states and not busy

    try:
        wait_for(done, timeout, message=f"run {run.pk} to settle in {states}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_where_it_stands(run)}") from None
    return run


def shown(run, *words, timeout: float = 60):
    """Wait until the run shows one of `words` (`Run.status_word`: its phase, else its
    status), as `tests.conftest.wait_run` waits for a status."""
    from tests.conftest import wait_for

    def reached():
        run.refresh_from_db()
        return run.status_word in words

    wait_for(reached, timeout, message=f"run {run.pk} to show {words} (now {run.status_word})")
    return run


def _where_it_stands(run) -> str:
    """What a run that did not settle was doing: its status, the machine's position and
    its turns, and its last events (a failure under load says why without a rerun)."""
    from runs.models import Iteration, NodeRun

    run.refresh_from_db()
    lines = [f"status {run.status} {run.phase} {run.error!r}"]
    for row in NodeRun.objects.filter(run=run).order_by("id"):
        state = {k: row.state.get(k) for k in ("current", "waiting", "finishing") if k in row.state}
        lines.append(f"node {row.node_id} #{row.generation + 1} {row.kind} {row.status} {state}")
    for it in Iteration.objects.filter(run=run).order_by("id"):
        lines.append(f"turn {it.node_id} {it.number} {it.status} attempts={it.attempts}")
    for event in run.events.order_by("-seq")[:15][::-1]:
        lines.append(f"event {event.seq} {event.kind} {event.step} {event.data}")
    return "\n".join(lines)


def wait_event(run, kind: str, count: int = 1):
    from tests.conftest import wait_for

    return wait_for(
        lambda: len(events(run, kind)) >= count and events(run, kind),
        message=f"{count} {kind} event(s) on run {run.pk}",
    )


@pytest.fixture
def sent(monkeypatch):
    """Messages the code sends, kept in a list instead of reaching a broker."""
    from runs import dispatch

    messages: list[tuple[str, tuple]] = []
    monkeypatch.setattr(dispatch, "deliver", lambda name, *args: messages.append((name, args)))
    return messages


@pytest.fixture
def offline_broker(monkeypatch):
    """Messages in a list; `down = True` makes every send raise as kombu does."""

    class Broker:
        down = False
        sent: list = []

        def deliver(self, name, *args):
            if self.down:
                from kombu.exceptions import OperationalError as BrokerDown

                raise BrokerDown("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
            self.sent.append((name, args))

        def run_all(self, skip=()):
            """Deliver what was sent, as a worker would, until nothing is left (the tasks
            named in `skip` are kept aside in `self.skipped`)."""
            from loops.stepmachine import runner
            from runs.executor import handover, scheduler

            while self.sent:
                name, args = self.sent.pop(0)
                if name in skip:
                    self.skipped.append((name, args))
                    continue
                task = {
                    "advance_run": scheduler.advance_run,
                    "start_node": handover.start_node,
                    "stepmachine.tick_machine": runner.tick,
                }[name]
                task(*args)

    from runs import dispatch

    fake = Broker()
    fake.sent, fake.skipped = [], []
    monkeypatch.setattr(dispatch, "deliver", fake.deliver)
    return fake


WAITING = """
schema: planeai.loop.recipe.v1
id: waiting
name: Waiting for a maker
roles:
  maker: {provider: demo, mode: write, isolation: project}
  checker: {provider: demo, mode: review, isolation: readonly}
steps:
  - {id: wait, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""


@pytest.fixture
def waiting_run(plane_recipe, operator):
    """A step-machine run created, not started (its machine takes handoffs)."""
    from runs import services

    return services.start_run(
        plane_recipe(WAITING), actor=Actor.operator(operator, "console"), start=False
    )
