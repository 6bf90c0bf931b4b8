"""Every refusal docs/security.md lists, proven in real bash and checked at both times.

The tables under "What reaches a shell" are the list a reader checks; this file reads them,
so a row cannot be added to the page without its proof, nor a place refused in silence
here. For each row of "Refused: places where a value runs as code", real bash runs the
example as written with the payload in USER_MESSAGE and creates the canary (the place is
really dangerous); then the checker refuses the example when a recipe is validated (the
YAML line is the script's line, and the message names it) and when an old saved script
runs. The rows of the second table are refused the same way without a payload. The
warnings (a value that could pose as an option, a value written to a file that then runs)
are proven dangerous in bash too, and come with their line while the recipe stays valid.
"""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from recipes.loader import load_recipe
from runs.engine.shell_context import check_script, unsafe_references
from runs.engine.variables import VarContext, VariableError, substitute_shell

DOCS = Path(__file__).parents[2] / "docs" / "security.md"
RUNS_HEADING = "### Refused: places where a value runs as code"
OTHER_HEADING = "### Refused: places where the value would not arrive, or the checker cannot tell"
REFUSED = "where no substitution is safe"


def _section(heading: str) -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(heading) + len(heading)
    end = text.find("\n#", start)
    return text[start : end if end > 0 else len(text)]


def _code(cell: str) -> str:
    found = re.fullmatch(r"`(.*)`", cell)
    assert found, f"not a code span: {cell!r}"
    return found.group(1).replace("\\|", "|").replace("⏎", "\n")


def _rows(heading: str) -> list[list[str]]:
    rows = []
    for line in _section(heading).splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows[1:]  # the header


REWRITTEN_HEADING = "### Rewritten when a workflow loads: a value in literal text"
RUNS = [(place, _code(example), _code(payload)) for place, example, payload in _rows(RUNS_HEADING)]
OTHERS = [(place, _code(example)) for place, example in _rows(OTHER_HEADING)]
REWRITTEN = [(place, _code(a), _code(b)) for place, a, b in _rows(REWRITTEN_HEADING)]
HOSTILE = ["'; touch CANARY; '", "$(touch CANARY)", "`touch CANARY`", "EOF\ntouch CANARY\nEOF"]


def _bash(script: str, payload: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": str(cwd),
        "SHELL": "/bin/bash",
        "LC_ALL": "C.UTF-8",
        "USER_MESSAGE": payload,
        "ARGUMENTS": payload,
    }
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )


def _recipe(script: str) -> str:
    body = textwrap.indent(script, " " * 6)
    return f"name: probe\nprovider: demo\nnodes:\n  - id: step\n    bash: |\n{body}\n"


def _until_recipe(script: str) -> str:
    body = textwrap.indent(script, " " * 8)
    return (
        "name: probe\nprovider: demo\nnodes:\n  - id: step\n    loop:\n      prompt: go\n"
        f"      max_iterations: 2\n      until_bash: |\n{body}\n"
    )


def _assert_checked_at_start(script: str, node, line: int) -> None:
    """The place is a start check: a value that is not an integer fails the step before
    anything runs, naming its source; an integer runs."""
    assert node.start_checks and {c["line"] for c in node.start_checks} == {line}, node
    with pytest.raises(VariableError, match=rf"^line {line}: .*the run's message.* not an integer"):
        substitute_shell(
            node.bash, VarContext(user_message="a[$(touch CANARY)]"), node.start_checks
        )
    substitute_shell(node.bash, VarContext(user_message="42"), node.start_checks)


def _value_line(script: str) -> int:
    return script[: script.index("USER_MESSAGE")].count("\n") + 1


def _assert_refused(script: str) -> None:
    line = _value_line(script)
    findings = unsafe_references(script)
    assert findings and findings[0].line == line, (script, findings)

    source = _recipe(script)
    result = load_recipe(source)
    problems = [p for p in result.errors if REFUSED in p.message]
    if not problems and result.ok:  # a workflow's bash step checks the value when it starts
        _assert_checked_at_start(script, result.spec.node("step"), line)
        source = _until_recipe(script)  # where nothing checks it, it stays refused
        result = load_recipe(source)
        problems = [p for p in result.errors if REFUSED in p.message]
    assert problems, (script, result.errors)
    assert f"line {line} of the script" in problems[0].message
    shown = source.splitlines()[problems[0].line - 1].strip()
    assert shown == script.splitlines()[line - 1].strip()

    with pytest.raises(VariableError, match=rf"^line {line}: .*{REFUSED}"):
        substitute_shell(script, VarContext(user_message="touch CANARY"))


def test_the_docs_list_the_places():
    assert len(RUNS) >= 60 and len(OTHERS) >= 7 and len(REWRITTEN) >= 3
    examples = [example for _, example, _ in RUNS] + [example for _, example in OTHERS]
    assert len(set(examples)) == len(examples), "an example is listed twice"


