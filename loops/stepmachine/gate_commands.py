"""`gates.run`: the recipe's own check commands, run in order until one fails.

Only commands written in the recipe run: each is a template of recipe text, rendered with
every value it prints kept in the environment (`rendering.render_command`). Nothing an
agent or a handoff says can add a command. The output streams into the `steps` node while
the commands run (renewing its lease), is kept whole in the run's data folder
(`runs/<id>/gates/`, out of every sandbox's reach), and, cut to 100 KB with the log's path,
becomes `runtime.last_error` when a gate does not pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runs.executor.spec import spec_for
from runs.executor.stream import OutputStream
from runs.models import NodeRun
from runs.sandbox import (
    SandboxUnavailable,
    files,
    for_run,
    limits_of,
    run_folder,
    run_process,
    step_network,
)

from .context import base_env
from .rendering import Command, RenderError, render_command

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


def log_folder(run_id: int) -> Path:
    """Where a run's gate logs live: its data folder, which no sandbox mounts. In the
    artifacts folder a gate command could swap its own log for a link to a secret, which
    the console would then read back into the next prompt and the review page."""
    return run_folder(run_id) / "gates"


def log_path(run, step_id: str, tick: int) -> Path:
    return log_folder(run.pk) / f"{step_id}-tick{tick}.log"


def execute(run, row: NodeRun, attempt: int, step, commands, *, workdir: str, tick: int):
    """Run the commands (outside any transaction). Raises Cancelled if the run was stopped
    or the sweep took the machine back meanwhile."""
    path = log_path(run, step.id, tick)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    stream = OutputStream(NodeRun, row.pk, attempt, run.pk, field="output")
    env = base_env(run, step.role or "")
    spec = spec_for(run)
    sandbox = for_run(
        run.pk, workdir, network=step_network(spec.network), limits=limits_of(spec.limits)
    )
    # Written and read back through one descriptor: the log is never looked up again.
    with files.create_file(path.parent, path.name) as log:

        def say(text: str) -> None:
            log.write(text.encode("utf-8", "replace"))
            stream(text)

        verdict, results = _run_all(commands, sandbox, env, say)
        output = cut(files.read_open(log, limit=OUTPUT_LIMIT, end=True), path)
    stream.flush()
    stream.close()
    return GateResult(verdict, output, str(path), results)


def _run_all(commands, sandbox, env: dict, say) -> tuple[str, list[dict]]:
    """Each command in turn until one does not pass: the verdict and each one's result."""
    results: list[dict] = []
    verdict = "pass"
    for name, command in commands:
        say(f"$ {command.shown}\n")
        try:
            if command.argv is not None:
                argv, command_env = command.argv, env
            else:
                argv, command_env = ["bash", "-c", command.script], {**env, **(command.env or {})}
            outcome = run_process(
                argv,
                sandbox=sandbox,
                env=command_env,
                on_chunk=say,
                timeout=COMMAND_TIMEOUT_SECONDS,
            )
        except (OSError, SandboxUnavailable) as exc:
            say(f"[gate {name}: cannot start: {exc}]\n")
            results.append({"name": name, "exit_code": None, "result": "error"})
            return "error", results
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
    return verdict, results


def cut(read: files.Read, path: Path | str) -> str:
    """A log's end as `runtime.last_error` carries it (a long log is never read whole)."""
    if not read.cut:
        return log_text(read)
    # The end of a test run says what failed: keep that, and say where the rest is.
    return log_text(read) + f"\n[output truncated to its last 100 KB; full log: {path}]"


def log_text(read: files.Read) -> str:
    """What was read of a log, its line breaks as a text read gives them (`\r` and `\r\n`
    become `\n`)."""
    return read.text().replace("\r\n", "\n").replace("\r", "\n")


def log_end(run_id: int, path: str) -> files.Read | None:
    """The end of a gate log a `gates_finished` event names, for the review page; None if
    it cannot be read. An older run's log is in its artifacts folder, where agents write:
    it is read like any file there (no link followed, regular files only, its end only)."""
    folder = run_folder(run_id)
    try:
        relative = Path(path).relative_to(folder)
        return files.read_file(folder, relative, limit=OUTPUT_LIMIT, end=True)
    except (ValueError, OSError):
        return None
