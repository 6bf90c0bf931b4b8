"""The corpus through the real paths: values that went in the way people and agents put
them in (the start form's fields through clean_inputs, the services, an approval comment
with capture_response, feedback at a loop gate, a command provider's environment, an
agent's output, loop variables) reach real bash through the engine, run in this process.
For every payload nothing executes (a canary file stays absent) and each value arrives
exactly as the console stored it.

(tests/security/test_shell_corpus.py crosses every shell context with every source on
synthetic contexts; this file proves the sources themselves. NUL cannot be stored in
PostgreSQL text and is refused at the API, so it is not among these payloads.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes.inputs import InputsInvalid, clean_inputs
from recipes.loader import load_recipe
from runs import services
from runs.actor import Actor
from runs.executor.context import run_dirs
from runs.models import Gate, NodeRun, Run

HOSTILE_OPTION = "x'\"; touch CANARY; a[$(touch CANARY)]"

RECIPE = """
name: corpus-paths
interactive: true
provider: echo
providers:
  # The command provider's own context: it reads the message from its environment.
  echo: {kind: command, command: 'cat > /dev/null; printf %s "$USER_MESSAGE"'}
inputs:
  t_text: {type: text}
  t_textarea: {type: textarea}
  t_number: {type: number}
  t_boolean: {type: boolean}
  t_select: {type: select, options: [plain, "OPTION"]}
  t_branch: {type: branch}
  t_task: {type: task}
nodes:
  - id: values
    bash: |
      printf %s $USER_MESSAGE > "$ARTIFACTS_DIR/message"
      printf %s "$ARGUMENTS" > "$ARTIFACTS_DIR/arguments"
      cat > "$ARTIFACTS_DIR/heredoc" <<EOF
      $USER_MESSAGE
      EOF
      printf %s "$INPUTS.t_text" > "$ARTIFACTS_DIR/in-text"
      printf %s $INPUTS.t_textarea > "$ARTIFACTS_DIR/in-textarea"
      printf %s "$INPUTS.t_number" > "$ARTIFACTS_DIR/in-number"
      printf %s "$INPUTS.t_boolean" > "$ARTIFACTS_DIR/in-boolean"
      printf %s "$INPUTS.t_select" > "$ARTIFACTS_DIR/in-select"
      printf %s "$INPUTS.t_branch" > "$ARTIFACTS_DIR/in-branch"
      printf %s "$INPUTS.t_task" > "$ARTIFACTS_DIR/in-task"
  - id: agent
    depends_on: [values]
    prompt: go
  - id: after-agent
    depends_on: [agent]
    bash: printf %s "$agent.output" > "$ARTIFACTS_DIR/agent"
  - id: work
    depends_on: [after-agent]
    loop:
      prompt: go
      until_bash: |
        if [ -e "$ARTIFACTS_DIR/seen" ]; then printf %s "$LOOP_PREV_OUTPUT" > "$ARTIFACTS_DIR/prev"
        else touch "$ARTIFACTS_DIR/seen"; false; fi
      max_iterations: 3
  - id: decide
    depends_on: [work]
    approval: {message: "Say something", capture_response: true}
  - id: after-decide
    depends_on: [decide]
    bash: printf %s "$decide.output" > "$ARTIFACTS_DIR/comment"
  - id: refine
    depends_on: [after-decide]
    loop:
      prompt: "Feedback: $LOOP_USER_INPUT"
      until_bash: '[ -n "$LOOP_USER_INPUT" ] && printf %s "$LOOP_USER_INPUT" > "$ARTIFACTS_DIR/feedback"'
      max_iterations: 3
      interactive: true
      gate_message: Any feedback?
  - id: group
    depends_on: [refine]
    loop_group:
      max_iterations: 3
      until_bash: '[ -e "$ARTIFACTS_DIR/loop-prev" ]'
      nodes:
        - id: say
          bash: printf %s $USER_MESSAGE
        - id: look-back
          depends_on: [say]
          bash: |
            if [ -e "$ARTIFACTS_DIR/g1" ]; then printf %s "$LOOP_PREV.say.output" > "$ARTIFACTS_DIR/loop-prev"
            else touch "$ARTIFACTS_DIR/g1"; fi
