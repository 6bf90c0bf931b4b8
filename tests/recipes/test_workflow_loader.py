"""Loading ``kind: workflow`` recipes: every rule reports a path, a line and a reason."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from loops.workflow.format import NodeSpec, WorkflowSpec
from recipes.loader import MAX_SOURCE_BYTES, LoadResult, Problem, load_recipe

CORPUS = Path(__file__).parent / "corpus"


def y(text: str) -> str:
    """Dedent a YAML snippet; its first non-empty line is line 1."""
    return textwrap.dedent(text).lstrip("\n")


def load(text: str, **kwargs) -> LoadResult:
    return load_recipe(y(text), **kwargs)


def find(problems: list[Problem], fragment: str) -> Problem:
    hits = [p for p in problems if fragment in p.message]
    assert hits, f"no problem mentions {fragment!r}: {[str(p) for p in problems]}"
    return hits[0]


def assert_error(result: LoadResult, fragment: str, line: int, path: str | None = None) -> Problem:
    assert not result.ok and result.spec is None
    problem = find(result.errors, fragment)
    assert problem.line == line, str(problem)
    if path is not None:
        assert problem.path == path, str(problem)
    return problem


def assert_warning(result: LoadResult, fragment: str, line: int, path: str | None = None):
    problem = find(result.warnings, fragment)
    assert problem.line == line, str(problem)
    if path is not None:
        assert problem.path == path, str(problem)
    return problem


# A minimal valid document; cases below append one node at a time (first node on line 3).
HEAD = "name: t\nnodes:\n"


def with_nodes(nodes: str, head: str = HEAD) -> str:
    return head + y(nodes)


# ---------------------------------------------------------------------- basic types


def test_problem_str_and_dict():
    problem = Problem("nodes[2].loop.max_iterations", 12, 7, "must be a positive integer")
    assert str(problem) == "line 12, nodes[2].loop.max_iterations: must be a positive integer"
    assert problem.as_dict() == {
        "path": "nodes[2].loop.max_iterations",
        "line": 12,
        "column": 7,
        "message": "must be a positive integer",
    }
    assert str(Problem("", 3, 1, "bad")) == "line 3: bad"
    assert str(Problem("", None, None, "bad")) == "bad"


def test_minimal_recipe_is_ok():
    result = load_recipe("name: t\nnodes: [{id: a, bash: echo hi}]\n")
    assert result.ok and result.kind == "workflow" and not result.errors
    assert isinstance(result.spec, WorkflowSpec)


# ---------------------------------------------------------------------------- YAML


@pytest.mark.parametrize(
    ("source", "line", "column", "fragment"),
    [
        ("name: x\nnodes: [a, b\n", 3, 1, "flow sequence"),
        ("name: x\nnodes:\n\t- id: a\n", 3, 1, "tabs cannot be used"),
        ("name: 'open\nnodes: []\n", 3, 1, "quoted scalar"),
        ("name: x\n  bad: indent: here\n", 2, 6, "invalid YAML"),
        ("a: &x 1\nb: &x 2\n", 2, 4, "duplicate anchor"),
        ("a: *nope\n", 1, 4, "undefined alias"),
        ("name: a\n---\nname: b\n", 2, 1, "single document"),
    ],
)
def test_malformed_yaml_reports_line_and_column(source, line, column, fragment):
    result = load_recipe(source)
    assert len(result.errors) == 1 and result.spec is None
    (problem,) = result.errors
    assert fragment in problem.message
    assert (problem.line, problem.column) == (line, column)


@pytest.mark.parametrize(
    ("source", "line", "fragment"),
    [
        ("- a\n- b\n", 1, "not a list"),
        ("\n\njust text\n", 3, "not a single value"),
        ("", 1, "recipe is empty"),
        ("# only a comment\n", 1, "recipe is empty"),
        ("name: a\nname: b\nnodes: [{id: a, bash: x}]\n", 2, "duplicate key 'name'"),
        ("name: !!python/object/apply:os.system [ls]\nnodes: []\n", 1, "unsupported YAML tag"),
        ("name: x\nnodes: !!set {a, b}\n", 2, "unsupported YAML tag"),
        ("name: x\x00\n", 1, "unacceptable character"),
    ],
)
def test_unusable_documents(source, line, fragment):
    result = load_recipe(source)
    assert_error(result, fragment, line)


def test_top_level_error_has_empty_path():
    (problem,) = load_recipe("[1, 2]\n").errors
    assert problem.path == "" and problem.line == 1


def test_planeai_schema_goes_to_the_step_machine_format():
    result = load_recipe("name: x\nschema: planeai.loop.recipe.v1\nsteps: []\n")
    assert result.kind == "planeai" and result.spec is None
    messages = [(p.path, p.line, p.message) for p in result.errors]
    assert ("steps", 3, "must contain at least one step") in messages
    assert any(path == "id" for path, _, _ in messages)  # a step machine needs its id


def test_bytes_and_invalid_utf8_never_raise():
    assert load_recipe(b"name: t\nnodes: [{id: a, bash: x}]\n").ok  # type: ignore[arg-type]
    result = load_recipe(b"name: t\n\xff\xfe\n")  # type: ignore[arg-type]
    assert_error(result, "not valid UTF-8", 2)


# ------------------------------------------------------------------------- limits


def test_huge_source_is_rejected_before_parsing():
    source = "name: t\nnodes:\n" + "  - {id: a, bash: x}\n" * (MAX_SOURCE_BYTES // 20 + 10)
    started = time.perf_counter()
    result = load_recipe(source)
    assert time.perf_counter() - started < 0.5
    assert "too large" in result.errors[0].message


def test_large_string_under_the_limit_loads_fast():
    source = "name: t\nnodes:\n  - id: a\n    prompt: " + "y" * (MAX_SOURCE_BYTES - 100) + "\n"
    started = time.perf_counter()
    result = load_recipe(source)
    assert time.perf_counter() - started < 2
    assert result.ok and len(result.spec.nodes[0].prompt) == MAX_SOURCE_BYTES - 100


def test_alias_bomb_is_rejected_quickly_at_the_expanding_alias():
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    started = time.perf_counter()
    result = load_recipe("\n".join(levels) + "\n")
    assert time.perf_counter() - started < 0.5
    problem = assert_error(result, "expands to more than", 6)
    assert problem.column is not None


def test_deep_nesting_and_recursive_alias_are_rejected():
    deep = "".join("  " * i + f"k{i}:\n" for i in range(80))
    assert_error(load_recipe(deep), "deeper than 50", 50)
    assert_error(load_recipe("name: &x [*x]\n"), "recursive alias", 1)
    flow = "name: " + "[" * 5000 + "]" * 5000 + "\n"
    assert load_recipe(flow).errors[0].line == 1


def test_aliases_are_fine_when_small():
    result = load(
        """
        name: t
        base: &common {trigger_rule: all_done, idle_timeout: 5000}
        nodes:
          - {id: a, bash: x}
          - <<: *common
            id: b
            prompt: hi
        """
    )
    assert result.ok, result.errors
    node = result.spec.node("b")
    assert node.trigger_rule == "all_done" and node.idle_timeout == 5000
    assert_warning(result, "unknown top-level field 'base'", 2, "base")


# --------------------------------------------------------------------- top level


@pytest.mark.parametrize(
    ("source", "path", "line", "fragment"),
    [
        ("description: d\nnodes: [{id: a, bash: x}]\n", "name", 1, "needs a 'name'"),
        ("description: d\nname: ''\nnodes: [{id: a, bash: x}]\n", "name", 2, "must not be empty"),
        ("name: t\n", "nodes", 1, "non-empty 'nodes' list"),
        ("name: t\nnodes: []\n", "nodes", 2, "at least one node"),
        ("name: t\nnodes: {a: 1}\n", "nodes", 2, "must be a list"),
        ("name: t\nnodes:\n", "nodes", 2, "non-empty 'nodes' list"),
        ("name: [t]\nnodes: [{id: a, bash: x}]\n", "name", 1, "must be a string"),
        ("name: t\ninteractive: 'yes'\nnodes: [{id: a, bash: x}]\n", "interactive", 2, "true or"),
    ],
)
def test_top_level_rules(source, path, line, fragment):
    assert_error(load_recipe(source), fragment, line, path)


def test_unknown_top_level_key_is_a_warning():
    result = load_recipe("name: t\nversion: 3\nnodes: [{id: a, bash: x}]\n")
    assert result.ok
    assert_warning(result, "unknown top-level field 'version'", 2, "version")


# ----------------------------------------------------------------- node structure


NODE_ERRORS = [
    ("- bash: echo\n", "nodes[0]", 3, "has no 'id'"),
    ("- {id: 9lives, bash: x}\n", "nodes[0].id", 3, "invalid node id '9lives'"),
    ("- {id: a b, bash: x}\n", "nodes[0].id", 3, "invalid node id 'a b'"),
    ("- {id: a.b, bash: x}\n", "nodes[0].id", 3, "invalid node id"),
    ("- {id: 7, bash: x}\n", "nodes[0].id", 3, "must be a string"),
    ("- {id: a, bash: x}\n- {id: a, bash: y}\n", "nodes[1].id", 4, "duplicate node id 'a'"),
    ("- {id: a, bash: x, depends_on: [ghost]}\n", "nodes[0].depends_on[0]", 3, "unknown node"),
    ("- {id: a, bash: x, depends_on: a}\n", "nodes[0].depends_on", 3, "must be a list"),
    ("- {id: a}\n", "nodes[0]", 3, "has no kind"),
    ("- {id: a, bash: x, prompt: y}\n", "nodes[0].prompt", 3, "several kinds (bash, prompt)"),
    ("- just-a-string\n", "nodes[0]", 3, "must be a mapping"),
    ("- {id: a, bash: ''}\n", "nodes[0].bash", 3, "must not be empty"),
    ("- {id: a, bash: }\n", "nodes[0].bash", 3, "needs a script"),
    ("- {id: a, prompt: 12}\n", "nodes[0].prompt", 3, "must be a string, not 12"),
    ("- {id: a, cancel: ''}\n", "nodes[0].cancel", 3, "must not be empty"),
    ("- {id: a, bash: x, trigger_rule: sometimes}\n", "nodes[0].trigger_rule", 3, "unknown "),
    ("- {id: a, bash: x, timeout: 0}\n", "nodes[0].timeout", 3, "positive integer"),
    ("- {id: a, prompt: x, idle_timeout: 1.5}\n", "nodes[0].idle_timeout", 3, "positive integer"),
    ("- {id: a, prompt: x, idle_timeout: true}\n", "nodes[0].idle_timeout", 3, "positive integer"),
    ("- {id: a, prompt: x, always_run: 1}\n", "nodes[0].always_run", 3, "true or false"),
    ("- {id: a, prompt: x, when: [1]}\n", "nodes[0].when", 3, "must be a string"),
    ("- {id: a, prompt: x, retry: {max_attempts: 11}}\n", "nodes[0].retry.max_attempts", 3, "10"),
    ("- {id: a, prompt: x, retry: true}\n", "nodes[0].retry", 3, "must be a mapping"),
    ("- {id: a, prompt: x, output_format: [1]}\n", "nodes[0].output_format", 3, "mapping"),
    ("- {id: a, approval: {decisions: [go]}}\n", "nodes[0].approval.message", 3, "message"),
    ("- {id: a, approval: {message: m, decisions: [go, go]}}\n", None, 3, "duplicate decision"),
]


@pytest.mark.parametrize(("nodes", "path", "line", "fragment"), NODE_ERRORS)
def test_node_rules(nodes, path, line, fragment):
    assert_error(load_recipe(with_nodes(nodes)), fragment, line, path)


@pytest.mark.parametrize("kind", ["for_each", "parallel", "http", "switch"])
def test_unsupported_node_kinds_are_errors_not_crashes(kind):
    result = load_recipe(with_nodes(f"- id: a\n  bash: x\n- id: x\n  {kind}: something\n"))
    problem = assert_error(result, "not supported", 6, f"nodes[1].{kind}")
    expected = f"node 'x': field '{kind}': node kind '{kind}' is not supported by Loop Console"
    assert problem.message == expected


def test_dependency_cycle_is_named():
    result = load(
        """
        name: t
        nodes:
          - id: a
            bash: x
            depends_on: [c]
          - id: b
            bash: x
            depends_on: [a]
          - id: c
            bash: x
            depends_on: [b]
          - id: d
            bash: x
            depends_on: [d]
        """
    )
    cycle = assert_error(result, "dependency cycle: a -> c -> b -> a", 5, "nodes[0].depends_on[0]")
    assert "each node depends on the next" in cycle.message
    assert_error(result, "dependency cycle: d -> d", 14, "nodes[3].depends_on[0]")
    assert len([p for p in result.errors if "cycle" in p.message]) == 2


def test_all_errors_are_kept_and_sorted_by_line():
    result = load(
        """
        name: t
        nodes:
          - id: a
            bash: x
            trigger_rule: nope
          - id: b
            loop: {prompt: p, until: DONE, max_iterations: 0}
          - id: a
            cancel: stop
          - id: c
            http: run.py
        """
    )
    lines = [p.line for p in result.errors]
    assert lines == sorted(lines) and lines == [5, 7, 8, 11]


# ---------------------------------------------------------------------- loop nodes


def loop_node(body: str, extra: str = "") -> str:
    """One loop node; the ``loop:`` key is on line 4 and its first field on line 5."""
    return with_nodes("- id: lp\n" + extra + "  loop:\n" + textwrap.indent(y(body), "    "))


LOOP_ERRORS = [
    ("prompt: p\ncommand: c\nuntil: D\nmax_iterations: 2\n", "lp.loop.command", 6, "not both"),
    ("until: D\nmax_iterations: 2\n", "lp.loop", 4, "exactly one of 'prompt' or 'command'"),
    ("prompt: p\nmax_iterations: 2\n", "lp.loop", 4, "at least one completion condition"),
    ("prompt: p\nuntil: D\n", "lp.loop.max_iterations", 4, "max_iterations is required"),
    ("prompt: p\nuntil: D\nmax_iterations: 0\n", "lp.loop.max_iterations", 7, "positive integer"),
    ("prompt: p\nuntil: D\nmax_iterations: -3\n", "lp.loop.max_iterations", 7, "positive"),
    ("prompt: p\nuntil: D\nmax_iterations: true\n", "lp.loop.max_iterations", 7, "not True"),
    ("prompt: p\nuntil: D\nmax_iterations: 2.5\n", "lp.loop.max_iterations", 7, "positive"),
    ("prompt: p\nuntil: D\nmax_iterations: '3'\n", "lp.loop.max_iterations", 7, "positive"),
    ("prompt: p\nuntil: D\nmax_iterations: 2\nfresh_context: 'no'\n", None, 8, "true or false"),
    ("prompt: p\nuntil: ''\nmax_iterations: 2\n", "lp.loop.until", 6, "must not be empty"),
    ("prompt: p\nuntil: D\nmax_iterations: 2\ninteractive: true\n", None, 8, "gate_message"),
    ("prompt: ''\nuntil: D\nmax_iterations: 2\n", "lp.loop.prompt", 5, "must not be empty"),
    ("prompt: p\nuntil: 42\nmax_iterations: 2\n", "lp.loop.until", 6, "quote it"),
]


@pytest.mark.parametrize(("body", "path", "line", "fragment"), LOOP_ERRORS)
def test_loop_rules(body, path, line, fragment):
    path = path and path.replace("lp.", "nodes[0].")
    assert_error(load_recipe(loop_node(body)), fragment, line, path)


def test_retry_on_loop_is_an_error():
    source = loop_node("prompt: p\nuntil: D\nmax_iterations: 2\n", extra="  retry: 2\n")
    assert_error(load_recipe(source), "'retry' is not allowed on loop nodes", 4, "nodes[0].retry")


OUTPUT_FORMAT = """\
  output_format:
    type: object
    properties:
      done: {type: %s}
    required: [%s]
