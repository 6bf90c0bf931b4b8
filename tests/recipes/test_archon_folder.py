"""A repository's `.archon` folder loads in place: discovery in subfolders, command and
script lookup as the peer does it, `script:`, `include:` with `with:`, `workflow:` nodes."""

from __future__ import annotations

import io
import json
import os
import textwrap

import pytest
from django.core.management import call_command

from recipes.models import Recipe
from recipes.sync import sync
from recipes.validation import validate_source
from runs.actor import ENGINE
from tests.archon_repo import EXPECTED_VALID, make_archon_repo

pytestmark = pytest.mark.django_db


@pytest.fixture
def archon_checkout(tmp_path, settings):
    root = make_archon_repo(tmp_path / "checkout")
    settings.LOOP_USER_RECIPE_DIR = str(tmp_path / "user")
    settings.LOOP_RECIPE_DIRS = [str(root)]
    return root


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def validate(path):
    return validate_source(path.read_text(), str(path))


def messages(problems) -> list[str]:
    return [str(p) for p in problems]


@pytest.mark.parametrize("point_at", ["root", "workflows"])
def test_every_supported_workflow_validates_in_place_the_rest_say_why(
    archon_checkout, settings, point_at
):
    if point_at == "workflows":
        settings.LOOP_RECIPE_DIRS = [str(archon_checkout / ".archon" / "workflows")]
    reports = {r.slug: r for r in sync() if r.origin == "project"}
    assert {slug: "invalid" not in r.action for slug, r in reports.items()} == EXPECTED_VALID
    assert "join 'first_success' is refused" in reports["racing"].detail
    assert "cannot be in a loop_group body" in reports["grouped-child"].detail
    release = Recipe.objects.get(slug="release")
    assert release.source_path.endswith("pack/release/release.yaml") and release.valid


def test_recipe_ls_shows_where_each_recipe_came_from(archon_checkout):
    sync()
    out = io.StringIO()
    call_command("recipe", "ls", stdout=out)
    lines = {line.split()[0]: line for line in out.getvalue().splitlines()}
    assert lines["fan-all-done"].endswith(
        str(archon_checkout / ".archon/workflows/fan-all-done.yaml")
    )
    assert "INVALID" in lines["racing"] and lines["racing"].endswith("legacy/racing.yaml")
    assert (
        "builtin" in lines["counter-loop"]
        and "recipes/builtin/counter-loop.yaml" in lines["counter-loop"]
    )
    out = io.StringIO()
    call_command("recipe", "ls", "--json", stdout=out)
    rows = {r["slug"]: r for r in json.loads(out.getvalue())}
    assert rows["release"]["source_path"].endswith("pack/release/release.yaml")


def test_commands_resolve_repo_first_then_defaults_then_user_then_bundled(
    archon_checkout, settings, tmp_path
):
    flow = archon_checkout / ".archon/workflows/legacy/plan-and-sum.yaml"
    spec = validate(flow).spec
    # `.archon/commands/summarize.md` wins over `commands/defaults/summarize.md`.
    assert spec.node("sum").prompt.startswith("Summarize (the repository's own)")
    assert spec.node("plan").prompt.startswith("Plan the change for")  # found in defaults/
    write(tmp_path / "user/commands/only-user.md", "From the user's folder.\n")
    source = flow.read_text().replace("command: plan", "command: only-user")
    assert (
        validate_source(source, str(flow)).spec.node("plan").prompt == "From the user's folder.\n"
    )


def test_a_missing_command_names_every_folder_it_looked_in(archon_checkout, tmp_path):
    flow = archon_checkout / ".archon/workflows/legacy/plan-and-sum.yaml"
    source = flow.read_text().replace("command: plan", "command: ghost")
    result = validate_source(source, str(flow))
    (problem,) = result.errors
    assert (
        problem.line == 5 and "command 'ghost' not found (ghost.md); looked in:" in problem.message
    )
    for folder in [
        archon_checkout / ".archon/commands",
        archon_checkout / ".archon/commands/defaults",
        tmp_path / "user/commands",
    ]:
        assert f"{folder}," in problem.message or f"{folder};" in problem.message
    assert "recipes/builtin/commands" in problem.message


