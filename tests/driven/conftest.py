"""Driven recipes for the tests, the fake AI server and fake CLIs of the provider tests,
and readers for what a user sees: the crumbs on the live stream, the loops API."""

from __future__ import annotations

import json
import textwrap
import threading

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.actor import ENGINE, Actor
from tests.providers.conftest import (  # noqa: F401 - fixtures shared with the provider tests
    fake_ai,
    fake_ai_server,
    test_key_env_allowed,
)

RESEARCH_SCHEMA = "{type: object, properties: {facts: {type: string}}, required: [facts]}"


def driven_recipe(
    host: str,
    *,
    pool: str = "[researcher, drafter]",
    max_iterations: int = 3,
    loop_extra: str = "",
    providers: str = "",
    agents: str = "",
) -> str:
    """A driven recipe: demo researcher and drafter, and a host on provider `host`."""
    extra = textwrap.indent(textwrap.dedent(agents).strip("\n"), "  ") + "\n" if agents else ""
    block = "".join(
        f"      {line}\n" for line in textwrap.dedent(loop_extra).strip("\n").splitlines()
    )
    return (
        "kind: driven\nname: driven test\nprovider: demo\n"
        + (
            f"providers:\n{textwrap.indent(textwrap.dedent(providers).strip(chr(10)), '  ')}\n"
            if providers
            else ""
        )
        + "agents:\n"
        + f"  researcher: {{instructions: Collect the facts., output_schema: {RESEARCH_SCHEMA}}}\n"
        + "  drafter: {instructions: Write the note from the facts.}\n"
        + extra
        + "  host:\n"
        + f"    provider: {host}\n"
        + "    instructions: Drive the loop until the note is good.\n"
        + "    loop:\n"
        + f"      pool: {pool}\n"
        + f"      max_iterations: {max_iterations}\n"
        + block
        + "host: host\n"
    )


@pytest.fixture
def start_driven(make_recipe):
    from runs.services import start_run

    counter = iter(range(10_000))

    def go(source: str, message: str = "Widget 2.0 ships on Monday"):
        recipe = make_recipe(source, slug=f"driven-{next(counter)}")
        return start_run(recipe, actor=ENGINE, message=message)

    return go


def crumbs_on_stream(user, run) -> list[tuple[str, dict]]:
    """Every crumb of the run as the live stream sends it to a client that connects from
    the start (`?after=0`): (event name, data), in order. Read from a thread of its own:
    the stream is an async view, and a session's browser tests keep an event loop running
    in this one."""
    answer: dict = {}

    def read():
        from django.db import connection

        try:
            client = Client()
            client.force_login(user)
            response = client.get(reverse("run_live", args=[run.pk]) + "?after=0")
            answer["status"] = response.status_code
            answer["text"] = b"".join(response.streaming_content).decode()
        finally:
            connection.close()

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(timeout=120)
    assert answer.get("status") == 200, answer
    found = []
    for block in answer["text"].split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if fields.get("event", "").startswith("loop:"):
            found.append((fields["event"], json.loads(fields["data"])))
    return found


def api_get(user, path: str) -> dict:
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200, response.content
    return response.json()


def tool_messages(request: dict) -> list:
    """The tool results an OpenAI-style request carries back to the model."""
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


# --- loops written row by row, as their transitions write them (no worker) ----------------


@pytest.fixture
def driven_run(make_recipe, operator):
    """A started driven run whose host's turn is running: (run, host row, host turn)."""
    from runs import services
    from runs.models import Iteration, NodeRun

    recipe = make_recipe(driven_recipe("demo"), slug="driven-pages")
    run = services.start_run(
        recipe, actor=Actor.operator(operator, "console"), message="Widget 2.0"
    )
    host = NodeRun.objects.create(run=run, node_id="host", kind="driven", status="running")
    turn = Iteration.objects.create(
        run=run,
        node_run=host,
        node_id="host",
        number=1,
        status="running",
        started_at=timezone.now(),
    )
    return run, host, turn


def drive(
    run, turn, *, pipeline=("researcher", "drafter"), iterations=2, status="completed", agent="host"
):
    """A loop as its transitions write it, with a drafter step per iteration."""
    from loops.driven.models import Loop, LoopIteration
    from runs.models import Iteration, NodeRun

    drafter = NodeRun.objects.get_or_create(
        run=run, node_id="drafter", defaults={"kind": "pipeline_step"}
    )[0]
    with transaction.atomic():
        loop = Loop.open(
            run,
            host_iteration=turn,
            agent=agent,
            pipeline=list(pipeline),
            input="Widget 2.0",
            max_iterations=5,
        )
        value = "Widget 2.0"
        for number in range(1, iterations + 1):
            it = loop.begin_iteration(run, input=value, feedback="Shorter." if number > 1 else "")
            step = Iteration.objects.create(
                run=run,
                node_run=drafter,
                node_id="drafter",
                number=drafter.iterations.count() + 1,
                status="completed",
                output=f"<b>draft {number}</b> of loop {loop.pk}",
                duration_ms=40,
            )
            it.add_step("drafter", step.pk)
            value = f"draft {number}"
            loop.end_iteration(
                run, it, output=value, shown=value, status=LoopIteration.Status.COMPLETED
            )
        if status != "open":
            loop.close(run, status, result=value if status != "failed" else None)
    return loop
