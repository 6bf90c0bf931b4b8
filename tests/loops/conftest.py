"""Driven recipes for the tests, the fake AI server and fake CLIs of the provider tests,
and readers for what a user sees: the crumbs on the live stream, the loops API."""

from __future__ import annotations

import json
import textwrap

import pytest
from django.test import Client
from django.urls import reverse

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
        return start_run(recipe, message=message)

    return go


def crumbs_on_stream(user, run) -> list[tuple[str, dict]]:
    """Every crumb of the run as the live stream sends it to a client that connects from
    the start (`?after=0`): (event name, data), in order."""
    client = Client()
    client.force_login(user)
    response = client.get(reverse("run_live", args=[run.pk]) + "?after=0")
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    found = []
    for block in text.split("\n\n"):
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
