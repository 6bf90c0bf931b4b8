"""No run of any kind stays `running` with nothing able to move it.

For each loop kind (workflow, step machine, driven, Python) the first unit of work is made
impossible — the worker has no provider for it, its provider crashes, or (a workflow's
loop) its command file is gone — and the run must reach a state the inbox shows, with the
reason on the inbox. No sweep pass runs here: the worker alone gets the run there, so it
happens well within the sweep interval.

"No provider" is a web process whose settings name a default provider (so the recipe
validates there) while the worker's do not: the worker finds out only when it calls.
"""

from __future__ import annotations

import html
import textwrap

import pytest
from django.test import Client

from recipes.editing import create_recipe
from runs import services
from runs.actor import Actor
from runs.errors import ServiceError
from runs.models import ProviderConfig, Run
from tests.console.conftest import login
from tests.stepmachine.conftest import shown

SHOWN = ("failed", "blocked", "needs_human")
CRASH = "crashy"


def workflow(provider: str) -> str:
    line = f"    provider: {provider}\n" if provider else ""
    return f"name: wf\nnodes:\n  - id: draft\n    prompt: Write a haiku.\n{line}"


def step_machine(provider: str) -> str:
    line = f", provider: {provider}" if provider else ""
    return textwrap.dedent(f"""\
        schema: planeai.loop.recipe.v1
        id: sm
        name: sm
        roles:
          maker: {{mode: review, isolation: readonly{line}}}
        steps:
          - {{id: make, kind: session.create, role: maker, prompt: Make it.}}
          - {{id: wait, kind: handoff.wait, from: maker, on: {{completed: done}}}}
          - {{id: done, kind: loop.status, status: approved}}
        """)


def driven(provider: str) -> str:
    line = f"    provider: {provider}\n" if provider else ""
    return (
        "kind: driven\nname: dr\nagents:\n  host:\n    instructions: Drive the loop.\n"
        f"{line}    loop: {{pool: [host], max_iterations: 2}}\nhost: host\n"
    )


def python(provider: str) -> str:
    named = repr(provider) if provider else "None"
    return (
        "from loops.python import Agent, LoopWorkflow\n\n"
        f'writer = Agent(name="writer", instructions="Write.", provider={named})\n'
        "workflow = LoopWorkflow(agents=[writer], stop_condition=lambda r, i: True, "
        "max_iterations=2)\n"
    )


KINDS = {"workflow": workflow, "stepmachine": step_machine, "driven": driven, "python": python}


def start(kind: str, provider: str, operator, tmp_path) -> Run:
    source = KINDS[kind](provider)
    path = tmp_path / ("loop_recipe.py" if kind == "python" else f"{kind}.yaml")
    path.write_text(source)
    slug = "sm" if kind == "stepmachine" else kind
    recipe, _ = create_recipe(source, slug=slug, source_path=str(path))
    return services.start_run(recipe, actor=Actor.operator(operator, "console"), message="go")


def shown_on_the_inbox(run: Run, operator, *cause: str) -> None:
    shown(run, *SHOWN, "completed", "approved", "cancelled")
    assert run.status_word in SHOWN, (run.status_word, run.error)
    for words in cause:
        assert words in run.error, (words, run.error)
    client = Client()
    login(client, operator)
    page = client.get("/").content.decode()
    assert f"Run {run.pk}</a>" in page
    assert html.escape(run.error[:60]) in page, run.error


@pytest.fixture
def web_has_a_default(settings):
    """The console validates with a default provider; the worker has none."""
    settings.LOOP_DEFAULT_PROVIDER = "demo"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_provider_for_the_worker(kind, live_worker, web_has_a_default, operator, tmp_path):
    run = start(kind, "", operator, tmp_path)
    shown_on_the_inbox(run, operator, "no default provider is set")
    if kind == "stepmachine":
        assert run.status_word == "blocked", run.error
        assert run.error.startswith("the maker role cannot hand off: its session failed")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_provider_that_crashes(kind, live_worker, operator, tmp_path):
    ProviderConfig.objects.create(name=CRASH, kind="command", command="echo broken; exit 3")
    run = start(kind, CRASH, operator, tmp_path)
    shown_on_the_inbox(run, operator, "exited with status 3")


LOOP_WITH_A_COMMAND = """\
name: wf-cmd
provider: demo
nodes:
  - id: refine
    loop:
      command: refine-cmd
      until: DONE
      max_iterations: 2
"""


def test_a_workflow_whose_command_file_was_deleted(live_worker, operator, tmp_path):
    (tmp_path / "commands").mkdir()
    command = tmp_path / "commands" / "refine-cmd.md"
    command.write_text("Refine the text. Say DONE when done.\n")
    path = tmp_path / "wf-cmd.yaml"
    path.write_text(LOOP_WITH_A_COMMAND)
    recipe, _ = create_recipe(LOOP_WITH_A_COMMAND, slug="wf-cmd", source_path=str(path))
    command.unlink()
    try:
        run = services.start_run(recipe, actor=Actor.operator(operator, "console"), message="go")
    except ServiceError as exc:  # refused at the start, saying why: nothing hangs either
        assert "refine-cmd" in str(exc)
        return
    shown_on_the_inbox(run, operator, "refine-cmd")
