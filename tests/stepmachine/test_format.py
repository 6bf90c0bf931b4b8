"""The step-machine format: the specification's no-mistakes validates as it is written,
and each kind of mistake is refused with its line."""

import re
from pathlib import Path

import pytest

from loops.stepmachine import rendering
from recipes.loader import load_recipe

ROOT = Path(__file__).resolve().parents[2]
SEED_COPY = ROOT / "recipes" / "builtin" / "no-mistakes.yaml"
# The specification's "Full Recipe YAML" section, copied into the repository (its README).
SPECIFICATION = ROOT / "tests" / "seeds" / "texts" / "003_af74c475a0709f40.full-recipe-yaml.txt"

GOOD = """\
schema: planeai.loop.recipe.v1
id: maker-verifier
name: Maker and verifier
roles:
  maker: {mode: write}
  verifier: {mode: review, isolation: readonly, session_reuse: false}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: "Goal: {{ inputs.goal }}"
  - id: wait
    kind: handoff.wait
    from: maker
    on: {completed: done}
  - id: done
    kind: loop.status
    status: approved
"""


def errors(source: str) -> list[tuple[int | None, str]]:
    return [(p.line, p.message) for p in load_recipe(source).errors]


def test_the_specifications_no_mistakes_validates_with_no_error_or_warning():
    result = load_recipe(SEED_COPY.read_text())
    assert result.ok and result.kind == "planeai", [str(p) for p in result.errors]
    assert result.warnings == []
    spec = result.spec
    assert spec.id == "no-mistakes" and [s.id for s in spec.steps][:3] == [
        "rebase",
        "wait_for_rebase",
        "create_reviewer",
    ]
    assert spec.roles["reviewer"].isolation == "readonly" and spec.roles["reviewer"].read_only
    assert spec.roles["gatekeeper"].isolation == "project" and spec.roles["gatekeeper"].writes
    policy = spec.policy
    assert (policy.max_rounds, policy.max_ticks, policy.max_sessions) == (5, 50, 10)
    assert (policy.stale_after_ms, policy.merge_policy, policy.auto_approve) == (
        600000,
        "human",
        True,
    )
    assert spec.inputs["target_branch"].default == "main"
    assert spec.tools.required == ["git", "plane_sessions", "plane_loops"]


def full_recipe_yaml(specification: str) -> str:
    """The block under the specification's "Full Recipe YAML" heading: every line up to the
    first one that starts a paragraph of prose again (not indented, not a key, not a
    comment), without the blank lines around it."""
    lines = specification.splitlines()
    start = lines.index("Full Recipe YAML") + 1
    block = []
    for line in lines[start:]:
        if line and not line[0].isspace() and not re.match(r"[\w-]+:|#", line):
            break
        block.append(line)
    return "\n".join(block).strip("\n")


def test_the_builtin_no_mistakes_is_the_specifications_yaml_verbatim():
    written = full_recipe_yaml(SPECIFICATION.read_text(encoding="utf-8"))
    assert written.startswith("schema: planeai.loop.recipe.v1\nid: no-mistakes\n")
    assert SEED_COPY.read_text(encoding="utf-8").strip("\n") == written


def test_defaults_of_every_field():
    spec = load_recipe(GOOD).spec
    assert spec.trigger.kind == "manual"
    maker = spec.roles["maker"]
    assert (maker.provider, maker.isolation, maker.session_reuse) == ("default", "worktree", True)
    policy = spec.policy
    assert (policy.max_rounds, policy.max_ticks, policy.max_sessions) == (3, 50, 5)
    assert policy.stale_after_ms is None and policy.auto_approve is True
    assert spec.knowledge.files == [] and spec.tools.optional == []


@pytest.mark.parametrize(
    "old, new, line, fragment",
    [
        ("on: {completed: done}", "on: {completed: nowhere}", 15, "unknown step 'nowhere'"),
        ('"Goal: {{ inputs.goal }}"', '"Goal"\n    next: missing', 12, "unknown step 'missing'"),
        ("role: maker", "role: makr", 10, "role 'makr' is not a declared role"),
        ("from: maker", "from: someone", 14, "from 'someone' is not a declared role"),
        ("on: {completed: done}", "on: {pass: done}", 15, "'pass' is not a result of a handoff"),
        ("status: approved", "status: shipped", 18, "unknown status 'shipped'"),
        ('"Goal: {{ inputs.goal }}"', '"Goal: {{ inputs.goal }"', 11, "template syntax"),
        ('"Goal: {{ inputs.goal }}"', "\"{% include 'x' %}\"", 11, "cannot read files"),
        (
            "steps:",
            "policy: {merge_policy: auto}\nsteps:",
            7,
            "merge_policy 'auto' is not supported",
        ),
    ],
)
def test_each_mistake_is_refused_with_its_line(old, new, line, fragment):
    assert old in GOOD
    found = errors(GOOD.replace(old, new, 1))
    assert any(where == line and fragment in message for where, message in found), found