""".replace("OPTION", HOSTILE_OPTION.replace('"', '\\"'))


def payloads(canary: Path) -> list[str]:
    c = str(canary)
    return [
        f"$(touch {c})",
        f"`touch {c}`",
        f"; touch {c}",
        f"| touch {c}",
        f"&& touch {c}",
        f"' ; touch {c} ; '",
        f'" ; touch {c} ; "',
        f"line one\ntouch {c}\n",
        f"${{IFS}}touch${{IFS}}{c}",
        f"a[$(touch {c})]",
        f"carriage\r$(touch {c})\r",
        f"EOF\ntouch {c}\nEOF",
        f"\\$(touch {c})",
    ]


def one_line(value: str) -> str:
    return value.replace("\n", " ")


def settle(engine):
    engine.deliver(limit=500)


def answer_gates(run: Run, operator, engine, comment: str) -> None:
    """Decide each gate as it comes: the approval and the first loop gate get the payload
    as comment/feedback, later loop gates are accepted."""
    given = set()
    for _ in range(6):
        settle(engine)
        run.refresh_from_db()
        gate = services.pending_gate(run)
        if gate is None:
            return
        text = comment if gate.node_id not in given else ""
        given.add(gate.node_id)
        services.approve(gate.pk, Actor.operator(operator, "console"), comment=text)


@pytest.mark.parametrize("index", range(13))
def test_every_value_source_through_the_engine_and_real_bash(
    transactional_db,
    make_recipe,
    broker,
    operator,
    tmp_path,
    index,
):
    canary = tmp_path / "CANARY"
    payload = payloads(canary)[index]
    recipe = make_recipe(RECIPE.replace("CANARY", str(canary)), "corpus-paths")
    option = HOSTILE_OPTION.replace("CANARY", str(canary))
    inputs = {
        "t_text": one_line(payload),
        "t_textarea": payload,
        "t_number": "42",
        "t_boolean": "yes",
        "t_select": option,
        "t_branch": one_line(payload),
        "t_task": one_line(payload),
    }
    run = services.start_run(
        recipe, actor=Actor.operator(operator, "console"), message=payload, inputs=inputs
    )
    answer_gates(run, operator, broker, payload)
    run.refresh_from_db()
    assert run.status == "completed", run.error
    assert not canary.exists(), payload

    _, artifacts = run_dirs(run)

    def arrived(name: str) -> str:
        return (artifacts / name).read_bytes().decode()

    stored = {r.node_id: r.output for r in NodeRun.objects.filter(run=run, iteration=0)}
    expected = {
        "message": payload,
        "arguments": payload,
        "heredoc": payload + "\n",
        "in-text": one_line(payload),
        "in-textarea": payload,
        "in-number": "42",
        "in-boolean": "true",
        "in-select": option,
        "in-branch": one_line(payload),
        "in-task": one_line(payload),
        "agent": stored["agent"],  # what the command provider printed, as stored
        "prev": stored["agent"],  # the loop's previous iteration printed the same
        "comment": payload.strip(),  # an approval comment is trimmed when decided
        "feedback": payload.strip(),
        "loop-prev": NodeRun.objects.get(run=run, node_id="group.say", iteration=1).output,
    }
    # the provider saw the message in its environment (its output is stored trimmed)
    assert stored["agent"].strip() == payload.strip()
    assert expected["loop-prev"] == payload.rstrip("\n")  # a bash step's output is trimmed
    for name, value in expected.items():
        assert arrived(name) == value, name
    decided = Gate.objects.filter(run=run, node_id="decide").get()
    assert decided.comment == payload.strip() and stored["decide"] == payload.strip()


def test_single_line_inputs_refuse_newlines_and_numbers_refuse_code():
    spec = load_recipe(RECIPE).spec.inputs
    with pytest.raises(InputsInvalid) as caught:
        clean_inputs(spec, {"t_text": "a\ntouch x", "t_number": "$(touch x)", "t_select": "zzz"})
    assert set(caught.value.errors) == {"t_text", "t_number", "t_select"}
    assert clean_inputs(spec, {"t_textarea": "a\n$(touch x)"})["t_textarea"] == "a\n$(touch x)"
