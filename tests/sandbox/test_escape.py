"""The escape corpus: a bash step, a command agent and a CLI-shaped agent each try to steal
the worker's secrets, read or see another run, use another run's tool socket with its
stolen token, and signal the worker — through a real worker, in the real sandbox.

Every attempt must fail, and each probe proves it ran (it finds its own file and its own
process). Meanwhile another run (the victim: a step-machine role whose agent holds its
tool channel open) is running, so there is something to find."""

from __future__ import annotations

import json
import shlex
import stat
from pathlib import Path

import pytest

from loops.stepmachine.models import Handoff
from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Iteration, NodeRun, ProviderConfig
from tests.agent_process import processes_in
from tests.conftest import wait_for, wait_run
from tests.sandbox.conftest import call_folder_of, probe_preamble, requires_sandbox

pytestmark = requires_sandbox
PROBE = (Path(__file__).with_name("escape_probe.sh")).read_text()
VICTIM_MARKER = "VICTIM-RUN-MARKER"
BUSY = ("pending", "running")

VICTIM = """
schema: planeai.loop.recipe.v1
id: victim
name: victim
roles:
  holder: {provider: victim-agent, mode: write, isolation: project}
steps:
  - {id: start, kind: session.create, role: holder, prompt: "hold the channel"}
  - {id: wait, kind: handoff.wait, from: holder, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""
# The victim agent: a secret in its folder, then it holds its tool channel open until the
# test lets it go, and hands off for itself (its own channel still works).
VICTIM_COMMAND = (
    "echo OTHER-RUN-SECRET > secret.txt; "
    "while [ ! -f release ]; do sleep 0.1; done; "
    f"$LOOP_HANDOFF_CMD --status completed --summary own  # {VICTIM_MARKER}"
)


@pytest.fixture
def victim(escape_worker, plane_recipe, operator):
    """A running step-machine run whose agent holds its tool channel; yields what a thief
    would want from it: its folder, its socket and the token stolen from its call folder."""
    ProviderConfig.objects.create(name="victim-agent", kind="command", command=VICTIM_COMMAND)
    run = services.start_run(plane_recipe(VICTIM), actor=Actor.operator(operator, "console"))
    workdir = Path(_wait_agent_folder(run))
    wait_for(lambda: (workdir / "secret.txt").exists(), message="the victim's secret")
    # The victim's agent is visible from this machine: a probe not seeing it means something.
    assert processes_in(workdir)
    folder = Path(wait_for(lambda: call_folder_of(workdir), message="the victim's call folder"))
    stolen = (folder / "token").read_text()
    assert stat.S_ISSOCK((folder / "s").stat().st_mode)
    yield {"run": run, "workdir": workdir, "socket": str(folder / "s"), "token": stolen}
    (workdir / "release").touch()
    wait_for(lambda: run.handoffs.exists() or _refreshed(run).is_terminal, message="victim")


def _refreshed(run):
    run.refresh_from_db()
    return run


def _wait_agent_folder(run) -> str:
    try:
        return wait_for(lambda: _agent_folder(run), message="the agent to start")
    except AssertionError as exc:
        run.refresh_from_db()
        rows = [(n.node_id, n.status, n.state) for n in NodeRun.objects.filter(run=run)]
        raise AssertionError(f"{exc}: run {run.pk} {run.status} {run.error!r} {rows}") from None


def _agent_folder(run) -> str:
    row = NodeRun.objects.filter(run=run, kind="session").first()
    if row is None or not row.state.get("workdir"):
        return ""
    return row.state["workdir"] if Iteration.objects.filter(run=run).exists() else ""


def probe_script(worker, victim) -> str:
    other_run = str(Path(victim["workdir"]).parent)
    preamble = probe_preamble(
        worker,
        other_run=other_run,
        other_marker=VICTIM_MARKER,
        victim_socket=victim["socket"],
        token=victim["token"],
    )
    return preamble + PROBE


def assert_nothing_escaped(output: str) -> None:
    assert "OK own-file" in output and "OK own-process" in output, output
    assert "probe done" in output, output
    leaks = [line for line in output.splitlines() if line.startswith("LEAK")]
    assert leaks == [], "\n".join(leaks)


def _indented(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" for line in text.splitlines())


def test_a_bash_step_cannot_escape(escape_worker, victim, make_recipe):
    source = "name: escape-bash\nnodes:\n  - id: probe\n    bash: |\n"
    source += _indented(probe_script(escape_worker, victim), 6)
    run = services.start_run(make_recipe(source, slug="escape-bash"), actor=ENGINE)
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert_nothing_escaped(run.nodes.get(node_id="probe").output)
    assert not victim["run"].handoffs.exists()


def test_a_command_agent_cannot_escape(escape_worker, victim, make_recipe, tmp_path):
    probe = tmp_path / "agent" / "probe.sh"
    probe.parent.mkdir()
    probe.write_text(probe_script(escape_worker, victim) + "echo COMPLETE\n")
    source = f"""
name: escape-command
providers:
  thief: {{kind: command, command: "bash {probe}"}}
nodes:
  - id: agent
    provider: thief
    loop: {{prompt: "steal", until: COMPLETE, max_iterations: 1}}
"""
    run = services.start_run(make_recipe(source, slug="escape-command"), actor=ENGINE)
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert_nothing_escaped(Iteration.objects.get(run=run).output)
    assert not victim["run"].handoffs.exists()


CLI = '''#!/usr/bin/env python3
"""A CLI-shaped agent (Claude Code's stream-json): it runs the probe from its own folder."""
import json, subprocess, sys
from pathlib import Path

sys.stdin.read()
done = subprocess.run(["bash", str(Path(__file__).with_name("probe.sh"))],
                      capture_output=True, text=True)
text = done.stdout + done.stderr + "\\nCOMPLETE"
for event in (
    {"type": "system", "subtype": "init", "session_id": "s1"},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}},
    {"type": "result", "result": text, "session_id": "s1", "usage": {}, "is_error": False},
):
    print(json.dumps(event), flush=True)