def test_a_packaged_workflow_uses_only_its_own_commands_and_scripts(archon_checkout):
    release = archon_checkout / ".archon/workflows/pack/release/release.yaml"
    spec = validate(release).spec
    assert spec.node("notes").prompt.startswith("Write release notes")
    assert spec.node("stamp").script_path == str(release.parent / "scripts/stamp.py")
    source = release.read_text().replace("command: notes", "command: plan")  # a shared one
    (problem,) = validate_source(source, str(release)).errors
    assert f"looked in: {release.parent / 'commands'}; create it as" in problem.message


# ------------------------------------------------------------------------------ scripts


def flow_with(repo, nodes: str, name="t"):
    path = repo / ".archon/workflows" / f"{name}.yaml"
    write(path, "name: t\nnodes:\n" + textwrap.indent(textwrap.dedent(nodes).lstrip("\n"), "  "))
    return validate(path)


def test_named_scripts_are_found_one_subfolder_deep_and_match_their_runtime(archon_checkout):
    result = flow_with(archon_checkout, "- {id: a, script: items, runtime: uv}\n")
    assert result.ok and result.spec.node("a").script_path.endswith("scripts/lists/items.py")
    result = flow_with(archon_checkout, "- {id: a, script: items, runtime: bun}\n")
    assert "is items.py, which runs with runtime uv, but the node says runtime bun" in (
        result.errors[0].message
    )
    result = flow_with(archon_checkout, "- {id: a, script: nothing-here, runtime: bun}\n")
    message = result.errors[0].message
    assert "script 'nothing-here' not found (nothing-here.ts or nothing-here.js); looked in:" in (
        message
    )
    assert str(archon_checkout / ".archon/scripts/lists") in message
    write(archon_checkout / ".archon/scripts/fmt.ts", "console.log('x')\n")
    result = flow_with(archon_checkout, "- {id: a, script: fmt, runtime: uv}\n")
    assert (
        "is fmt.ts, which runs with runtime bun, but the node says runtime uv"
        in messages(result.errors)[0]
    )


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda entry, outside: entry.symlink_to(entry.parent / "gone.py"), "leads nowhere"),
        (lambda entry, outside: entry.symlink_to(outside), "points outside"),
        (lambda entry, outside: os.mkfifo(entry), "is not a file"),
    ],
    ids=["dangling-link", "link-out", "fifo"],
)
def test_a_named_script_entry_that_cannot_be_used_fails_closed(
    archon_checkout, tmp_path, make, fragment
):
    """The rule command files follow (recipes/formats/commands.py: usable_entry): an entry
    in the first folder that has the name is never passed over for a later folder's file,
    a FIFO is never opened, a link never followed out of its folder."""
    outside = write(tmp_path / "secret.py", "print('not yours')\n")
    make(archon_checkout / ".archon/scripts/items.py", outside)
    result = flow_with(archon_checkout, "- {id: a, script: items, runtime: uv}\n")
    assert not result.ok
    assert fragment in result.errors[0].message and result.errors[0].line == 3


@pytest.mark.parametrize(
    ("node", "line", "fragment"),
    [
        ("- {id: a, script: x}\n", 3, "a script node needs 'runtime: uv' or 'runtime: bun'"),
        ("- {id: a, script: x, runtime: deno}\n", 3, "runtime 'deno' is not one of: uv, bun"),
        ("- {id: a, script: ' ', runtime: uv}\n", 3, "must not be empty"),
        (
            "- id: a\n  runtime: uv\n  deps: ['--index-url=http://x']\n  script: print(1)\n",
            5,
            "looks like an option",
        ),
    ],
)
def test_script_node_errors(archon_checkout, node, line, fragment):
    result = flow_with(archon_checkout, node)
    problem = next(p for p in result.errors if fragment in p.message)
    assert problem.line == line, str(problem)


