"""Values never become shell code: every shell context x every value source x hostile payloads,
run through real bash. Safe contexts deliver the exact bytes; unsafe ones are refused both
when a recipe is loaded and when an old, already-saved script runs.

The corpus is data: add a value source to SOURCES, a context to SAFE_CONTEXTS or
UNSAFE_CONTEXTS, a payload to PAYLOADS.
"""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from recipes.loader import load_recipe
from runs.engine.variables import NodeOutput, VarContext, VariableError, substitute_shell
from tests.conftest import requires_runtime

CANARY = "CANARY"

PAYLOADS = [
    f"$(touch {CANARY})",
    f"`touch {CANARY}`",
    f"; touch {CANARY}",
    f"| touch {CANARY}",
    f"&& touch {CANARY}",
    f"' ; touch {CANARY} ; '",
    f'" ; touch {CANARY} ; "',
    f"line one\ntouch {CANARY}\n",
    f"${{IFS}}touch${{IFS}}{CANARY}",
    f"a[$(touch {CANARY})]",
    f"carriage\r$(touch {CANARY})\r",
    f"nul\0$(touch {CANARY})",
    f"EOF\ntouch {CANARY}\nEOF",
    f"\\$(touch {CANARY})",
]


def _node(value: str) -> NodeOutput:
    return NodeOutput(text=value)


def _structured(value: str) -> NodeOutput:
    return NodeOutput(text="", structured={"field": value}, schema={"properties": {"field": {}}})


# name -> (reference as written in a script, context carrying the value)
SOURCES = {
    "message": ("$USER_MESSAGE", lambda v: VarContext(user_message=v)),
    "arguments": ("$ARGUMENTS", lambda v: VarContext(user_message=v)),
    "text input": ("$INPUTS.topic", lambda v: VarContext(inputs={"topic": v})),
    "select input": ("$INPUTS.choice", lambda v: VarContext(inputs={"choice": v})),
    "gate feedback": ("$LOOP_USER_INPUT", lambda v: VarContext(loop_user_input=v)),
    "previous iteration": ("$LOOP_PREV_OUTPUT", lambda v: VarContext(loop_prev_output=v)),
    "node output": (
        "$agent.output",
        lambda v: VarContext(node_outputs={"agent": _node(v)}, known_nodes=frozenset({"agent"})),
    ),
    "approval comment": (
        "$review.output",
        lambda v: VarContext(node_outputs={"review": _node(v)}, known_nodes=frozenset({"review"})),
    ),
    "structured field": (
        "$agent.output.field",
        lambda v: VarContext(
            node_outputs={"agent": _structured(v)}, known_nodes=frozenset({"agent"})
        ),
    ),
    "previous loop pass": (
        "$LOOP_PREV.agent.output",
        lambda v: VarContext(loop_prev={"agent": _node(v)}, known_nodes=frozenset({"agent"})),
    ),
    "artifacts dir": ("$ARTIFACTS_DIR", lambda v: VarContext(artifacts_dir=v)),
}

# name -> (script using REF, how the value must arrive in the file `out`)
SAFE_CONTEXTS = {
    "bare": ("printf %s REF > out", lambda v: v),
    "assignment": ('x=REF; printf %s "$x" > out', lambda v: v),
    "double quotes": ('printf %s "<REF>" > out', lambda v: f"<{v}>"),
    "unquoted heredoc": ("cat > out <<EOF\n[REF]\nEOF", lambda v: f"[{v}]\n"),
    "heredoc strip tabs": ("cat > out <<-END\n\tREF\n\tEND", lambda v: f"{v}\n"),
    "command substitution": ('printf %s "$(printf %s REF)" > out', lambda v: v.rstrip("\n")),
    "until_bash test": ('[ REF = "REF" ] && printf %s REF > out', lambda v: v),
    "[[ string compare ]]": ("[[ REF == REF ]] && printf %s REF > out", lambda v: v),
    "case": ('case REF in *) printf %s "REF" > out;; esac', lambda v: v),
    "parameter default": ('printf %s "${unset_name:-REF}" > out', lambda v: v),
}

UNSAFE_CONTEXTS = {
    "single quotes": "printf %s 'REF' > out",
    "quoted heredoc": "cat > out <<'EOF'\nREF\nEOF",
    "arithmetic expansion": "echo $(( REF + 1 )) > out",
    "arithmetic command": "(( REF > 1 )) && touch out",
    "let": "let n=REF+1",
    "declare -i": "declare -i n=REF",
    "[[ -eq ]]": "[[ REF -eq 1 ]] && touch out",
    "array subscript": "arr[REF]=1",
    "array subscript read": 'echo "${arr[REF]}" > out',
    "eval": 'eval "echo REF" > out',
    "sh -c": 'bash -c "echo REF" > out',
    "escaped": "echo \\REF > out",
    "make": "make -f /dev/null REF",
    "sqlite3": "sqlite3 :memory: REF",
    "herestring on descriptor 0": "sh 0<<< REF",
    "heredoc on descriptor 0": "bash 0<<EOF\necho REF\nEOF",
    "getopts": 'set -- -x REF; while getopts x: o; do eval "$OPTARG"; done',
}