"""


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("", "needs this node to declare an output_format"),
        ((OUTPUT_FORMAT % ("boolean", "done")).replace("done:", "other:"), "not a property"),
        (OUTPUT_FORMAT % ("boolean", "other"), "must be listed in output_format.required"),
        (OUTPUT_FORMAT % ("string", "done"), "must have type boolean"),
    ],
)
def test_until_field_rules(extra, fragment):
    source = loop_node("prompt: p\nmax_iterations: 2\nuntil_field: done\n", extra=extra)
    line = 7 + extra.count("\n")
    assert_error(load_recipe(source), fragment, line, "nodes[0].loop.until_field")


def test_until_field_valid():
    extra = OUTPUT_FORMAT % ("boolean", "done")
    result = load_recipe(loop_node("prompt: p\nmax_iterations: 2\nuntil_field: done\n", extra))
    assert result.ok, result.errors
    assert result.spec.nodes[0].loop.until_field == "done"


def test_output_format_must_be_a_valid_json_schema():
    result = load_recipe(with_nodes("- id: a\n  prompt: p\n  output_format:\n    type: objekt\n"))
    assert_error(result, "not a valid JSON Schema", 6, "nodes[0].output_format.type")
    result = load_recipe(with_nodes("- id: a\n  prompt: p\n  output_format: {required: 5}\n"))
    assert_error(result, "not a valid JSON Schema", 5)


@pytest.mark.parametrize("field", ["hooks", "mcp", "skills", "allowed_tools", "denied_tools"])
def test_fields_without_effect_on_loops_warn_and_are_dropped(field):
    source = loop_node("prompt: p\nuntil: D\nmax_iterations: 2\n", extra=f"  {field}: [x]\n")
    result = load_recipe(source)
    assert result.ok, result.errors
    message = f"node 'lp': field '{field}' has no effect on loop nodes and is discarded"
    assert assert_warning(result, message, 4, f"nodes[0].{field}").message == message
    assert field not in result.spec.nodes[0].model_dump()


def test_context_on_loop_group_is_discarded():
    source = with_nodes(
        "- id: g\n  context: fresh\n  loop_group:\n    until: D\n    max_iterations: 2\n"
        "    nodes:\n      - {id: a, bash: x}\n"
    )
    result = load_recipe(source)
    assert result.ok
    assert_warning(result, "has no effect on loop nodes", 4, "nodes[0].context")


def test_signal_completes_without_interactive_warns():
    body = "prompt: p\nuntil: D\nmax_iterations: 2\nsignal_completes: true\n"
    result = load_recipe(loop_node(body))
    assert result.ok
    assert_warning(result, "signal_completes only matters for interactive", 8)


def test_interactive_loop_needs_interactive_workflow():
    body = "prompt: p\nuntil: D\nmax_iterations: 2\ninteractive: true\ngate_message: Go?\n"
    result = load_recipe(loop_node(body))
    assert result.ok
    assert_warning(result, "workflow itself is not interactive", 8, "nodes[0].loop.interactive")
    result = load_recipe(loop_node(body).replace("name: t\n", "name: t\ninteractive: true\n"))
    assert result.ok and not result.warnings
    assert result.spec.interactive and result.spec.nodes[0].loop.gate_message == "Go?"


# --------------------------------------------------------------------- loop_group


def group_node(body: str, extra: str = "") -> str:
    """``- id: grp`` on line 3, ``loop_group:`` on line 4 (after ``extra`` lines)."""
    return with_nodes("- id: grp\n" + extra + "  loop_group:\n" + textwrap.indent(y(body), "    "))


GROUP_BODY = "nodes:\n  - {id: a, bash: x}\n  - {id: b, prompt: p, depends_on: [a]}\n"


@pytest.mark.parametrize(
    ("body", "extra", "path", "line", "fragment"),
    [
        (
            "until_field: done\nuntil: D\nmax_iterations: 2\n" + GROUP_BODY,
            "",
            ".until_field",
            5,
            "until_field is not supported on loop_group",
        ),
        (
            "until: D\nmax_iterations: 2\n" + GROUP_BODY,
            "  retry: 3\n",
            "retry",
            4,
            "'retry' is not allowed on loop_group nodes",
        ),
        (
            "until: D\nmax_iterations: 2\n" + GROUP_BODY,
            "  output_format: {type: object}\n",
            "output_format",
            4,
            "output_format is not supported on loop_group",
        ),
        ("max_iterations: 2\n" + GROUP_BODY, "", "", 4, "at least one completion condition"),
        ("until: D\n" + GROUP_BODY, "", ".max_iterations", 4, "max_iterations is required"),
        ("until: D\nmax_iterations: 2\n", "", ".nodes", 4, "non-empty 'nodes' list"),
        ("until: D\nmax_iterations: 2\nnodes: []\n", "", ".nodes", 7, "at least one node"),
        ("until: D\nmax_iterations: 2\nprompt: p\n" + GROUP_BODY, "", ".prompt", 7, "no 'prompt'"),
        (
            "until: D\nmax_iterations: 2\ninteractive: true\n" + GROUP_BODY,
            "",
            ".interactive",
            7,
            "needs a gate_message",
        ),
    ],
)
def test_loop_group_rules(body, extra, path, line, fragment):
    full = "nodes[0]" + ("." + path if path and not path.startswith(".") else "")
    if path.startswith("."):
        full = "nodes[0].loop_group" + path
    elif path == "":
        full = "nodes[0].loop_group"
    assert_error(load_recipe(group_node(body, extra)), fragment, line, full)


def test_loop_group_body_is_sealed_and_names_the_outer_node():
    source = group_node(
        "until: D\nmax_iterations: 2\nnodes:\n  - {id: a, bash: x, depends_on: [pre]}\n"
    )
    source += "- {id: pre, bash: x}\n"
    problem = assert_error(
        load_recipe(source),
        "cannot depend on outer node 'pre'",
        8,
        "nodes[0].loop_group.nodes[0].depends_on[0]",
    )
    assert "loop_group 'grp'" in problem.message


def test_loop_group_body_ids_workflow_nodes_and_cycles():
    body = (
        "until: D\nmax_iterations: 2\nnodes:\n"
        "  - {id: a, bash: x, depends_on: [b]}\n"
        "  - {id: b, bash: x, depends_on: [a]}\n"
        "  - {id: a, bash: y}\n"
        "  - {id: sub, workflow: other}\n"
    )
    result = load_recipe(group_node(body))
    assert_error(result, "duplicate node id 'a' in this loop_group body", 10)
    assert_error(result, "'workflow' node cannot be in a loop_group body", 11)
    assert_error(result, "dependency cycle: a -> b -> a", 8)


def test_body_ids_may_repeat_outer_ids():
    source = group_node("until: D\nmax_iterations: 2\nnodes:\n  - {id: grp2, bash: x}\n")
    assert load_recipe(source + "- {id: grp2, bash: y, depends_on: [grp]}\n").ok


# ------------------------------------------------------------------------ commands


@pytest.fixture
def commands(tmp_path: Path) -> list[Path]:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "implement.md").write_text("Implement the next story.\n")
    (second / "implement.md").write_text("shadowed\n")
    (second / "review.md").write_text("Review $implement.output\n")
    (first / "blank.md").write_text("  \n")
    (first / "weird.md").mkdir()
    (second / "weird.md").write_text("never reached\n")
    return [first, second]


@pytest.mark.parametrize("name", ["../x", "a/b", "a\\\\b", ".hidden", "..", "a..b"])
@pytest.mark.parametrize("where", ["node", "loop"])
def test_unsafe_command_names_are_rejected(name, where, commands):
    if where == "node":
        source, path, line = with_nodes(f'- id: a\n  command: "{name}"\n'), "nodes[0].command", 4
    else:
        body = f'command: "{name}"\nuntil: D\nmax_iterations: 2\n'
        source, path, line = loop_node(body), "nodes[0].loop.command", 5
    assert_error(load_recipe(source, commands_dirs=commands), "unsafe command name", line, path)


def test_missing_command_names_the_directories(commands):
    result = load_recipe(with_nodes("- id: a\n  command: ghost\n"), commands_dirs=commands)
    problem = assert_error(result, "command 'ghost' not found", 4, "nodes[0].command")
    assert str(commands[0]) in problem.message and str(commands[1]) in problem.message
    result = load_recipe(with_nodes("- id: a\n  command: ghost\n"))
    assert_error(result, "no commands directories are configured", 4)


def test_command_resolution_order_and_fail_closed(commands):
    result = load_recipe(
        with_nodes("- {id: a, command: implement}\n- {id: b, command: review}\n"),
        commands_dirs=commands,
    )
    assert result.ok, result.errors
    assert result.spec.node("a").prompt == "Implement the next story.\n"
    assert result.spec.node("b").prompt.startswith("Review")
    result = load_recipe(with_nodes("- {id: a, command: weird}\n"), commands_dirs=commands)
    assert_error(result, "is not a file", 3)
    result = load_recipe(with_nodes("- {id: a, command: blank}\n"), commands_dirs=commands)
    assert_error(result, "is empty", 3)


def test_command_symlink_outside_the_directory_is_refused(commands, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    (commands[0] / "leak.md").symlink_to(secret)
    result = load_recipe(with_nodes("- {id: a, command: leak}\n"), commands_dirs=commands)
    assert_error(result, "points outside", 3)


@pytest.mark.parametrize("target", ["gone.md", "implement.md"], ids=["dangling", "loop"])
def test_a_broken_link_in_a_first_folder_fails_closed(commands, target):
    """A link that leads nowhere (its target missing, or a loop of links) is a file that
    exists but cannot be read: the later folder's `implement.md` is never used instead."""
    (commands[0] / "implement.md").unlink()
    (commands[0] / "implement.md").symlink_to(commands[0] / target)
    result = load_recipe(with_nodes("- {id: a, command: implement}\n"), commands_dirs=commands)
    problem = assert_error(result, "is a link that leads nowhere", 3, "nodes[0].command")
    assert str(commands[0] / "implement.md") in problem.message
    assert "fix or remove it" in problem.message


