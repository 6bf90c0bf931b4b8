"""The shell checker reads scripts with a real bash parser (tree-sitter's bash grammar).

Every known way of turning a value into code is refused, whatever spelling the script uses
for it (``$USER_MESSAGE``, ``${USER_MESSAGE}``, a bare ``USER_MESSAGE`` in arithmetic, a
copy in a script variable). For the bypasses a payload can prove, the test first shows the
place is really dangerous: run as written with the value in the environment, real bash
runs the payload. Then the checker refuses the script at validation (with the line and a
suggestion) and at run time (an old saved version). Safe scripts and the peer's workflow
files, which use values bare, keep validating.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from recipes.loader import load_recipe
from runs.engine.shell_context import Context, unsafe_references
from runs.engine.variables import NodeOutput, VarContext, VariableError, substitute_shell

SUBSCRIPT = "a[$(touch CANARY)]"
UNSPLIT = "a[$(touch${IFS}CANARY)]"  # for places that split the value into words
COMMAND = "touch CANARY"

# (script, payload that makes as-written bash create CANARY, or None when none is shown)
BYPASSES = [
    ("x=abc; echo ${x:$USER_MESSAGE}", SUBSCRIPT),
    ("x=abc; echo ${x:1:$USER_MESSAGE}", SUBSCRIPT),
    ("a=(1 2); echo ${a[@]:$USER_MESSAGE}", SUBSCRIPT),
    ("if(($USER_MESSAGE>3)); then :; fi", SUBSCRIPT),
    ("while(($USER_MESSAGE)); do break; done", SUBSCRIPT),
    ("arr=([$USER_MESSAGE]=1)", SUBSCRIPT),
    ('printf -v "$USER_MESSAGE" %s 1', SUBSCRIPT),
    ('read "$USER_MESSAGE" <<< 1', SUBSCRIPT),
    ('declare "a[$USER_MESSAGE]=1"', None),
    ('test -v "$USER_MESSAGE"', SUBSCRIPT),
    ('[ -v "$USER_MESSAGE" ]', SUBSCRIPT),
    ("[[ -v $USER_MESSAGE ]]", SUBSCRIPT),
    ("declare -ai n=($USER_MESSAGE)", UNSPLIT),
    ("typeset -i n; n=$USER_MESSAGE", SUBSCRIPT),
    ('trap "echo $USER_MESSAGE" EXIT', "$(touch CANARY)"),
    ('bash -ec "echo $USER_MESSAGE"', "$(touch CANARY)"),
    ('bash -xc "echo $USER_MESSAGE"', "$(touch CANARY)"),
    ('/usr/bin/bash -c "echo $USER_MESSAGE"', "$(touch CANARY)"),
    ('timeout 5 bash -c "echo $USER_MESSAGE"', "$(touch CANARY)"),
    ('env -i PATH="$PATH" bash -c "echo $USER_MESSAGE"', "$(touch CANARY)"),
    ('echo x | xargs sh -c "echo $USER_MESSAGE"', "$(touch CANARY)"),
    ('\\eval "echo $USER_MESSAGE"', "$(touch CANARY)"),
    ("bash <<EOF\necho $USER_MESSAGE\nEOF", "$(touch CANARY)"),
    ("bash <<EOF\n  echo $USER_MESSAGE\nEOF", "$(touch CANARY)"),
    ('echo "$USER_MESSAGE" | bash', COMMAND),
    ('source <(echo "$USER_MESSAGE")', COMMAND),
    ("(( USER_MESSAGE > 3 ))", SUBSCRIPT),
    ("echo $(( ARGUMENTS ))", SUBSCRIPT),
    ("(( ${USER_MESSAGE} ))", SUBSCRIPT),
    ("[[ ${USER_MESSAGE} -eq 1 ]]", SUBSCRIPT),
    ('eval "${USER_MESSAGE}"', COMMAND),
    ("let x=USER_MESSAGE", SUBSCRIPT),
    ("x=$USER_MESSAGE; (( x > 1 ))", SUBSCRIPT),
    ('f() { eval "$1"; }; f "$USER_MESSAGE"', COMMAND),
    ('bash -c \'eval "$1"\' _ "$USER_MESSAGE"', COMMAND),
    ("printf '%s' \"$USER_MESSAGE\" | xargs -0 sh -c 'eval \"$1\"' _", COMMAND),
    ("PS4=$USER_MESSAGE; set -x; :", "$(touch CANARY)"),
    ("echo ${!USER_MESSAGE}", SUBSCRIPT),
    ("echo ${USER_MESSAGE@P}", "$(touch CANARY)"),
    ("python3 -c \"print('$USER_MESSAGE')\"", "'); __import__('os').system('touch CANARY'); ('"),
    ("$USER_MESSAGE", COMMAND),
    ('mapfile -C "$USER_MESSAGE" -c 1 arr <<< 1', COMMAND),
    ("declare -n r=$USER_MESSAGE; echo $r", SUBSCRIPT),
    ('a=(1); unset "a[$USER_MESSAGE]"', None),
    ("bash <<'EOF'\neval \"$USER_MESSAGE\"\nEOF", COMMAND),
    ('while read -r line; do eval "$line"; done <<< "$USER_MESSAGE"', COMMAND),
    ("for w in $USER_MESSAGE; do (( w )); done", UNSPLIT),
    ("cat <<EOF\n$(( $USER_MESSAGE ))\nEOF", SUBSCRIPT),
    ("env BASH_ENV=$ARTIFACTS_DIR/x bash -c :", None),
    ('alias a="$USER_MESSAGE"', None),
    ('sed "s/x/$USER_MESSAGE/" /dev/null', None),
    ("(( LOOP_V_1 ))", None),
    ("echo $(( $agent.output + 1 ))", None),
    ("[[ $INPUTS.count -gt 2 ]]", None),
    # a redirect of standard input spelled with its descriptor, 0 (the grammar misreads it)
    ('sh 0<<< "$USER_MESSAGE"', COMMAND),
    ('bash 0<<<"$USER_MESSAGE"', COMMAND),
    ("sh 0<<EOF\necho $USER_MESSAGE\nEOF", "$(touch CANARY)"),
    ("bash 0<<-EOF\n\techo $USER_MESSAGE\n\tEOF", "$(touch CANARY)"),
    ('bash 0< <(echo "$USER_MESSAGE")', COMMAND),
    ('python3 0<<< "$USER_MESSAGE"', "__import__('os').system('touch CANARY')"),
    ('exec 0<<< "$USER_MESSAGE"; bash', COMMAND),
    # programs whose arguments or input are code: make, SQL shells
    ('make -f /dev/null "$USER_MESSAGE"', "--eval=$(shell touch CANARY)"),
    ('timeout 60 make -C . "$agent.output"', None),
    ('echo "$USER_MESSAGE" | make -sf -', "all:;touch CANARY"),
    ('sqlite3 :memory: "$agent.output"', None),
    ('sqlite3 -cmd "$USER_MESSAGE" :memory: "select 1"', ".shell touch CANARY"),
    ('sqlite3 :memory: <<< "$USER_MESSAGE"', ".shell touch CANARY"),
    ('psql -c "$USER_MESSAGE"', None),
    # variables getopts (or `for x;`) fills from positional parameters holding a value
    ('x=$USER_MESSAGE; set -- -x "$x"; while getopts x: o; do eval "$OPTARG"; done', COMMAND),
    ('while getopts x: o "$USER_MESSAGE"; do eval "$OPTARG"; done', "-xtouch CANARY"),
    (
        'f() { local o OPTIND; while getopts x: o; do eval "$OPTARG"; done; }; f -x "$USER_MESSAGE"',
        COMMAND,
    ),
    ('set -- -x "$agent.output"; while builtin getopts x: o; do eval "$OPTARG"; done', None),
    ('set -- "$USER_MESSAGE"; for w; do eval "$w"; done', COMMAND),
]

SAFE_SCRIPTS = [
    'echo "Three steps to do for: $USER_MESSAGE"',
    "printf %s $USER_MESSAGE",
    'x=$agent.output; printf %s "$x"',
    "cat <<EOF\n[$USER_MESSAGE]\n  indented $USER_MESSAGE\nEOF",
    'printf %s "$(printf %s $USER_MESSAGE)"',
    '[ $USER_MESSAGE = "$USER_MESSAGE" ] && echo same',
    "[[ $USER_MESSAGE == $USER_MESSAGE ]] && echo same",
    'case $USER_MESSAGE in *) echo "$USER_MESSAGE";; esac',
    'echo "${USER_MESSAGE}" "${#USER_MESSAGE}"',
    '[ "$USER_MESSAGE" -gt 3 ] 2>/dev/null || echo small',
    "[[ $USER_MESSAGE =~ ^[0-9]+$ ]] && n=${BASH_REMATCH[0]} && (( n + 1 )) || true",
    'declare -A m; m[$USER_MESSAGE]=1; echo "${m[$USER_MESSAGE]}"',
    'bash -c \'printf "%s\\n" "$1"\' _ "$USER_MESSAGE"',
    "python3 -c 'import os; print(os.environ[\"USER_MESSAGE\"])'",
    "python3 -c 'import sys; print(sys.argv[1])' \"$USER_MESSAGE\"",
    "# a comment may say $USER_MESSAGE and (( USER_MESSAGE ))\necho ok",
    'echo "$(( 1 + 2 )) $USER_MESSAGE"',
    "for i in 1 2 3; do (( i > 1 )) && echo $i; done",
    'grep -c -- "$USER_MESSAGE" /dev/null || true',
    "awk -v m=\"$USER_MESSAGE\" 'BEGIN { print m }'",
    "$ARTIFACTS_DIR/../../bin/true 2>/dev/null || true",
    # programs that read a value as data, and commands the checker can name
    "python3 - <<'EOF'\nimport os\nprint(os.environ['USER_MESSAGE'])\nEOF",
    "node -e 'console.log(process.argv[1])' \"$USER_MESSAGE\"",
    "printf %s \"$USER_MESSAGE\" | python3 -c 'import sys; print(sys.stdin.read())'",
    "printf %s \"$USER_MESSAGE\" | perl -pe 's/a/b/'",
    '"$ARTIFACTS_DIR/../../bin/true" "$USER_MESSAGE" || true',
    'while IFS= read -r l; do printf "%s\\n" "$l"; done <<< "$USER_MESSAGE"',
    'echo "$USER_MESSAGE" | grep -c bash || true',
    'n=USER_MESSAGE; printf "%s\\n" "${!n}"',
    # a 0 that is no descriptor, and getopts over positional parameters without a value
    'echo "$(( 0<1 ))" "$USER_MESSAGE"; x=0; [[ $x<1 ]] && echo "a 0<b"',
    'while getopts x: o; do echo "$OPTARG"; done; printf %s "$USER_MESSAGE"',
    'set -- -x "$USER_MESSAGE"; while getopts x: o; do printf "%s\\n" "$OPTARG"; done',
    'make -C . -n -f /dev/null all 2>/dev/null || true; echo "$USER_MESSAGE" > msg.txt',
]


def _bash(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LC_ALL": "C.UTF-8", **env},
        capture_output=True,
        timeout=60,
    )


def _until_recipe(script: str) -> str:
    body = textwrap.indent(script, " " * 8)
    return (
        "name: probe\nprovider: demo\ninputs:\n  count: {type: number}\nnodes:\n"
        "  - id: agent\n    prompt: hi\n  - id: step\n    depends_on: [agent]\n"
        f"    loop:\n      prompt: go\n      max_iterations: 2\n      until_bash: |\n{body}\n"
    )


def _recipe(script: str) -> str:
    body = textwrap.indent(script, " " * 6)
    return (
        "name: probe\nprovider: demo\ninputs:\n  count: {type: number}\nnodes:\n"
        "  - id: agent\n    prompt: hi\n  - id: step\n    depends_on: [agent]\n"
        f"    bash: |\n{body}\n"
    )


@pytest.mark.parametrize("script,payload", BYPASSES, ids=[s for s, _ in BYPASSES])
def test_every_known_bypass_is_refused_at_validation_and_at_run_time(tmp_path, script, payload):
    if payload is not None:  # the place is really dangerous: bash runs the value as code
        proc = _bash(script, {"USER_MESSAGE": payload, "ARGUMENTS": payload}, tmp_path)
        assert (tmp_path / "CANARY").exists(), (script, proc.stderr)

    findings = unsafe_references(script)
    assert findings, script
    assert all(f.context not in (Context.BARE, Context.DQUOTE) for f in findings)

    source = _recipe(script)
    result = load_recipe(source)
    problems = [p for p in result.errors if "where no substitution is safe" in p.message]
    if not problems and result.ok:  # a workflow's bash step checks the value when it starts
        step = result.spec.node("step")
        hostile = VarContext(
            user_message=payload or COMMAND,
            inputs={"count": payload or COMMAND},
            node_outputs={"agent": NodeOutput(payload or COMMAND)},
            known_nodes=frozenset({"agent"}),
        )
        with pytest.raises(VariableError, match=r"^line \d+: .* not an integer"):
            substitute_shell(step.bash, hostile, step.start_checks)
        source = _until_recipe(script)  # where nothing checks it, it stays refused
        result = load_recipe(source)
        problems = [p for p in result.errors if "where no substitution is safe" in p.message]
    assert problems, (script, result.errors)
    first = problems[0]
    script_line = findings[0].line
    assert f"line {script_line} of the script" in first.message
    # the YAML line the problem points at is the script's own line
    assert (
        source.splitlines()[first.line - 1].strip() == script.splitlines()[script_line - 1].strip()
    )

    ctx = VarContext(
        user_message=payload or COMMAND, inputs={"count": 1}, known_nodes=frozenset({"agent"})
    )
    with pytest.raises(VariableError, match=rf"^line {script_line}: .* where no substitution"):
        substitute_shell(script, ctx)


@pytest.mark.parametrize(
    "script", ["make $INPUTS.target", 'make -C . "$INPUTS.target"', 'sqlite3 db "$agent.output"']
)
def test_make_and_sqlite3_are_refused_for_a_value_of_any_source(script):
    script = "echo first\n" + script
    [finding] = unsafe_references(script)
    assert (finding.line, finding.context) == (2, Context.EVAL)
    source = _recipe(script)
    [problem] = [p for p in load_recipe(source).errors if "where no substitution" in p.message]
    assert "line 2 of the script" in problem.message
    assert source.splitlines()[problem.line - 1].strip() == script.splitlines()[1]
    ctx = VarContext(
        inputs={"target": "all"},
        node_outputs={"agent": NodeOutput("select 1")},
        known_nodes=frozenset({"agent"}),
    )
    with pytest.raises(VariableError, match=r"^line 2: .* where no substitution"):
        substitute_shell(script, ctx)


@pytest.mark.parametrize("script", SAFE_SCRIPTS)
def test_safe_scripts_validate_and_deliver_the_value_as_data(tmp_path, script):
    assert unsafe_references(script) == [], script
    assert load_recipe(_recipe(script)).ok
    payload = "a[$(touch CANARY)] `touch CANARY` ; touch CANARY"
    ctx = VarContext(user_message=payload, artifacts_dir=str(tmp_path), known_nodes={"agent"})
    rendered, env = substitute_shell(script, ctx)
    _bash(rendered, {"USER_MESSAGE": payload, **env}, tmp_path)
    assert not (tmp_path / "CANARY").exists(), rendered


def test_refusal_names_the_place_and_says_what_to_write():
    [finding] = unsafe_references("echo ok\n(( USER_MESSAGE > 3 ))")
    assert finding.line == 2 and finding.context is Context.ARITH
    assert '[ "USER_MESSAGE" -gt 3 ]' in finding.explanation
    [finding] = unsafe_references('bash -c "echo $USER_MESSAGE"')
    assert "bash -c 'printf" in finding.explanation


def test_a_script_the_parser_cannot_read_is_refused_only_when_it_uses_a_value():
    broken = "if then fi (\n"
    assert unsafe_references(broken) == []
    [finding] = unsafe_references(broken + "echo $USER_MESSAGE")
    assert finding.context is Context.UNPARSED
    assert "stops parsing as bash at line 1" in finding.explanation


PEER_WORKFLOWS = sorted((Path(__file__).parent / "peer_workflows").glob("*.yaml"))


@pytest.mark.parametrize("path", PEER_WORKFLOWS, ids=[p.stem for p in PEER_WORKFLOWS])
def test_peer_style_workflows_with_bare_references_keep_validating(path):
    result = load_recipe(path.read_text())
    assert result.ok, result.errors
    assert not [w for w in result.warnings if "substitution" in w.message]


def test_a_command_providers_command_is_checked_like_a_script():
    source = (
        "name: p\nproviders:\n  agent:\n    kind: command\n"
        "    command: 'eval \"$USER_MESSAGE\"'\n"
        "nodes:\n  - id: a\n    provider: agent\n    prompt: hi\n"
    )
    result = load_recipe(source)
    [problem] = [p for p in result.errors if "where no substitution is safe" in p.message]
    assert problem.line == 5 and "provider 'agent'" in problem.message
    fine = source.replace('eval "$USER_MESSAGE"', 'cat; echo "$USER_MESSAGE"')
    assert load_recipe(fine).ok


BUILTIN = sorted((Path(__file__).parents[2] / "recipes" / "builtin").glob("*.yaml"))


@pytest.mark.parametrize("path", BUILTIN, ids=[p.stem for p in BUILTIN])
def test_bundled_recipes_are_examples_worth_copying(path):
    """Every value a bundled recipe hands to bash is quoted, and none is refused."""
    from recipes.shell_parts import shell_parts
    from runs.engine.shell_context import plan, reference_spans

    result = load_recipe(path.read_text())
    assert result.ok, result.errors
    for where, script in shell_parts(result).items():
        if where.startswith("providers."):
            continue
        contexts, findings = plan(script, reference_spans(script))
        assert not findings, (where, findings)
        assert all(c in (Context.DQUOTE, Context.HEREDOC) for c in contexts), (where, contexts)


@pytest.mark.django_db
def test_an_admin_providers_command_is_checked_in_the_form_and_before_each_call(tmp_path):
    from django.core.exceptions import ValidationError

    from runs.models import ProviderConfig
    from runs.providers.base import AgentRequest, ProviderError
    from runs.providers.command import CommandProvider

    row = ProviderConfig(name="evil", kind="command", command='eval "$USER_MESSAGE"')
    with pytest.raises(ValidationError, match="text run as code"):
        row.full_clean()
    request = AgentRequest(
        prompt="hi", workdir=str(tmp_path), env={"USER_MESSAGE": f"touch {tmp_path}/CANARY"}
    )
    with pytest.raises(ProviderError, match="line 1: .*text run as code"):
        CommandProvider("evil", 'eval "$USER_MESSAGE"').run(request, lambda chunk: None)
    assert not (tmp_path / "CANARY").exists()