# Places where the peer pastes a value into literal text: a workflow's bash is rewritten
# when it loads (runs.engine.shell_rewrite) so bash reads the value there as data.
# name -> (script using REF, what the file `out` must hold)
REWRITTEN_CONTEXTS = {
    "single quotes": ("printf %s 'a REF b' > out", lambda v: f"a {v} b"),
    "single quotes, two": ("printf %s '[REF]' 'REF' > out", lambda v: f"[{v}]{v}"),
    "test in single quotes": (
        "e=$(cat expected; printf .); test 'REF.' = \"$e\" && printf ok > out",
        None,
    ),
    "quoted heredoc": (
        "cat > out <<'EOF'\n$HOME `x` \\n [REF]\nEOF",
        lambda v: f"$HOME `x` \\n [{v}]\n",
    ),
    "quoted heredoc, tabs": ('cat > out <<-"END"\n\tREF $1\n\tEND', lambda v: f"{v} $1\n"),
}
LOAD_REWRITTEN = {"single quotes", "quoted heredoc", "escaped"}
# Places a workflow's bash step checks when it starts (runs.engine.shell_checks): only an
# integer may stand there. name -> (script using REF, what `out` holds for the value 7)
CHECKED_AT_START = {
    "arithmetic expansion": ("echo $(( REF + 1 )) > out", "8\n"),
    "arithmetic command": ("(( REF > 1 )) && printf yes > out", "yes"),
    "let": ("let n=REF+1; printf %s $n > out", "8"),
    "declare -i": ("declare -i n=REF; printf %s $n > out", "7"),
    "[[ -eq ]]": ("[[ REF -eq 7 ]] && printf yes > out", "yes"),
    "a copy in arithmetic": ("n=REF\nprintf %s $(( n * 2 )) > out", "14"),
    "python3 -c": ('python3 -c "print(REF * 3)" > out', "21\n"),
    "python3 -c in single quotes": ("python3 -c 'print(REF * 3)' > out", "21\n"),
}


def _run(script: str, env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LC_ALL": "C.UTF-8", **env},
        capture_output=True,
        timeout=60,
    )


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("context", SAFE_CONTEXTS)
def test_safe_context_delivers_exact_bytes_and_runs_nothing(tmp_path, source, context):
    ref, make_ctx = SOURCES[source]
    template, expected = SAFE_CONTEXTS[context]
    for number, payload in enumerate(PAYLOADS):
        work = tmp_path / str(number)
        work.mkdir()
        script, env = substitute_shell(template.replace("REF", ref), make_ctx(payload))
        assert payload.replace("\0", "") not in script or not payload
        proc = _run(script, env, work)
        assert proc.returncode == 0, (payload, proc.stderr)
        # Environment strings cannot hold NUL, nor can bash variables: NUL is dropped.
        want = expected(payload.replace("\0", "")).encode()
        assert (work / "out").read_bytes() == want, payload
        assert not (work / CANARY).exists(), payload
        assert sorted(p.name for p in work.iterdir()) == ["out"]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("context", UNSAFE_CONTEXTS)
def test_unsafe_context_is_refused_at_run_time(tmp_path, source, context):
    ref, make_ctx = SOURCES[source]
    template = "echo first line\n" + UNSAFE_CONTEXTS[context].replace("REF", ref)
    line = template[: template.index(ref)].count("\n") + 1
    with pytest.raises(VariableError, match=rf"^line {line}: .* where no substitution is safe"):
        substitute_shell(template, make_ctx(PAYLOADS[0]))


def _recipe(script: str, *, until_bash: bool = False) -> str:
    body = textwrap.indent(script, " " * 8)
    if until_bash:
        return (
            "name: probe\nnodes:\n  - id: agent\n    loop:\n      prompt: go\n"
            "      max_iterations: 2\n      until_bash: |\n"
            + textwrap.indent(script, " " * 8)
            + "\n"
        )
    return f"name: probe\nnodes:\n  - id: agent\n    prompt: hi\n  - id: step\n    depends_on: [agent]\n    bash: |\n{body}\n"