# -------------------------------------------------------------------------- inputs


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        ("{type: select}", "inputs.x.options", "needs a non-empty list of options"),
        ("{type: boolean, default: 'yes'}", "inputs.x.default", "must be true or false"),
        ("{type: number, default: '3'}", "inputs.x.default", "must be a number"),
        ("{type: number, default: true}", "inputs.x.default", "must be a number"),
        ("{type: text, default: 3}", "inputs.x.default", "must be a string"),
        ("{type: select, options: [a, b], default: c}", "inputs.x.default", "not one of"),
        ("{type: colour}", "inputs.x.type", "unknown type 'colour'"),
        ("{required: maybe}", "inputs.x.required", "true or false"),
    ],
)
def test_input_rules(spec, path, fragment):
    source = f"name: t\ninputs:\n  x: {spec}\nnodes: [{{id: a, bash: x}}]\n"
    assert_error(load_recipe(source), fragment, 3, path)


# --------------------------------------------------------------- foreign fields


@pytest.mark.parametrize(
    "field",
    [
        "effort",
        "thinking",
        "agents",
        "output_type",
        "sandbox",
        "worktree",
        "mutates_checkout",
        "persist_session",
        "allowed_tools",
        "hooks",
    ],
)
def test_fields_from_other_tools_are_warnings(field):
    result = load_recipe(with_nodes(f"- id: a\n  prompt: p\n  {field}: on\n"))
    assert result.ok
    assert_warning(result, f"field '{field}' is not used by Loop Console", 5, f"nodes[0].{field}")