@pytest.mark.parametrize("place,script,payload", RUNS, ids=[r[0] for r in RUNS])
def test_each_listed_place_runs_a_value_in_bash_and_is_refused(tmp_path, place, script, payload):
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    canary = tmp_path / "CANARY"
    as_run = script.replace("CANARY", str(canary))
    proc = _bash(as_run, payload.replace("CANARY", str(canary)), work)
    assert canary.exists(), (place, script, proc.stdout, proc.stderr)
    _assert_refused(script)


@pytest.mark.parametrize("place,script", OTHERS, ids=[r[0] for r in OTHERS])
def test_each_listed_place_without_a_payload_is_refused(place, script):
    _assert_refused(script)


@pytest.mark.parametrize("place,written,rewritten", REWRITTEN, ids=[r[0] for r in REWRITTEN])
def test_each_rewritten_place_loads_rewritten_and_keeps_values_data(
    tmp_path, place, written, rewritten
):
    result = load_recipe(_recipe(written))
    assert result.ok, result.errors
    assert result.spec.node("step").bash.rstrip("\n") == rewritten
    # Where nothing rewrites it (a command provider, a gate command), it stays refused.
    with pytest.raises(VariableError, match=REFUSED):
        substitute_shell(written, VarContext(user_message="x"))
    for number, payload in enumerate(HOSTILE):
        work = tmp_path / str(number)
        work.mkdir()
        script, env = substitute_shell(rewritten, VarContext(user_message=payload))
        proc = subprocess.run(
            ["bash", "-c", script + "\n[ ! -f f.sh ] || bash f.sh"],
            cwd=work,
            env={"PATH": "/usr/bin:/bin", "HOME": str(work), "USER_MESSAGE": payload, **env},
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert payload in proc.stdout.decode(), (script, proc.stdout)
        assert not (work / "CANARY").exists(), payload


def _table_cases() -> list[tuple[str, str]]:
    """(table entry, a script using it with a value) for every entry of the code tables the
    docs name: each must be refused, not only the row's example."""
    from runs.engine.shell_commands import ARGUMENT_RUNNERS, INTERPRETERS, SHELLS
    from runs.engine.shell_names import CODE_VARIABLES
    from runs.engine.shell_options import PLUS_COMMANDS, RUN_OPTIONS
    from runs.engine.shell_programs import _LANGUAGES
    from runs.engine.shell_stdin import STDIN_RUNNERS
    from runs.engine.shell_wrappers import SHELL_HANDOFF, WRAPPERS

    cases = []
    for name, (_, operands) in WRAPPERS.items():
        filler = " x" * operands
        cases.append((f"wrapper {name}", f'{name}{filler} bash -c "echo $USER_MESSAGE"'))
    cases += [(f"shell {n}", f'{n} -c "echo $USER_MESSAGE"') for n in sorted(SHELLS)]
    cases += [(f"handoff {n}", f'{n} x "$USER_MESSAGE"') for n in sorted(SHELL_HANDOFF)]
    cases += [(f"arguments of {n}", f'{n} x "$USER_MESSAGE"') for n in sorted(ARGUMENT_RUNNERS)]
    cases += [(f"input of {n}", f'echo "$USER_MESSAGE" | {n}') for n in sorted(STDIN_RUNNERS)]
    for program, language in _LANGUAGES.items():
        if language in INTERPRETERS:
            option = sorted(INTERPRETERS[language])[0]
            cases.append((f"program {program}", f'{program} {option} "x $USER_MESSAGE"'))
    for program, options in RUN_OPTIONS.items():
        for option in sorted(options):
            cases.append((f"{program} {option}", f'{program} {option} "$USER_MESSAGE" x'))
    cases += [(f"{n} +CMD", f'{n} +"$USER_MESSAGE" f') for n in sorted(PLUS_COMMANDS)]
    cases += [(f"variable {n}", f"{n}=$USER_MESSAGE") for n in sorted(CODE_VARIABLES)]
    return cases


@pytest.mark.parametrize("entry,script", _table_cases(), ids=[c[0] for c in _table_cases()])
def test_every_entry_of_the_tables_the_docs_name_is_refused(entry, script):
    _assert_refused(script)


# (script with the value on its second line, payload, the same script made safe)
OPTION_WARNINGS = [
    (
        'cd "$HOME"\ngit ls-remote "$USER_MESSAGE" x',
        "--upload-pack=touch CANARY;:",
        'cd "$HOME"\ngit ls-remote --end-of-options "$USER_MESSAGE" x',
    ),
    (
        'cd "$HOME"\ntar -cf /dev/null --checkpoint=1 "$USER_MESSAGE" /etc/hostname',
        "--checkpoint-action=exec=touch CANARY",
        'cd "$HOME"\ntar -cf /dev/null --checkpoint=1 -- "$USER_MESSAGE" /etc/hostname',
    ),
]
FILE_WARNINGS = [
    ('echo "$USER_MESSAGE" > f\n. ./f', "touch CANARY", 'echo "$USER_MESSAGE" > f\ncat f'),
    (
        "cat > run.sh <<EOF\necho $USER_MESSAGE\nEOF\nbash run.sh",
        "$(touch CANARY)",
        "cat > notes.txt <<EOF\necho $USER_MESSAGE\nEOF\nbash -n /dev/null",
    ),
]


def _warnings(script: str) -> list:
    source = _recipe(script)
    result = load_recipe(source)
    assert result.ok, result.errors
    return result.warnings


@pytest.mark.parametrize("script,payload,safe", OPTION_WARNINGS + FILE_WARNINGS)
def test_warned_places_run_a_value_in_bash_and_are_warned_with_their_line(
    tmp_path, script, payload, safe
):
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    canary = tmp_path / "CANARY"
    _bash(script, payload.replace("CANARY", str(canary)), work)
    assert canary.exists(), script
    canary.unlink()

    findings, notices = check_script(script)
    assert not findings
    [notice] = notices
    line = 2 if script in [s for s, _, _ in OPTION_WARNINGS] else script.count("\n") + 1
    assert notice.line == line, notice
    [warning] = _warnings(script)
    assert f"line {line} of the script" in warning.message
    assert "substitution" not in warning.message
    source = _recipe(script)
    shown = source.splitlines()[warning.line - 1].strip()
    assert shown == script.splitlines()[line - 1].strip()
    substitute_shell(script, VarContext(user_message=payload))  # a warning does not refuse

    _bash(safe, payload.replace("CANARY", str(canary)), work)
    assert not canary.exists(), safe
    assert check_script(safe) == ([], [])


def test_the_option_warning_says_what_to_write():
    [notice] = check_script('x=$USER_MESSAGE\nfind "$x" -type f')[1]
    assert notice.line == 2 and "-- does not help find" in notice.explanation
    [notice] = check_script('git ls-remote "$INPUTS.repo"')[1]
    assert notice.text == "$INPUTS.repo"
    assert 'write --end-of-options before it: git ... --end-of-options "$INPUTS.repo"' in (
        notice.explanation
    )
    [notice] = check_script('curl -fsSL "$agent.output"')[1]
    assert 'write -- before it: curl ... -- "$agent.output"' in notice.explanation


@pytest.mark.parametrize(
    "script",
    [
        'git commit -m "$USER_MESSAGE"',
        'git log --oneline -- "$USER_MESSAGE"',
        'git checkout -b "feature/$USER_MESSAGE"',
        'curl -sS -o out.json --data "$USER_MESSAGE" https://example.test/x',
        'tar -czf "$USER_MESSAGE.tgz" -C dir .',
        'find . -name "$USER_MESSAGE"',
        'echo "$USER_MESSAGE" > "$ARTIFACTS_DIR/message.txt"\n./scripts/build.sh',
        'printf %s "$USER_MESSAGE" | tee notes.txt\nbash -n /dev/null',
    ],
)
def test_ordinary_scripts_get_no_warning(script):
    assert check_script(script) == ([], []), script


GATE_RECIPE = """\
schema: planeai.loop.recipe.v1
id: gate-probe
roles:
  maker: {provider: demo, mode: write}
steps:
  - id: check
    kind: gates.run
    role: maker
    gates:
      - name: b
        command: |
          echo first
          cat <<EOF | bash
          echo {{ runtime.last_error }}
          EOF
    on: {pass: done}
  - id: done
    kind: loop.status
    status: approved
"""


def test_a_gate_command_feeding_a_heredoc_to_a_shell_is_refused_with_its_line():
    result = load_recipe(GATE_RECIPE)
    problems = [p for p in result.errors if REFUSED in p.message]
    assert problems, result.errors
    assert "line 3 of the command" in problems[0].message
    shown = GATE_RECIPE.splitlines()[problems[0].line - 1].strip()
    assert shown == "echo {{ runtime.last_error }}"


def test_a_gate_command_handing_a_value_to_git_is_warned_with_its_line():
    source = GATE_RECIPE.replace("cat <<EOF | bash\n", "").replace(
        "          echo {{ runtime.last_error }}\n          EOF\n",
        "          git ls-remote {{ inputs.repo }} main\n",
    )
    result = load_recipe(source)
    assert not [p for p in result.errors if REFUSED in p.message], result.errors
    [warning] = [w for w in result.warnings if "is an argument of git" in w.message]
    assert "line 2 of the command" in warning.message
    assert "git ... --end-of-options" in warning.message
    assert source.splitlines()[warning.line - 1].strip().startswith("git ls-remote")