@pytest.mark.parametrize("context", sorted(set(UNSAFE_CONTEXTS) - LOAD_REWRITTEN))
@pytest.mark.parametrize("until_bash", [False, True], ids=["bash", "until_bash"])
def test_unsafe_context_is_a_validation_error_with_its_line(context, until_bash):
    script = "echo first\n" + UNSAFE_CONTEXTS[context].replace("REF", "$USER_MESSAGE")
    result = load_recipe(_recipe(script, until_bash=until_bash))
    problems = [p for p in result.errors if "where no substitution is safe" in p.message]
    if context in CHECKED_AT_START and not until_bash:  # a bash step checks it at start
        assert result.ok and result.spec.node("step").start_checks, result.errors
        return
    assert len(problems) == 1, result.errors
    source_lines = _recipe(script, until_bash=until_bash).splitlines()
    assert "$USER_MESSAGE" in source_lines[problems[0].line - 1]
    line = script[: script.index("$USER_MESSAGE")].count("\n") + 1
    assert f"line {line} of the script" in problems[0].message


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("context", CHECKED_AT_START)
def test_checked_place_fails_at_start_for_a_hostile_value_and_runs_an_integer(
    tmp_path, source, context
):
    ref, make_ctx = SOURCES[source]
    template, expected = CHECKED_AT_START[context]
    result = load_recipe(_recipe(template.replace("REF", ref)))
    assert result.ok, result.errors
    node = result.spec.node("step")
    line = template[: template.index("REF")].count("\n") + 1
    for payload in [*PAYLOADS, "7.5", "", " 7"]:
        with pytest.raises(
            VariableError,
            match=rf"^line {line + (context == 'a copy in arithmetic')}: .* not an integer",
        ) as raised:
            substitute_shell(node.bash, make_ctx(payload), node.start_checks)
        assert "so the step did not start" in str(raised.value)
    script, env = substitute_shell(node.bash, make_ctx("7"), node.start_checks)
    proc = _run(script, env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out").read_text() == expected


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("context", REWRITTEN_CONTEXTS)
def test_rewritten_context_gives_the_peer_text_and_keeps_values_data(tmp_path, source, context):
    ref, make_ctx = SOURCES[source]
    template, expected = REWRITTEN_CONTEXTS[context]
    result = load_recipe(_recipe(template.replace("REF", ref)))
    assert result.ok, result.errors
    rewritten = result.spec.node("step").bash
    for number, payload in enumerate([*PAYLOADS, "plain words", ""]):
        work = tmp_path / str(number)
        work.mkdir()
        value = payload.replace("\0", "")
        (work / "expected").write_text(value)
        script, env = substitute_shell(rewritten, make_ctx(payload))
        proc = _run(script, env, work)
        assert proc.returncode == 0, (payload, script, proc.stderr)
        want = "ok" if expected is None else expected(value)
        assert (work / "out").read_bytes() == want.encode(), (payload, script)
        assert not (work / CANARY).exists(), payload


@pytest.mark.parametrize("source", ["message", "arguments", "artifacts dir"])
def test_an_escaped_environment_name_is_left_to_the_shell_that_reads_it_later(tmp_path, source):
    ref, make_ctx = SOURCES[source]
    script = f'cat > run.sh <<EOF\nprintf %s "\\{ref}"\nEOF\nbash run.sh > out'
    result = load_recipe(_recipe(script))
    assert result.ok, result.errors
    for number, payload in enumerate(PAYLOADS[:4]):
        work = tmp_path / str(number)
        work.mkdir()
        text, env = substitute_shell(result.spec.node("step").bash, make_ctx(payload))
        env[ref[1:]] = payload  # every step's environment carries it (step_env)
        proc = _run(text, env, work)
        assert proc.returncode == 0, proc.stderr
        assert (work / "out").read_text() == payload
        assert not (work / CANARY).exists()


@pytest.mark.parametrize("context", SAFE_CONTEXTS)
def test_safe_context_validates(context):
    script = SAFE_CONTEXTS[context][0].replace("REF", "$agent.output")
    result = load_recipe(_recipe(script))
    assert result.ok, result.errors


# ------------------------------------------------------------------------- script nodes
# A script is code: values reach it only through the environment. Each value source is
# bound with `with:` (and the message is in USER_MESSAGE); the script writes what it read.

SCRIPT_WRITERS = {
    "uv": "import os\nfor i in range({n}):\n    open(f'out{{i}}', 'w', encoding='utf-8', newline='')"
    ".write(os.environ[f'INPUTS_V{{i}}'])\nopen('msg', 'w', encoding='utf-8', newline='')"
    ".write(os.environ['USER_MESSAGE'])\n",
    "bun": "const fs = require('fs');\nfor (let i = 0; i < {n}; i++) fs.writeFileSync(`out${{i}}`, "
    "process.env[`INPUTS_V${{i}}`]);\nfs.writeFileSync('msg', process.env.USER_MESSAGE);\n",
}


# The scripts that run under bun: skipped, saying why, where bun is not installed.
BUN = pytest.param("bun", marks=requires_runtime("bun"))


def _script_node(runtime: str, ref: str):
    bindings = "".join(f"      v{i}: {ref}\n" for i in range(len(PAYLOADS)))
    code = textwrap.indent(SCRIPT_WRITERS[runtime].format(n=len(PAYLOADS)), " " * 6)
    source = (
        "name: probe\nnodes:\n  - id: s\n    runtime: "
        + runtime
        + "\n    with:\n"
        + bindings
        + "    script: |\n"
        + code
    )
    result = load_recipe(source)
    assert result.ok, result.errors
    return result.spec.node("s")


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("runtime", ["uv", "python without uv", BUN])
def test_script_nodes_get_values_as_data_and_run_nothing(tmp_path, settings, source, runtime):
    from loops.workflow.script import command_line
    from runs.executor.context import _bound, step_env
    from runs.sandbox import for_run, run_process

    if runtime == "python without uv":
        settings.LOOP_RUNTIME_DIRS = [str(tmp_path / "no-runtimes")]
    ref, make_ctx = SOURCES[source]
    node = _script_node("bun" if runtime == "bun" else "uv", ref)
    argv = command_line(node, "script node 's'")
    assert (runtime == "python without uv") == (argv[0] == __import__("sys").executable)
    for payload in PAYLOADS:
        assert payload not in " ".join(argv) or not payload.strip()
    env_ctx = make_ctx("")
    values = {}
    for i, payload in enumerate(PAYLOADS):
        ctx = make_ctx(payload)
        values[f"v{i}"] = _bound(None, {"v": node.bindings[f"v{i}"]}, ctx)["v"]
    env_ctx.inputs = values
    env_ctx.user_message = PAYLOADS[0]
    work = tmp_path / "work"
    work.mkdir()
    result = run_process(
        argv, sandbox=for_run(None, work), env=step_env(None, env_ctx), on_chunk=lambda _: None
    )
    assert result.exit_code == 0, result.output
    for i, payload in enumerate(PAYLOADS):
        assert (work / f"out{i}").read_bytes() == payload.replace("\0", "").encode(), payload
    assert (work / "msg").read_text() == PAYLOADS[0]
    assert not (work / CANARY).exists()


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("runtime", ["uv", "bun"])
def test_a_value_written_into_script_code_is_refused_at_load(source, runtime):
    ref = SOURCES[source][0]
    code = f"print({ref})" if runtime == "uv" else f"console.log({ref})"
    result = load_recipe(
        "name: probe\nnodes:\n  - id: s\n    runtime: " + runtime + "\n    script: |\n"
        f"      const_or_import = 1\n      {code}\n"
    )
    (problem,) = result.errors
    assert problem.line == 7 and "line 2 of the script" in problem.message
    assert f"{ref} has no safe meaning there: it stands in the program's code" in problem.message
    assert "values reach scripts only as data: read" in problem.message


# A reference inside a string literal is the peer's "this text, here": the literal is split
# around an environment read (runs.engine.script_literals), so the value stays data.
LITERAL_WRITERS = {
    "uv": "import sys\nopen('out', 'w', encoding='utf-8', newline='').write('<REF>' + \"|\" + f\"{sys.version_info[0]}:REF\")\n",
    "bun": "const fs = require('fs');\nconst s: string = \"<REF>\";\nfs.writeFileSync('out', s + '|' + `3:REF`);\n",
}


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("runtime", ["uv", BUN])
def test_a_value_in_a_script_string_literal_is_read_as_data(tmp_path, source, runtime):
    from loops.workflow.script import command_line
    from runs.executor.context import _bound, step_env
    from runs.sandbox import for_run, run_process

    ref, make_ctx = SOURCES[source]
    code = textwrap.indent(LITERAL_WRITERS[runtime].replace("REF", ref), " " * 6)
    result = load_recipe(
        f"name: probe\nnodes:\n  - id: s\n    runtime: {runtime}\n    script: |\n{code}"
    )
    assert result.ok, result.errors
    node = result.spec.node("s")
    assert ref not in node.script
    argv = command_line(node, "script node 's'")
    for number, payload in enumerate([*PAYLOADS, "plain words"]):
        payload = payload.replace("\0", "")  # no environment string holds NUL
        ctx = make_ctx(payload)
        ctx.inputs = {**ctx.inputs, **_bound(None, node.bindings, ctx)}
        work = tmp_path / str(number)
        work.mkdir()
        done = run_process(
            argv, sandbox=for_run(None, work), env=step_env(None, ctx), on_chunk=lambda _: None
        )
        assert done.exit_code == 0, done.output
        assert (work / "out").read_bytes().decode() == f"<{payload}>|3:{payload}", payload
        assert not (work / CANARY).exists()