def test_unknown_node_field_is_a_warning():
    result = load_recipe(with_nodes("- id: a\n  prompt: p\n  colour: red\n"))
    assert result.ok
    assert_warning(result, "unknown field 'colour' is ignored", 5)


# ---------------------------------------------------------------- a full workflow

FULL = """\
name: ship-it
description: Every node kind in one recipe
interactive: true
provider: claude
model: sonnet
providers:
  local:
    kind: openai
    base_url: http://localhost:8080/v1
    model: qwen
    api_key_env: OPENAI_API_KEY
    temperature: 0.2
inputs:
  topic: {type: text, label: Topic, required: true}
  notes: {type: textarea, description: Free text}
  dry_run: {type: boolean, default: false}
  level: {type: select, options: [low, {value: high, label: High!}], default: high}
  budget: {type: number, default: 2.5}
  branch: {type: branch, default: main}
  task: {type: task}
nodes:
  - id: setup
    bash: echo ready
    timeout: 60000
    retry: 3
  - id: plan
    depends_on: [setup]
    prompt: Plan $topic
    provider: local
    output_format: {type: object, properties: {steps: {type: array}}}
  - id: implement
    depends_on: [plan]
    idle_timeout: 600000
    loop:
      command: implement
      until: COMPLETE
      max_iterations: 10
      fresh_context: true
      interactive: true
      gate_message: Keep going?
      signal_completes: true
  - id: fix
    depends_on: [setup]
    loop_group:
      until_bash: test -f done
      max_iterations: 5
      nodes:
        - id: test
          bash: make test
        - id: repair
          prompt: Fix $LOOP_PREV.test.output
          depends_on: [test]
          when: "$LOOP_PREV.test.output == 'red'"
        - id: review
          command: review
          depends_on: [test, repair]
          trigger_rule: all_done
  - id: gate
    depends_on: [implement, fix]
    approval:
      message: Ship it?
      decisions: [ship, {id: hold, label: Hold for now}]
      capture_response: true
  - id: abort
    depends_on: [gate]
    when: "$gate.output == 'hold'"
    cancel: Held by reviewer
  - id: report
    depends_on: [gate]
    always_run: true
    prompt: Summarize
"""