def test_a_template_error_in_a_block_is_placed_on_its_own_line():
    source = GOOD.replace(
        'prompt: "Goal: {{ inputs.goal }}"',
        "prompt: |\n      line one\n      line two {{ x + }}\n      line three",
    )
    ((line, message),) = errors(source)
    assert line == 13 and "template syntax" in message  # the line of the block it is on


def test_gates_run_results_and_commands_are_checked():
    source = GOOD.replace(
        "  - id: done\n",
        """  - id: check
    kind: gates.run
    role: maker
    gates:
      - name: quoted
        command: "echo '{{ inputs.goal }}'"
      - name: from-agent
        command: "{{ runtime.last_error }}"
    on: {pass: done, completed: done}
  - id: done
""",
    )
    found = errors(source)
    assert any(line == 21 and "inside single quotes" in m for line, m in found), found
    assert any(line == 23 and "never from runtime" in m for line, m in found), found
    assert any(
        line == 24 and "'completed' is not a result of a gates.run" in m for line, m in found
    )


def test_unknown_fields_are_warnings_and_fields_of_other_kinds_say_so():
    source = GOOD.replace("roles:", "owner: me\nroles:").replace(
        "    status: approved", "    status: approved\n    prompt: unused\n    colour: red"
    )
    result = load_recipe(source)
    assert result.ok
    warnings = [(p.line, p.message) for p in result.warnings]
    assert (4, "unknown top-level field 'owner' is ignored") in warnings
    assert any("'prompt' has no effect on a loop.status step" in m for _, m in warnings)
    assert any("unknown field 'colour'" in m for _, m in warnings)


def test_required_fields_per_step_kind_and_legal_names():
    source = """\
schema: planeai.loop.recipe.v1
id: Bad Id
roles:
  steps: {mode: write}
  r: {isolation: somewhere}
steps:
  - {id: a, kind: session.prompt, role: r, prompt: hi}
  - {id: a, kind: round.next}
  - {id: c, kind: teleport}
"""
    found = errors(source)
    messages = " | ".join(m for _, m in found)
    assert "invalid id 'Bad Id'" in messages
    assert "'steps' is the name of the run's step runner" in messages
    assert "role 'r' needs a mode" in messages
    assert "unknown isolation 'somewhere'" in messages
    assert "a session.prompt step needs 'select'" in messages
    assert "duplicate step id 'a'" in messages
    assert "a round.next step needs 'next'" in messages
    assert "unknown step kind 'teleport'" in messages


def test_triggers_of_later_versions_validate():
    for kind in ("schedule", "github_event", "task_event", "pr_feedback", "ci_failure"):
        assert load_recipe(GOOD.replace("roles:", f"trigger: {{kind: {kind}}}\nroles:")).ok
    assert errors(GOOD.replace("roles:", "trigger: {kind: cron}\nroles:"))[0][1].startswith(
        "unknown trigger kind 'cron'"
    )


def test_the_sandbox_renders_what_the_spec_lists_and_refuses_escapes():
    ctx = {
        "inputs": rendering.Namespace("inputs", {"goal": "ship", "items": "an input"}),
        "runtime": rendering.Namespace("runtime", {"round": 2, "last_error": ""}),
        "knowledge": rendering.Namespace("knowledge", {"files": rendering.TextList(["A.md"])}),
    }
    text = rendering.render(
        "{{ inputs.goal }} r{{ runtime.round }} {{ inputs.items }}\n"
        "{% if inputs.task_key %}Task: {{ inputs.task_key }}\n{% endif %}"
        "{{ inputs.gate_command | default('make ci') }}\n{{ knowledge.files }}",
        ctx,
    )
    assert text == "ship r2 an input\nmake ci\n- A.md"
    with pytest.raises(rendering.RenderError, match=r"inputs.ticket is undefined"):
        rendering.render("{{ inputs.ticket }}", ctx)
    with pytest.raises(rendering.RenderError, match="sandbox|unsafe|undefined"):
        rendering.render("{{ inputs.__class__.__mro__ }}", ctx)
    with pytest.raises(rendering.RenderError):
        rendering.render("{{ ''.__class__.__base__.__subclasses__() }}", ctx)


def test_gate_commands_keep_printed_values_out_of_the_script():
    ctx = {"inputs": rendering.Namespace("inputs", {"word": "$(touch pwned)", "cmd": "pytest -q"})}
    command = rendering.render_command('printf "%s" {{ inputs.word }} >out', ctx)
    assert command.script == 'printf "%s" "${LOOP_V_1}" >out'
    assert command.env == {"LOOP_V_1": "$(touch pwned)"}
    whole = rendering.render_command("{{ inputs.cmd }}", ctx)
    assert whole.argv == ["pytest", "-q"] and whole.script == ""
    with pytest.raises(rendering.RenderError, match="single quotes"):
        rendering.render_command("echo '{{ inputs.word }}'", ctx)
