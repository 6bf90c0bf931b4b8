"""The shell corpus for step-machine gate commands: every value a `gates.run` command can
print x every safe shell context x every payload of the corpus, rendered by the real
`gate_commands.prepare` (rendering.render_command) and run by the real `gate_commands.execute` through
real bash. Nothing executes (the canary file stays absent) and the value arrives as the
template context held it. Unsafe contexts are refused when the recipe is validated and
again when the command is rendered.

(tests/stepmachine/test_corpus_worker.py sends the same sources through a real worker.)
"""

from __future__ import annotations

import shlex
import sys
import textwrap
from types import SimpleNamespace

import pytest
import yaml

from loops.stepmachine import gate_commands
from loops.stepmachine.context import template_context
from loops.stepmachine.machine import MachineState, machine_row
from loops.stepmachine.rendering import RenderError, render_command
from recipes.inputs import clean_inputs
from recipes.loader import load_recipe
from tests.security.test_shell_corpus import CANARY, PAYLOADS, SAFE_CONTEXTS, UNSAFE_CONTEXTS


@pytest.fixture
def claimed(waiting_run):
    """The run's `steps` node as a worker holds it while its gates run (execute streams
    into it and stops if it is not running)."""
    from runs.models import NodeRun

    NodeRun.objects.filter(pk=machine_row(waiting_run).pk).update(
        status=NodeRun.Status.RUNNING, attempts=1
    )
    return machine_row(waiting_run)


def one_line(value: str) -> str:
    return value.replace("\n", " ")


# name -> (what the command prints, input type or None, how the value is held)
SOURCES = {
    "text input": ("{{ inputs.v }}", "text", one_line),
    "textarea input": ("{{ inputs.v }}", "textarea", str),
    "branch input": ("{{ inputs.v }}", "branch", one_line),
    "task input": ("{{ inputs.v }}", "task", one_line),
    "select input": ("{{ inputs.v }}", "select", one_line),
    "the message as goal": ("{{ inputs.goal }}", None, str),
    "runtime.last_error": ("{{ runtime.last_error }}", None, str),
}


def recipe_source(command: str, input_type: str | None = None, options=()) -> str:
    document = {
        "schema": "planeai.loop.recipe.v1",
        "id": "corpus",
        "name": "corpus",
        "roles": {"r": {"provider": "demo", "mode": "write", "isolation": "project"}},
        "steps": [
            {
                "id": "check",
                "kind": "gates.run",
                "role": "r",
                "gates": [{"name": "g", "command": command}],
                "on": {"pass": "done", "fail": "done", "error": "done"},
            },
            {"id": "done", "kind": "loop.status", "status": "approved"},
        ],
    }
    if input_type:
        declared = {"type": input_type}
        if options:
            declared["options"] = list(options)
        document["inputs"] = {"v": declared}
    return yaml.safe_dump(document, allow_unicode=True)


def context_for(source: str, payload: str, spec, run_pk: int) -> dict:
    """The template context as the runner builds it (context.template_context), with the
    payload where this source puts it: a typed input, the message, the last error."""
    _, input_type, _ = SOURCES[source]
    inputs, message, state = {}, "", MachineState()
    if input_type:
        inputs = clean_inputs(spec.inputs, {"v": SOURCES[source][2](payload)})
    elif source == "the message as goal":
        message = payload
    else:
        state.last_error = payload
    run = SimpleNamespace(pk=run_pk, inputs=inputs, message=message)
    return template_context(run, spec, state)


def load(command: str, source: str):
    _, input_type, hold = SOURCES[source]
    options = [hold(p) for p in PAYLOADS if "\0" not in p] if input_type == "select" else ()
    result = load_recipe(recipe_source(command, input_type, options))
    assert result.ok, result.errors
    return result.spec


def payloads_for(source: str) -> list[str]:
    # A select's options are recipe text, and YAML cannot hold NUL.
    return [p for p in PAYLOADS if not (SOURCES[source][1] == "select" and "\0" in p)]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("context", SAFE_CONTEXTS)
def test_gate_commands_deliver_exact_bytes_and_run_nothing(
    waiting_run, claimed, tmp_path, source, context
):
    expression, _, hold = SOURCES[source]
    template, expected = SAFE_CONTEXTS[context]
    spec = load(template.replace("REF", expression), source)
    step = spec.step("check")
    for number, payload in enumerate(payloads_for(source)):
        work = tmp_path / str(number)
        work.mkdir()
        commands = gate_commands.prepare(step, context_for(source, payload, spec, waiting_run.pk))
        (_, command), *_ = commands
        assert command.argv is None and payload.replace("\0", "") not in command.script
        result = gate_commands.execute(
            waiting_run, claimed, 1, step, commands, workdir=str(work), tick=number
        )
        assert result.result == "pass", (payload, result.output)
        want = expected(hold(payload).replace("\0", "")).encode()
        assert (work / "out").read_bytes() == want, payload
        assert not (work / CANARY).exists(), payload
        assert sorted(p.name for p in work.iterdir()) == ["out"]


WRITER = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
    "import sys; open('out', 'w', encoding='utf-8', newline='').write(sys.argv[1])"
)