def test_full_workflow_loads_with_correct_values(commands):
    result = load_recipe(FULL, commands_dirs=commands)
    assert result.ok, [str(p) for p in result.errors]
    assert result.warnings == []
    spec = result.spec
    assert (spec.name, spec.description, spec.interactive) == (
        "ship-it",
        "Every node kind in one recipe",
        True,
    )
    assert (spec.provider, spec.model) == ("claude", "sonnet")
    local = spec.providers["local"]
    assert (local.kind, local.base_url, local.model, local.api_key_env, local.command) == (
        "openai",
        "http://localhost:8080/v1",
        "qwen",
        "OPENAI_API_KEY",
        None,
    )
    assert local.options == {"temperature": 0.2}

    inputs = spec.inputs
    assert [i.type for i in inputs.values()] == [
        "text",
        "textarea",
        "boolean",
        "select",
        "number",
        "branch",
        "task",
    ]
    assert inputs["topic"].required and inputs["topic"].label == "Topic"
    assert inputs["dry_run"].default is False and inputs["budget"].default == 2.5
    assert [(o.value, o.label) for o in inputs["level"].options] == [
        ("low", "low"),
        ("high", "High!"),
    ]
    assert inputs["task"].default is None and inputs["notes"].required is False

    kinds = {n.id: n.kind for n in spec.nodes}
    assert kinds == {
        "setup": "bash",
        "plan": "prompt",
        "implement": "loop",
        "fix": "loop_group",
        "gate": "approval",
        "abort": "cancel",
        "report": "prompt",
    }
    setup = spec.node("setup")
    assert setup.bash == "echo ready" and setup.timeout == 60000
    assert (setup.retry.max_attempts, setup.retry.delay_ms) == (3, 1000)
    plan = spec.node("plan")
    assert plan.provider == "local" and plan.output_format["type"] == "object"

    loop = spec.node("implement").loop
    assert spec.node("implement").idle_timeout == 600000
    assert loop.command == "implement" and loop.prompt == "Implement the next story.\n"
    assert (loop.until, loop.until_bash, loop.until_field) == ("COMPLETE", None, None)
    assert (loop.max_iterations, loop.fresh_context, loop.interactive) == (10, True, True)
    assert loop.gate_message == "Keep going?" and loop.signal_completes is True

    group = spec.node("fix").loop_group
    assert (group.until, group.until_bash, group.max_iterations) == (None, "test -f done", 5)
    assert group.fresh_context is False and group.interactive is False
    assert group.layers() == [["test"], ["repair"], ["review"]]
    review = spec.node("fix.review")
    assert review.kind == "command" and review.prompt == "Review $implement.output\n"
    assert review.trigger_rule == "all_done"
    assert spec.node("fix.repair").when == "$LOOP_PREV.test.output == 'red'"

    approval = spec.node("gate").approval
    assert approval.message == "Ship it?" and approval.capture_response is True
    assert [(d.id, d.label) for d in approval.decisions] == [
        ("ship", "ship"),
        ("hold", "Hold for now"),
    ]
    assert spec.node("abort").cancel == "Held by reviewer"
    assert spec.node("report").always_run is True

    assert spec.layers() == [
        ["setup"],
        ["plan", "fix"],
        ["implement"],
        ["gate"],
        ["abort", "report"],
    ]
    with pytest.raises(KeyError):
        spec.node("nope")


