"""`gates.run`: the recipe's own check commands, run in order until one fails.

Only commands written in the recipe run: each is a template of recipe text, rendered with
every value it prints kept in the environment (`templates.render_command`). Nothing an
agent or a handoff says can add a command. The output streams into the `steps` node while
the commands run (renewing its lease), is kept whole in the run's artifacts, and, cut to
100 KB with the log's path, becomes `runtime.last_error` when a gate does not pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runs.executor.spec import spec_for
from runs.executor.stream import OutputStream
from runs.models import NodeRun
from runs.sandbox import SandboxUnavailable, for_run, limits_of, run_process, step_network

from .context import base_env, run_folders
from .templates import Command, RenderError, render_command

OUTPUT_LIMIT = 100 * 1024
COMMAND_TIMEOUT_SECONDS = 3600
NOT_RUNNABLE = (126, 127)


@dataclass
class GateResult:
    result: str  # pass / fail / error
    output: str  # for runtime.last_error: cut at OUTPUT_LIMIT, with the log's path
    log_path: str
    results: list[dict]


def prepare(step, context: dict) -> list[tuple[str, Command]]:
    """Render every command before any runs, so a template error runs nothing."""
    commands = []
    for gate in step.gates:
        try:
            commands.append((gate.name, render_command(gate.command, context)))
        except RenderError as exc:
            raise RenderError(f"gate {gate.name!r}: {exc}") from None
    return commands


def log_path(run, step_id: str, tick: int) -> Path:
    _, artifacts = run_folders(run)
    folder = artifacts / "gates"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{step_id}-tick{tick}.log"


def execute(run, row: NodeRun, attempt: int, step, commands, *, workdir: str, tick: int):
    """Run the commands (outside any transaction). Raises Cancelled if the run was stopped
    or the sweep took the machine back meanwhile."""
    path = log_path(run, step.id, tick)
    stream = OutputStream(NodeRun, row.pk, attempt, run.pk, field="output")
    env = base_env(run, step.role or "")
    spec = spec_for(run)
    sandbox = for_run(
        run.pk, workdir, network=step_network(spec.network), limits=limits_of(spec.limits)
    )
    results: list[dict] = []
    verdict = "pass"
    with open(path, "w", encoding="utf-8") as log:

        def say(text: str) -> None:
            log.write(text)
            stream(text)

        for name, command in commands:
            say(f"$ {command.shown}\n")
            try:
                if command.argv is not None:
                    outcome = run_process(
                        command.argv,
                        sandbox=sandbox,
                        env=env,
                        on_chunk=say,
                        timeout=COMMAND_TIMEOUT_SECONDS,
                    )
                else:
                    outcome = run_process(
                        ["bash", "-c", command.script],
                        sandbox=sandbox,
                        env={**env, **(command.env or {})},
                        on_chunk=say,
                        timeout=COMMAND_TIMEOUT_SECONDS,
                    )
            except (OSError, SandboxUnavailable) as exc:
                say(f"[gate {name}: cannot start: {exc}]\n")
                results.append({"name": name, "exit_code": None, "result": "error"})
                verdict = "error"
                break
            if outcome.timed_out:
                say(f"[gate {name}: stopped after {COMMAND_TIMEOUT_SECONDS} s]\n")
                verdict = "error"
            elif outcome.exit_code in NOT_RUNNABLE:
                verdict = "error"
            elif outcome.exit_code != 0:
                verdict = "fail"
            results.append({"name": name, "exit_code": outcome.exit_code, "result": verdict})
            say(f"[gate {name}: exit {outcome.exit_code}]\n")
            if verdict != "pass":
                break
    stream.flush()
    stream.close()
    return GateResult(verdict, cut(path), str(path), results)


def cut(path: Path) -> str:
    """The log's end, read from the file (a long log is never read whole), its line
    breaks as a text read gives them (`\r` and `\r\n` become `\n`)."""
    with open(path, "rb") as log:
        size = log.seek(0, 2)
        log.seek(max(0, size - OUTPUT_LIMIT))
        data = log.read()
    if size <= OUTPUT_LIMIT:
        return _lines(data.decode("utf-8", errors="replace"))
    # The end of a test run says what failed: keep that, and say where the rest is.
    kept = _lines(data.decode("utf-8", errors="ignore"))
    return kept + f"\n[output truncated to its last 100 KB; full log: {path}]"


def _lines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")