def test_values_in_inline_code_are_refused_with_the_variable_to_read(archon_checkout):
    result = flow_with(
        archon_checkout,
        """
        - id: up
          bash: echo hi
        - id: a
          depends_on: [up]
          runtime: uv
          script: |
            import os
            print("$USER_MESSAGE")
            data = $up.output
        - id: b
          runtime: bun
          script: "console.log($INPUTS.topic)"
        """,
    )
    found = messages(result.errors)
    assert len(found) == 2, found
    assert any(
        "line 11" in m
        and "line 3 of the script: $up.output has no safe meaning there: it stands in the "
        "program's code, not inside a string literal"
        in m
        and "`with: {name: $up.output}`" in m
        for m in found
    ), found
    assert any("process.env.INPUTS_TOPIC" in m for m in found), found


def test_values_in_string_literals_of_inline_code_are_read_from_the_environment(archon_checkout):
    result = flow_with(
        archon_checkout,
        """
        - id: up
          bash: echo hi
        - id: a
          depends_on: [up]
          runtime: uv
          script: |
            print("got: $USER_MESSAGE", f'{1 + 1} $up.output')
        - id: b
          runtime: bun
          depends_on: [up]
          script: "console.log('$up.output!', `$ARGUMENTS`)"
        """,
    )
    assert result.ok, result.errors
    a, b = result.spec.node("a"), result.spec.node("b")
    assert a.script == (
        "print((\"got: \" + __import__('os').environ['USER_MESSAGE']), "
        'f\'{1 + 1} {__import__("os").environ["INPUTS__REF_1"]}\')\n'
    )
    assert a.bindings == {"_ref_1": "$up.output"}
    assert (
        b.script
        == "console.log((process.env[\"INPUTS__REF_1\"] + '!'), `${process.env['ARGUMENTS']}`)"
    )
    assert b.bindings == {"_ref_1": "$up.output"}


def test_fields_a_script_does_not_use_are_named_warnings(archon_checkout):
    result = flow_with(
        archon_checkout,
        "- {id: a, script: print(1), runtime: uv, model: big, idle_timeout: 5}\n"
        "- {id: b, script: 'console.log(1)', runtime: bun, deps: [left-pad]}\n",
    )
    assert result.ok
    warned = messages(result.warnings)
    assert any("field 'model' has no effect on a script node" in w for w in warned), warned
    assert any("field 'idle_timeout'" in w and "use 'timeout'" in w for w in warned), warned
    assert any("'deps' is for runtime uv" in w for w in warned), warned


def test_with_bindings_fold_to_distinct_environment_names(archon_checkout):
    result = flow_with(
        archon_checkout,
        "- {id: a, script: print(1), runtime: uv, with: {foo-bar: 1, foo_bar: 2}}\n",
    )
    assert "would both arrive as INPUTS_FOO_BAR" in result.errors[0].message


# ------------------------------------------------------------------------------ include


def test_include_namespaces_the_block_and_binds_its_inputs(archon_checkout):
    spec = validate(archon_checkout / ".archon/workflows/fan-all-done.yaml").spec
    ids = [n.id for n in spec.nodes]
    assert ids == [
        "setup",
        "prepare__gather",
        "prepare__shape",
        "prepare__audit",
        "list",
        "each",
        "report",
    ]
    gather = spec.node("prepare__gather")
    assert gather.depends_on == ["setup"]  # the include's edges attach to its entry node
    assert gather.bindings == {"topic": "$setup.output", "style": "plain"}  # with + default
    assert spec.node("prepare__shape").depends_on == ["prepare__gather"]
    # depends_on: [prepare] waits for the block's last node; $prepare.output is `returns:`.
    assert spec.node("list").depends_on == ["prepare__audit"]
    assert spec.node("list").bindings == {"prepared": "$prepare__shape.output"}