def test_defaults():
    result = load_recipe(loop_node("prompt: p\nuntil: D\nmax_iterations: 1\n"))
    assert result.ok
    node: NodeSpec = result.spec.nodes[0]
    assert result.spec.description == "" and result.spec.interactive is False
    assert result.spec.providers == {} and result.spec.inputs == {}
    assert node.depends_on == [] and node.trigger_rule == "all_success"
    assert node.when is None and node.retry is None and node.always_run is False
    assert node.idle_timeout is None and node.timeout is None and node.output_format is None
    assert (node.loop.fresh_context, node.loop.interactive, node.loop.signal_completes) == (
        False,
        False,
        False,
    )
    assert node.loop.command is None and node.loop.gate_message is None


def test_layers_keep_declaration_order_inside_a_layer():
    source = with_nodes(
        "- {id: z, bash: x}\n- {id: c, bash: x, depends_on: [z, a]}\n- {id: a, bash: x}\n"
        "- {id: b, bash: x, depends_on: [a]}\n- {id: d, bash: x, depends_on: [b, c]}\n"
    )
    assert load_recipe(source).spec.layers() == [["z", "a"], ["c", "b"], ["d"]]


def test_approval_shorthand_and_nulls():
    source = with_nodes("- {id: a, approval: Proceed?, depends_on: , when: }\n")
    result = load_recipe(source)
    assert result.ok, result.errors
    assert result.spec.nodes[0].approval.message == "Proceed?"
    assert result.spec.nodes[0].depends_on == []