'''


def test_a_cli_agent_cannot_escape(escape_worker, victim, make_recipe, tmp_path):
    folder = tmp_path / "cli"
    folder.mkdir()
    (folder / "probe.sh").write_text(probe_script(escape_worker, victim))
    program = folder / "thief-cli"
    program.write_text(CLI)
    program.chmod(0o755)
    source = f"""
name: escape-cli
providers:
  thief: {{kind: claude, command: {json.dumps(str(program))}}}
nodes:
  - id: agent
    provider: thief
    loop: {{prompt: "steal", until: COMPLETE, max_iterations: 1}}
"""
    run = services.start_run(make_recipe(source, slug="escape-cli"), actor=ENGINE)
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert_nothing_escaped(Iteration.objects.get(run=run).output)
    assert not victim["run"].handoffs.exists()


PEER = """
schema: planeai.loop.recipe.v1
id: peer-{name}
name: peer {name}
roles:
  agent: {{provider: peer-agent, mode: write, isolation: project}}
steps:
  - {{id: start, kind: session.create, role: agent, prompt: "look around"}}
  - {{id: wait, kind: handoff.wait, from: agent, on: {{completed: done}}}}
  - {{id: done, kind: loop.status, status: approved}}
"""
# Both agents say they are ready and wait; then each looks for the other (its run's values
# in any process's environment, its folder, its socket with its stolen token), and hands
# off for itself.
PEER_AGENT = r"""
touch ready
while [ ! -f go ]; do sleep 0.1; done
. ./other.env
for entry in /proc/[0-9]*; do
  tr '\0' '\n' < $entry/environ 2>/dev/null | grep -qx "WORKFLOW_ID=$OTHER_ID" && echo "LEAK sees the other agent: $entry"
done
tr '\0' '\n' < /proc/$$/environ | grep -qx "WORKFLOW_ID=$WORKFLOW_ID" && echo "OK own-process"
[ -f ready ] && echo "OK own-file"
ls "$OTHER_FOLDER" >/dev/null 2>&1 && echo "LEAK the other run's folder"
python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$OTHER_SOCKET" 2>/dev/null && echo "LEAK the other run's socket"
echo "probe done"
$LOOP_HANDOFF_CMD --status completed --summary own
"""


def test_two_agents_running_at_once_cannot_see_each_other(escape_worker, plane_recipe, operator):
    ProviderConfig.objects.create(name="peer-agent", kind="command", command=PEER_AGENT)
    runs = [
        services.start_run(
            plane_recipe(PEER.format(name=n)), actor=Actor.operator(operator, "console")
        )
        for n in "ab"
    ]
    folders = [Path(_wait_agent_folder(r)) for r in runs]
    for run, folder in zip(runs, folders, strict=True):
        try:
            wait_for(lambda f=folder: (f / "ready").exists(), message="both agents ready")
        except AssertionError as exc:
            turns = [
                (t.status, t.error, t.output[-500:]) for t in Iteration.objects.filter(run=run)
            ]
            raise AssertionError(f"{exc}: run {run.pk} {_refreshed(run).status} {turns}") from None
    calls = [Path(wait_for(lambda f=f: call_folder_of(f), message="a call")) for f in folders]
    for me, other in ((0, 1), (1, 0)):
        (folders[me] / "other.env").write_text(
            f"OTHER_ID={runs[other].pk}\n"
            f"OTHER_FOLDER={shlex.quote(str(folders[other]))}\n"
            f"OTHER_SOCKET={shlex.quote(str(calls[other] / 's'))}\n"
        )
    for folder in folders:
        (folder / "go").touch()
    for run in runs:
        wait_run(run, "failed", "cancelled", "completed")
    for run in runs:
        assert run.status_word == "approved", run.error
        # The handoff ends the run while its turn is still finishing: wait for the turn.
        wait_for(
            lambda r=run: not Iteration.objects.filter(run=r, status__in=BUSY).exists(),
            message="the turn to finish",
        )
        (turn,) = Iteration.objects.filter(run=run)
        assert_nothing_escaped(turn.output)
        (handoff,) = Handoff.objects.filter(run=run)
        assert handoff.summary == "own" and handoff.recorded_by_name == "the agent agent"


def test_the_sandbox_is_what_started_them(escape_worker, make_recipe):
    """The worker says so in its log, and no run logs that it ran unsandboxed."""
    run = services.start_run(
        make_recipe("name: t\nnodes:\n  - id: a\n    bash: echo hi\n", slug="said"), actor=ENGINE
    )
    wait_run(run, "completed", "failed")
    assert not run.events.filter(kind="sandbox_off").exists()
    assert "run sandboxed (bubblewrap" in escape_worker.log_path.read_text()


def test_a_value_run_where_the_checker_cannot_see_is_contained(escape_worker, victim, make_recipe):
    """The checker is a lint: a script that writes a value to a file and sources it is only
    warned about. The value (an operator's message: here, the whole probe) then runs as
    code, inside the sandbox, and finds nothing."""
    source = (
        "name: sources-a-value\nnodes:\n  - id: probe\n"
        "    bash: |\n      printf '%s\\n' \"$USER_MESSAGE\" > given.sh\n      . ./given.sh\n"
    )
    recipe = make_recipe(source, slug="sources-a-value")
    run = services.start_run(recipe, actor=ENGINE, message=probe_script(escape_worker, victim))
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert_nothing_escaped(run.nodes.get(node_id="probe").output)