def test_include_problems_fail_the_load_with_a_line(archon_checkout):
    block = archon_checkout / ".archon/workflows/blocks/prepare-block.yaml"
    result = flow_with(
        archon_checkout, "- id: a\n  bash: echo\n- id: p\n  include: prepare-block\n"
    )
    assert "needs input 'topic': add it under 'with:'" in result.errors[0].message
    assert result.errors[0].line == 5
    result = flow_with(
        archon_checkout, "- {id: p, include: prepare-block, with: {topic: x, colour: red}}\n"
    )
    (problem,) = result.errors
    assert "has no input 'colour' (its inputs: topic, style)" in problem.message
    result = flow_with(archon_checkout, "- {id: p, include: nope}\n")
    (problem,) = result.errors
    assert "included workflow 'nope' not found (nope.yaml); looked in:" in problem.message
    result = flow_with(
        archon_checkout, "- {id: p, include: prepare-block, fan_out: {items: $x.output}}\n"
    )
    assert any("'fan_out' belongs on a 'workflow:' node" in m for m in messages(result.errors))
    write(block, block.read_text().replace("bash: echo audited", "bash: ''"))
    result = flow_with(archon_checkout, "- {id: p, include: prepare-block, with: {topic: x}}\n")
    assert result.errors[0].line == 3
    assert (
        f"included workflow 'prepare-block' ({block}): line 18: must not be empty"
        in result.errors[0].message
    )


def test_include_cycles_and_captured_references_are_refused(archon_checkout):
    write(
        archon_checkout / ".archon/workflows/a.yaml", "name: a\nnodes:\n  - {id: x, include: b}\n"
    )
    write(
        archon_checkout / ".archon/workflows/b.yaml", "name: b\nnodes:\n  - {id: y, include: a}\n"
    )
    result = validate(archon_checkout / ".archon/workflows/a.yaml")
    assert any("include cycle: a -> b -> a" in m for m in messages(result.errors)), messages(
        result.errors
    )
    write(
        archon_checkout / ".archon/workflows/blk.yaml",
        "name: blk\nnodes:\n  - {id: z, bash: echo $plan.output}\n",
    )
    result = flow_with(
        archon_checkout, "- {id: plan, bash: echo}\n- {id: i, include: blk, depends_on: [plan]}\n"
    )
    assert "refers to $plan.output, a node it does not have" in result.errors[0].message


def test_include_in_a_loop_group_body_and_nested_includes(archon_checkout):
    write(
        archon_checkout / ".archon/workflows/inner.yaml",
        """
        name: inner
        inputs: {word: {required: true}}
        nodes:
          - {id: say, bash: echo $INPUTS.word}
        """,
    )
    write(
        archon_checkout / ".archon/workflows/outer.yaml",
        """
        name: outer
        inputs: {topic: {required: true}}
        nodes:
          - {id: pre, bash: echo pre}
          - {id: deep, include: inner, depends_on: [pre], with: {word: "$INPUTS.topic!"}}
        """,
    )
    result = flow_with(
        archon_checkout,
        """
        - id: loop
          loop_group:
            until_bash: test -n $both.output
            max_iterations: 2
            nodes:
              - {id: both, include: outer, with: {topic: deep}}
        """,
    )
    assert result.ok, messages(result.errors)
    body = result.spec.node("loop").loop_group
    assert [n.id for n in body.nodes] == ["both__pre", "both__deep__say"]
    assert body.nodes[1].bindings == {"word": "deep!"}
    assert body.nodes[1].depends_on == ["both__pre"]
    assert result.spec.node("loop").loop_group.until_bash == "test -n $both__deep__say.output"