# -------------------------------------------------------------------------- corpus


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.yaml"))


def test_corpus_is_big_enough():
    assert len(corpus_files()) >= 40


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.stem)
def test_hostile_corpus(path: Path, commands):
    # Binary junk must not stop the test itself: undecodable bytes become lone surrogates.
    source = path.read_bytes().decode("utf-8", "surrogateescape")
    # CPU time of this thread, so a busy machine does not fail the bound; a quadratic
    # blow-up on hostile input still does.
    started = time.thread_time()
    result = load_recipe(source, commands_dirs=commands)
    elapsed = time.thread_time() - started
    assert elapsed < 2, f"{path.name} took {elapsed:.2f}s of CPU"
    assert result.spec is None and not result.ok
    assert result.errors, f"{path.name} produced no errors"
    for problem in result.errors + result.warnings:
        assert problem.line is not None and problem.line >= 1, str(problem)
        assert len(problem.message) <= 500 and len(problem.path) <= 1000
        assert str(problem) and problem.as_dict()["message"] == problem.message
    # ``# expect: line N: fragment`` on the first line pins the leading error.
    first = source.split("\n", 1)[0]
    if first.startswith("# expect: line "):
        line_text, fragment = first.removeprefix("# expect: line ").split(": ", 1)
        assert any(p.line == int(line_text) and fragment in p.message for p in result.errors), [
            str(p) for p in result.errors
        ]


