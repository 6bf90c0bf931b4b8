"""What a step-machine template sees, and the full prompt an agent's turn is sent."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from runs.sandbox import files

from .machine import MachineState
from .rendering import Namespace, TextList

# The most of one knowledge file a prompt carries (bytes; the start of a longer one).
KNOWLEDGE_FILE_LIMIT = 64 * 1024
# Inputs every recipe's templates may name though the run was given none: the task key
# is there "if provided" (absent, `{{ inputs.task_key }}` prints nothing).
OPTIONAL_INPUTS = frozenset({"task_key"})


def run_inputs(run, spec) -> dict:
    """Inputs as templates read them: an optional input nobody gave is *absent* (so
    `default(...)` and `{% if %}` work as in Jinja), and `goal` is the run's goal."""
    values = {}
    for name, value in (run.inputs or {}).items():
        declared = spec.inputs.get(name)
        if value == "" and declared is not None and declared.default in (None, ""):
            continue
        values[name] = value
    if "goal" not in values and run.message:
        values["goal"] = run.message
    return values


def template_context(run, spec, state: MachineState) -> dict:
    return {
        "inputs": Namespace("inputs", run_inputs(run, spec), optional=OPTIONAL_INPUTS),
        "loop_run": Namespace("loop_run", {"id": run.pk}),
        "recipe": Namespace("recipe", {"id": spec.id, "name": spec.name}),
        "knowledge": Namespace(
            "knowledge",
            {
                "files": TextList(spec.knowledge.files),
                "instructions": TextList(spec.knowledge.instructions),
            },
        ),
        "runtime": Namespace(
            "runtime",
            {"round": state.round, "last_error": state.last_error, "ticks": state.ticks},
        ),
    }


def read_knowledge_file(workdir: str, name: str) -> str:
    """A knowledge file's text for a prompt, or a note saying why it is not there. The
    working tree is the agents': the file is read as any file there (runs/sandbox/files.py),
    so a link, a FIFO or a huge file cannot leak a secret, block the worker or fill it."""
    try:
        found = files.read_file(workdir, name, limit=KNOWLEDGE_FILE_LIMIT)
    except files.Outside:
        return "(outside the working tree: not read)"
    except FileNotFoundError:
        return "(not found in the working tree)"
    except OSError as exc:
        return f"(not read: {files.describe(exc)})"
    if found.cut:
        return found.text() + (
            f"\n[cut at {KNOWLEDGE_FILE_LIMIT // 1024} KB of {found.size:,} bytes: "
            "the rest of the file is not in this prompt]"
        )
    return found.text()


HANDOFF_HOWTO = """\
When you are done, record a structured handoff: it is the only way this loop learns your
outcome (files you write are not read as handoffs). From a shell:

    $LOOP_HANDOFF_CMD --status completed --summary "what you did or found"

or call the `record_handoff` tool. Statuses: completed, blocked, needs_human, failed.
Add structured details with --data-file details.json (a JSON object)."""


# Opens the prompt of a turn run again after its worker was lost (turns.rerun_note).
RERUN_HEADING = "# This turn is running again"


def turn_prompt(spec, role_id: str, prompt: str, workdir: str) -> str:
    """Role instructions, the recipe's knowledge, the step's prompt, how to hand off."""
    role = spec.roles[role_id]
    parts = []
    if role.instructions and role.instructions.strip():
        parts.append(f"# Your role: {role_id}\n\n{role.instructions.strip()}")
    knowledge = spec.knowledge
    if knowledge.instructions:
        parts.append(
            "# Instructions for every step\n\n"
            + "\n".join(f"- {line}" for line in knowledge.instructions)
        )
    for name in knowledge.files:
        parts.append(f"# Context file {name}\n\n{read_knowledge_file(workdir, name).rstrip()}")
    parts.append(f"# This step\n\n{prompt.strip()}")
    parts.append(f"# Handing off\n\n{HANDOFF_HOWTO}")
    return "\n\n".join(parts) + "\n"


def run_folders(run) -> tuple[Path, Path]:
    base = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk)
    workdir = Path(run.workdir) if run.workdir else base / "work"
    return workdir, base / "artifacts"


def base_env(run, role_id: str) -> dict[str, str]:
    workdir, artifacts = run_folders(run)
    return {
        "ARTIFACTS_DIR": str(artifacts),
        "WORKFLOW_ID": str(run.pk),
        "USER_MESSAGE": run.message,
        "ARGUMENTS": run.message,
        "LOOP_RUN_ID": str(run.pk),
        "LOOP_ROLE": role_id,
    }