@pytest.mark.parametrize("source", ["text input", "textarea input", "the message as goal"])
def test_a_one_value_command_runs_as_argv_without_a_shell(waiting_run, claimed, tmp_path, source):
    """`{{ inputs.cmd }}`: the value is a program and its arguments. A hostile value as the
    whole command starts no shell; as an argument it arrives as one intact word."""
    expression = SOURCES[source][0]
    spec = load(expression, source)
    step = spec.step("check")
    for number, payload in enumerate(PAYLOADS):
        clean = payload.replace("\0", "")
        for kind, value in (("whole", payload), ("argument", f"{WRITER} {shlex.quote(clean)}")):
            work = tmp_path / f"{number}-{kind}"
            work.mkdir()
            try:
                commands = gate_commands.prepare(
                    step, context_for(source, value, spec, waiting_run.pk)
                )
            except RenderError as exc:
                assert kind == "whole" and "cannot be read" in str(exc)  # unbalanced quotes
                continue
            (_, command), *_ = commands
            assert command.argv is not None
            result = gate_commands.execute(
                waiting_run, claimed, 1, step, commands, workdir=str(work), tick=number
            )
            assert not (work / CANARY).exists(), payload
            if kind == "argument":
                assert result.result == "pass", result.output
                assert (work / "out").read_bytes() == SOURCES[source][2](clean).encode()
            elif kind == "whole":
                assert result.result != "pass", payload  # not a program: nothing ran


def test_ids_print_as_values_in_every_safe_context(waiting_run, claimed, tmp_path):
    """`{{ loop_run.id }}` and `{{ recipe.id }}` are values like any other: placed, not spliced."""
    for context, (template, expected) in SAFE_CONTEXTS.items():
        for expression, value in (
            ("{{ loop_run.id }}", str(waiting_run.pk)),
            ("{{ recipe.id }}", "corpus"),
        ):
            spec = load_recipe(recipe_source(template.replace("REF", expression))).spec
            step = spec.step("check")
            work = tmp_path / f"{context}-{expression[3:-3]}"
            work.mkdir()
            commands = gate_commands.prepare(
                step, context_for("runtime.last_error", "", spec, waiting_run.pk)
            )
            result = gate_commands.execute(
                waiting_run, claimed, 1, step, commands, workdir=str(work), tick=0
            )
            assert result.result == "pass", (context, result.output)
            assert (work / "out").read_bytes() == expected(value).encode(), context


# The command as a block scalar, so each line of it is a line of the file.
BLOCK_RECIPE = """schema: planeai.loop.recipe.v1
id: corpus
name: corpus
inputs:
  v: {{type: textarea}}
roles:
  r: {{provider: demo, mode: write, isolation: project}}
steps:
  - id: check
    kind: gates.run
    role: r
    gates:
      - name: g
        command: |
{command}
    on: {{pass: done, fail: done, error: done}}
  - {{id: done, kind: loop.status, status: approved}}
"""

UNSAFE_EXPRESSIONS = ["{{ inputs.v }}", "{{ runtime.last_error }}", "{{ inputs.goal }}"]


@pytest.mark.parametrize("context", UNSAFE_CONTEXTS)
@pytest.mark.parametrize("expression", UNSAFE_EXPRESSIONS)
def test_unsafe_places_are_refused_at_validation_with_their_line(context, expression):
    command = "echo first line\n" + UNSAFE_CONTEXTS[context].replace("REF", expression)
    source = BLOCK_RECIPE.format(command=textwrap.indent(command, " " * 10))
    result = load_recipe(source)
    problems = [p for p in result.errors if "where no substitution is safe" in p.message]
    assert problems, result.errors
    line = command[: command.index(expression)].count("\n") + 1
    assert f"line {line} of the command" in problems[0].message
    assert expression in source.splitlines()[problems[0].line - 1]


@pytest.mark.parametrize("context", UNSAFE_CONTEXTS)
@pytest.mark.parametrize("expression", UNSAFE_EXPRESSIONS)
def test_unsafe_places_are_refused_when_rendered(waiting_run, context, expression):
    """An old version, or a template whose text differs once rendered, is still refused
    when the command is rendered: nothing of it runs."""
    command = "echo first line\n" + UNSAFE_CONTEXTS[context].replace("REF", expression)
    spec = load_recipe(recipe_source("true", "textarea")).spec
    for payload in PAYLOADS:
        run = SimpleNamespace(
            pk=waiting_run.pk, inputs=clean_inputs(spec.inputs, {"v": payload}), message=payload
        )
        ctx = template_context(run, spec, MachineState(last_error=payload))
        line = command[: command.index(expression)].count("\n") + 1
        with pytest.raises(RenderError, match=rf"^line {line}: .* where no substitution is safe"):
            render_command(command, ctx)


def test_a_comment_that_hides_quotes_from_validation_is_refused_when_rendered():
    """Jinja drops `{# #}` comments; bash read the probe differently. The rendered command is
    what counts: the value would be inside single quotes, so it is refused."""
    command = "echo '{# ' #}{{ inputs.v }}{# ' #}'"
    result = load_recipe(recipe_source(command, "textarea"))
    assert result.ok, result.errors
    spec = result.spec
    ctx = context_for("textarea input", PAYLOADS[0], spec, 1)
    with pytest.raises(RenderError, match="single quotes"):
        render_command(command, ctx)
