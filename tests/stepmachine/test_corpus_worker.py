"""The step-machine shell corpus through a real worker: every value a gate command prints —
each input type, the message as `goal`, `loop_run.id`/`recipe.id`, a handoff summary
recorded through the handoff service, a previous gate's output — placed in every safe
context of the corpus, run by the worker's bash. Nothing executes (no canary file in the
working directory) and each value arrives as the console stored it. A handoff summary that
reaches an agent's prompt is text; a command that renders unsafe is refused at run time;
the message or a child run cannot become a one-value command without the shell permission.

(tests/stepmachine/test_corpus_templates.py crosses every source, context and payload — NUL
included — without a worker; PostgreSQL cannot store NUL in inputs, so it is left out here.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from loops.stepmachine.context import run_folders
from loops.stepmachine.handoffs import record_handoff
from runs import services
from runs.actor import Actor
from runs.errors import InputError
from runs.models import Iteration, Run
from tests.conftest import wait_for
from tests.security.test_shell_corpus import CANARY, PAYLOADS, SAFE_CONTEXTS
from tests.stepmachine.conftest import calls, events, git, machine, settled

STORABLE = [p for p in PAYLOADS if "\0" not in p]
HOSTILE_BRANCHES = ["x$(touch${IFS}CANARY)", "y;touch${IFS}CANARY|z&&w"]


def one_line(value: str) -> str:
    return value.replace("\n", " ")


def writes(expression: str, prefix: str) -> str:
    """One gate command writing `expression` in every safe context, each to its own file."""
    lines = [
        template.replace("REF", expression).replace("> out", f"> {prefix}-{index}")
        for index, (template, _) in enumerate(SAFE_CONTEXTS.values())
    ]
    return "\n".join(lines) + "\n"


def arrived(folder: Path, prefix: str, value: str) -> None:
    for index, (name, (_, expected)) in enumerate(SAFE_CONTEXTS.items()):
        got = (folder / f"{prefix}-{index}").read_bytes()
        assert got == expected(value).encode(), (prefix, name, value)


def document(**parts) -> str:
    base = {"schema": "planeai.loop.recipe.v1", "name": parts["id"]}
    return yaml.safe_dump({**base, **parts}, allow_unicode=True, sort_keys=False)


def inputs_recipe() -> tuple[str, dict]:
    declared = {
        "pick": {"type": "select", "options": [one_line(p) for p in STORABLE]},
        "branch_a": {"type": "branch"},
        "branch_b": {"type": "branch"},
    }
    given = {"branch_a": HOSTILE_BRANCHES[0], "branch_b": HOSTILE_BRANCHES[1]}
    expected = {"branch_a": HOSTILE_BRANCHES[0], "branch_b": HOSTILE_BRANCHES[1]}
    for i, payload in enumerate(STORABLE):
        for kind, hold in (("text", one_line), ("textarea", str), ("task", one_line)):
            declared[f"{kind}_{i}"] = {"type": kind}
            given[f"{kind}_{i}"] = expected[f"{kind}_{i}"] = hold(payload)
    given["pick"] = expected["pick"] = one_line(STORABLE[-1])
    gates = [
        {"name": name, "command": writes(f"{{{{ inputs.{name} }}}}", name)} for name in expected
    ]
    gates += [
        {"name": "goal", "command": writes("{{ inputs.goal }}", "goal")},
        {
            "name": "ids",
            "command": writes("{{ loop_run.id }}", "run") + writes("{{ recipe.id }}", "recipe"),
        },
        {"name": "argv", "command": "{{ inputs.argv }}"},
    ]
    declared["argv"] = {"type": "text", "default": f"touch argv-ran {STORABLE[0]}"}
    source = document(
        id="corpus-inputs",
        inputs=declared,
        roles={"r": {"provider": "demo", "mode": "write", "isolation": "project"}},
        steps=[
            {
                "id": "check",
                "kind": "gates.run",
                "role": "r",
                "gates": gates,
                "on": {"pass": "done", "fail": "stop", "error": "stop"},
            },
            {"id": "done", "kind": "loop.status", "status": "approved"},
            {"id": "stop", "kind": "loop.status", "status": "needs_human"},
        ],
    )
    return source, (given, expected)


def test_every_input_type_the_message_and_the_ids_through_a_worker(
    live_worker, plane_recipe, operator, repo
):
    for name in HOSTILE_BRANCHES:
        git("branch", name, cwd=repo)
    source, (given, expected) = inputs_recipe()
    message = STORABLE[0] + "\n" + STORABLE[1]
    run = services.start_run(
        plane_recipe(source),
        actor=Actor.operator(operator, "console"),
        message=message,
        inputs=given,
        workdir=str(repo),
    )
    settled(run, "approved")
    assert not (repo / CANARY).exists()
    for name, value in expected.items():
        arrived(repo, name, value)
    arrived(repo, "goal", message)
    arrived(repo, "run", str(run.pk))
    arrived(repo, "recipe", "corpus-inputs")
    # The one-value command ran as a program with its arguments: `touch` made the files
    # named by the words of `$(touch CANARY)`, and no shell ran the substitution.
    assert (repo / "argv-ran").exists() and (repo / "$(touch").exists()


def rounds_steps() -> list[dict]:
    return [
        {"id": "wait", "kind": "handoff.wait", "from": "maker", "on": {"completed": "use_summary"}},
        {
            "id": "use_summary",
            "kind": "gates.run",
            "role": "maker",
            "on": {"pass": "stop", "fail": "use_output", "error": "stop"},
        },
        {
            "id": "use_output",
            "kind": "gates.run",
            "role": "maker",
            "on": {"pass": "next", "fail": "stop", "error": "stop"},
        },
        {"id": "next", "kind": "round.next", "next": "wait"},
        {"id": "stop", "kind": "loop.status", "status": "needs_human"},
    ]


def rounds_recipe() -> str:
    steps = rounds_steps()
    # The summary in every context, then printed bare and failed: that output is the next
    # gate's runtime.last_error.
    steps[1]["gates"] = [
        {"name": "summary", "command": writes("{{ runtime.last_error }}", "h-{{ runtime.round }}")},
        {"name": "echo", "command": "printf '%s' {{ runtime.last_error }}; exit 1"},
    ]
    steps[2]["gates"] = [
        {"name": "output", "command": writes("{{ runtime.last_error }}", "g-{{ runtime.round }}")}
    ]
    return document(
        id="corpus-rounds",
        roles={"maker": {"provider": "demo", "mode": "write", "isolation": "project"}},
        policy={"max_rounds": len(PAYLOADS), "max_ticks": 10 * len(PAYLOADS)},
        steps=steps,
    )


def test_handoff_summaries_and_gate_output_through_a_worker(live_worker, plane_recipe, operator):
    run = services.start_run(
        plane_recipe(rounds_recipe()), actor=Actor.operator(operator, "console")
    )
    person = Actor.operator(operator, "console")
    for number, payload in enumerate(PAYLOADS, start=1):
        wait_for(
            lambda n=number: (
                len(events(run, "gates_finished")) == 2 * (n - 1)
                and machine(run).waiting.startswith("waiting for a handoff")
            ),
            120,
            message=f"round {number} to wait for its handoff",
        )
        # NUL included: the handoff service drops it, as it is stored.
        record_handoff(run.pk, role="maker", status="completed", summary=payload, actor=person)
    settled(run, "blocked")
    assert "max_rounds" in run.error
    workdir, _ = run_folders(run)
    assert not (workdir / CANARY).exists()
    outputs = [e for e in events(run, "gates_finished") if e.step == "use_summary"]
    assert [e.data["result"] for e in outputs] == ["fail"] * len(PAYLOADS)
    for number, payload in enumerate(PAYLOADS, start=1):
        arrived(workdir, f"h-{number}", payload.replace("\0", ""))
        # runtime.last_error after a failed gate: its log as gate_commands.execute read it back
        log = Path(outputs[number - 1].data["log"]).read_text(encoding="utf-8", errors="replace")
        assert payload.replace("\0", "").replace("\r", "\n") in log
        arrived(workdir, f"g-{number}", log)


PROMPTED = """
schema: planeai.loop.recipe.v1
id: corpus-prompt
name: corpus-prompt
roles:
  maker: {provider: demo, mode: write, isolation: project}
  checker: {provider: scripted, mode: review, isolation: project}
