"""`script:` nodes: Python through `uv run` (or, for a script without dependencies, this
console's own interpreter when uv is not installed), TypeScript/JavaScript through bun.

The code is the recipe author's; values reach it only through the environment
(`USER_MESSAGE`, `ARGUMENTS`, `INPUTS_<NAME>`, ...), the allow-listed one every child process
gets (runs.sandbox.child_env), in the sandbox. Output is captured like a bash step's:
stdout is the output, stderr is kept apart (`NodeRun.stderr`).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from runs.executor.agent import StepFailed
from runs.executor.context import build_context, step_env, step_sandbox
from runs.sandbox import run_process

DEFAULT_TIMEOUT_MS = 120_000
# PEP 723 inline metadata: `# /// script` ... `dependencies = [...]` ... `# ///`.
_METADATA = re.compile(r"^# /// script\s*$(.*?)^# ///\s*$", re.MULTILINE | re.DOTALL)
_DEPENDENCIES = re.compile(r"dependencies\s*=\s*\[(.*?)\]", re.DOTALL)


def find_runtime(name: str) -> str | None:
    """`uv` or `bun` in LOOP_RUNTIME_DIRS; by default on the worker's PATH, else beside this
    console's interpreter (a venv the console was installed in, where `pip install uv` puts
    it)."""
    from django.conf import settings

    if settings.LOOP_RUNTIME_DIRS:
        return shutil.which(name, path=os.pathsep.join(settings.LOOP_RUNTIME_DIRS))
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def declared_dependencies(node, code: str) -> list[str]:
    """`deps:` and, for Python, the dependencies of an inline `# /// script` block."""
    found = list(node.deps)
    block = _METADATA.search(code) if node.runtime == "uv" else None
    if block:
        listed = _DEPENDENCIES.search(block.group(1))
        if listed and listed.group(1).strip(" \n#,"):
            found.append("(the script's own `# /// script` dependencies)")
    return found


def command_line(node, label: str) -> list[str]:
    """The argv that runs the node's script; StepFailed when its runtime is missing."""
    inline = node.script_path is None
    code = node.script if inline else _read(node.script_path)
    if node.runtime == "bun":
        bun = find_runtime("bun")
        if bun is None:
            raise StepFailed(
                f"{label} needs bun, which is not installed on this worker "
                "(install it with `npm install -g bun`)"
            )
        target = ["-e", node.script] if inline else ["run", node.script_path]
        return [bun, "--no-env-file", *target]
    uv = find_runtime("uv")
    target = ["-c", node.script] if inline else [node.script_path]
    if uv is not None:
        extra = [arg for dep in node.deps for arg in ("--with", dep)]
        python = ["python"] if inline else []
        return [uv, "run", "--quiet", "--no-project", *extra, *python, *target]
    dependencies = declared_dependencies(node, code)
    if dependencies:
        raise StepFailed(
            f"{label} declares dependencies ({', '.join(dependencies)}) but uv is not "
            "installed on this worker: install uv (`pip install uv`) or remove them"
        )
    return [sys.executable, *target]


def _installs(node) -> bool:
    code = node.script if node.script_path is None else _read(node.script_path)
    return bool(declared_dependencies(node, code))


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise StepFailed(f"cannot read the script {path}: {exc.strerror or exc}") from None


def run_script(run, spec, node, row, stream):
    """Run the node's script; (output, structured, state) like every step."""
    label = f"script node '{row.node_id}'"
    argv = command_line(node, label)
    ctx = build_context(run, spec, row)
    timeout = (node.timeout or DEFAULT_TIMEOUT_MS) / 1000
    sandbox = step_sandbox(run, spec, node)
    if node.script_path is not None:  # a named script file: the sandbox shows its folder
        sandbox = replace(sandbox, read=(*sandbox.read, str(Path(node.script_path).parent)))
    if node.network is None and argv[0].endswith("uv") and _installs(node):
        sandbox = sandbox.with_network(True)  # uv fetches the declared dependencies
    result = run_process(
        argv,
        sandbox=sandbox,
        env=step_env(run, ctx),
        on_chunk=stream,
        on_stderr=stream.on_stderr,  # the output is stdout, like a bash step's
        timeout=timeout,
    )
    stream.publish()
    if result.timed_out:
        raise StepFailed(f"script timed out after {timeout:g}s")
    if result.exit_code != 0:
        raise StepFailed(f"script exited with status {result.exit_code}")
    shown = node.script if node.script_path is None else node.script_path
    output = stream.keep_text(result.output.rstrip("\n"))  # what the row keeps of it
    return output, None, {"script": shown, "runtime": Path(argv[0]).name}