NO_RETURNS = """
name: no-returns
description: A block that names no `returns:`; declared out of order on purpose
nodes:
  - {id: head, bash: echo head}
  - {id: tail, depends_on: [middle], bash: echo tail}
  - {id: middle, depends_on: [head], bash: echo middle}
"""

USES_NO_RETURNS = """
- {id: p, include: no-returns}
- {id: after, depends_on: [p], bash: echo "got $p.output"}
- id: typed
  depends_on: [p]
  runtime: uv
  script: import os; print(os.environ["INPUTS_GOT"])
  with: {got: $p.output}
"""


def test_include_without_returns_gives_the_blocks_terminal_node(archon_checkout):
    # Not its first node (head), nor its last in the file (middle): the one nothing follows.
    write(archon_checkout / ".archon/workflows/blocks/no-returns.yaml", NO_RETURNS)
    result = flow_with(archon_checkout, USES_NO_RETURNS)
    assert result.ok, messages(result.errors)
    after = result.spec.node("after")
    assert after.bash == 'echo "got $p__tail.output"' and after.depends_on == ["p__tail"]
    assert result.spec.node("typed").bindings == {"got": "$p__tail.output"}


def test_include_without_returns_outputs_its_terminal_node_in_a_run(live_worker, archon_checkout):
    from runs import services
    from tests.conftest import wait_run

    write(archon_checkout / ".archon/workflows/blocks/no-returns.yaml", NO_RETURNS)
    flow_with(archon_checkout, USES_NO_RETURNS, name="uses-no-returns")
    sync()
    run = services.start_run(Recipe.objects.get(slug="uses-no-returns"), actor=ENGINE, message="go")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    outputs = dict(run.nodes.values_list("node_id", "output"))
    assert (outputs["p__head"], outputs["p__middle"], outputs["p__tail"]) == (
        "head",
        "middle",
        "tail",
    )
    assert (outputs["after"], outputs["typed"]) == ("got tail", "tail")


# ----------------------------------------------------------------------------- workflow


@pytest.mark.parametrize(
    ("node", "fragment"),
    [
        ("{id: w, workflow: c, input: x, with: {a: 1}}", "either 'input' (its message) or 'with'"),
        ("{id: w, workflow: c, retry: 2}", "'retry' is not allowed on a workflow node"),
        ("{id: w, workflow: ../c}", "unsafe workflow name"),
        ("{id: w, workflow: c, fan_out: {items: plain}}", "must name an upstream output"),
        ("{id: w, workflow: c, fan_out: {items: $x.output, join: most}}", "join 'most' is not"),
        ("{id: w, workflow: c, fan_out: {max_parallel: 2}}", "fan_out needs 'items'"),
        ("{id: w, workflow: c, fan_out: {items: $x.output, max_parallel: 0}}", "greater than 0"),
    ],
)
def test_workflow_node_errors(archon_checkout, node, fragment):
    result = flow_with(archon_checkout, f"- {{id: x, bash: echo}}\n- {node}\n")
    assert any(fragment in m for m in messages(result.errors)), messages(result.errors)


def test_workflow_node_fields_the_console_does_not_act_on_are_named_warnings(archon_checkout):
    result = flow_with(
        archon_checkout,
        "- {id: x, bash: echo}\n"
        "- {id: w, workflow: c, depends_on: [x], isolation: worktree, model: big, "
        "fan_out: {items: $x.output, as: item, order: fast}}\n",
    )
    assert result.ok, messages(result.errors)
    warned = messages(result.warnings)
    assert any("isolation 'worktree' is not used by Loop Console" in w for w in warned), warned
    assert any("field 'model' has no effect on a workflow node" in w for w in warned), warned
    assert any("unknown fan_out field 'order'" in w for w in warned), warned
    node = result.spec.node("w")
    assert node.fan_out.item_input == "item" and node.fan_out.join == "all_done"
    assert node.fan_out.max_parallel == 5