steps:
  - {id: wait, kind: handoff.wait, from: maker, on: {completed: tell}}
  - id: tell
    kind: session.create
    role: checker
    prompt: |
      The maker said:
      {{ runtime.last_error }}
      @handoff 1: completed: read it
  - {id: read, kind: handoff.wait, from: checker, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""


def test_a_hostile_summary_reaches_the_next_prompt_verbatim(
    live_worker, scripted, plane_recipe, operator
):
    summary = "\n".join(STORABLE) + "\n{{ 7 * 7 }} {% if true %}jinja{% endif %}"
    run = services.start_run(plane_recipe(PROMPTED), actor=Actor.operator(operator, "console"))
    wait_for(lambda: machine(run).waiting.startswith("waiting for a handoff"), 120)
    record_handoff(
        run.pk,
        role="maker",
        status="completed",
        summary=summary,
        actor=Actor.operator(operator, "console"),
    )
    settled(run, "approved")
    turn = Iteration.objects.get(run=run)
    assert f"The maker said:\n{summary}\n@handoff 1: completed" in turn.prompt
    (call,) = calls(run)
    # the agent reads its stdin as text (universal newlines): every line arrives as sent
    received = call["prompt"].splitlines()
    assert all(line in received for line in summary.splitlines())
    workdir, _ = run_folders(run)
    assert not (workdir / CANARY).exists() and not (Path(call["cwd"]) / CANARY).exists()


def test_a_command_that_renders_unsafe_is_refused_at_run_time(live_worker, plane_recipe, operator):
    """Validation reads the command with Jinja's comments left in; the rendered command has
    the value inside single quotes: the run fails with the line and nothing runs."""
    source = document(
        id="corpus-late",
        inputs={"v": {"type": "text", "default": STORABLE[0]}},
        roles={"r": {"provider": "demo", "mode": "write", "isolation": "project"}},
        steps=[
            {
                "id": "check",
                "kind": "gates.run",
                "role": "r",
                "gates": [{"name": "g", "command": "echo '{# ' #}{{ inputs.v }}{# ' #}' > out"}],
                "on": {"pass": "done", "fail": "done", "error": "done"},
            },
            {"id": "done", "kind": "loop.status", "status": "approved"},
        ],
    )
    run = services.start_run(plane_recipe(source), actor=Actor.operator(operator, "console"))
    wait_for(lambda: run.refresh_from_db() or run.status == Run.Status.FAILED, 120)
    assert "template error in a gate command" in run.error and "single quotes" in run.error
    assert not events(run, "gates_started")
    workdir, _ = run_folders(run)
    assert not (workdir / CANARY).exists() and not (workdir / "out").exists()


GOAL_COMMAND = """
schema: planeai.loop.recipe.v1
id: goal-command
name: goal-command
roles:
  r: {provider: demo, mode: write, isolation: project}
steps:
  - id: check
    kind: gates.run
    role: r
    gates:
      - {name: g, command: "{{ inputs.goal }}"}
    on: {pass: done, fail: done, error: done}
  - {id: done, kind: loop.status, status: approved}
"""


def test_the_message_is_not_a_command_for_an_operator(
    live_worker, plane_recipe, operator, shell_author, tmp_path
):
    """`{{ inputs.goal }}` reads the message when no goal is declared: an operator's message
    would have run as a program (`bash -c ...`). It needs the shell permission."""
    recipe = plane_recipe(GOAL_COMMAND)
    with pytest.raises(InputError) as refused:
        services.start_run(
            recipe, actor=Actor.operator(operator, "console"), message="bash -c 'touch goal-ran'"
        )
    assert "runs the goal as a command" in refused.value.errors["message"]
    assert not Run.objects.filter(recipe=recipe).exists()
    run = services.start_run(
        recipe, actor=Actor.operator(shell_author, "console"), message="touch goal-ran"
    )
    settled(run, "approved")
    workdir, _ = run_folders(run)
    assert (workdir / "goal-ran").exists()  # the shell author's own command, run as argv


def test_a_child_run_cannot_set_a_command_input(
    live_worker, plane_recipe, make_recipe, operator, tmp_path
):
    """A `workflow:` node's values (its `with:`, the message, fan_out items from agents)
    never become a child step machine's command."""
    canary = tmp_path / "child-ran"
    plane_recipe(GOAL_COMMAND)
    parent = make_recipe(
        "name: parent\nnodes:\n  - id: child\n    workflow: goal-command\n", "corpus-parent"
    )
    run = services.start_run(
        parent, actor=Actor.operator(operator, "console"), message=f"touch {canary}"
    )
    wait_for(lambda: run.refresh_from_db() or run.is_terminal, 120)
    assert run.status == Run.Status.FAILED and "runs the goal as a command" in run.error
    assert not canary.exists()