def test_interactive_loop_group_warns_without_interactive_workflow():
    body = "until: D\nmax_iterations: 2\ninteractive: true\ngate_message: ok?\n" + GROUP_BODY
    result = load_recipe(group_node(body))
    assert result.ok
    assert_warning(result, "interactive loop_group, but the workflow", 7)


def test_input_names_and_unknown_input_fields():
    source = "name: t\ninputs:\n  bad name: {}\n  ok:\n    type: text\n    colour: red\nnodes: [{id: a, bash: x}]\n"
    result = load_recipe(source)
    assert_error(result, "invalid input name 'bad name'", 3, "inputs.bad name")
    assert_warning(result, "unknown field 'colour'", 6, "inputs.ok.colour")


@pytest.mark.parametrize("source", [None, 42, ["name: x"]])
def test_non_text_source_never_raises(source):
    result = load_recipe(source)  # type: ignore[arg-type]
    assert result.errors and result.spec is None


def test_a_link_inside_a_commands_folder_is_not_followed(commands):
    """A commands folder may be an agent's work: the console never follows a link in it,
    even one to a file beside it (the safety rules: a workspace is hostile input)."""
    (commands[0] / "implement.md").unlink()
    (commands[0] / "real.md").write_text("Do the work.\n")
    (commands[0] / "implement.md").symlink_to(commands[0] / "real.md")
    result = load_recipe(with_nodes("- {id: a, command: implement}\n"), commands_dirs=commands)
    assert_error(result, "links here are not followed", 3, "nodes[0].command")
