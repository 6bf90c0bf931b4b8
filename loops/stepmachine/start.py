"""What must hold before a step-machine run starts, and which repositories it may use.

Checked by `runs.services.start_run` for every surface (`check_run_start`, the kind's
`check_start`): the trigger is one the console runs (not `task_event`), the tools the
recipe requires are there, the repository is a git repository when the recipe needs one (a
role in a worktree, a branch input), branch inputs name its branches, and an input
the recipe runs as a whole gate command is the recipe's own default unless the person may
write shell (the `recipes.write_shell` permission). The message counts as such an input
when it stands for `goal` (an undeclared or empty `goal` input reads the message), and a
child run started by a `workflow:` node never changes one: its values come from another
recipe and another run, not from a person with the shell permission.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings

from runs.errors import Conflict, InputError

from . import git
from .machine import create_machine
from .rendering import command_sources, whole_value
from .spec import UNRUNNABLE_TRIGGERS

# What the console itself provides to every step-machine run (see docs/recipes.md).
PROVIDED_TOOLS = {
    "filesystem": "the role's working directory",
    "plane_sessions": "the console's agent sessions (session.create, session.prompt)",
    "plane_loops": "the console's loop tools: record_handoff ($LOOP_HANDOFF_CMD, MCP, function tool)",
    "record_handoff": "the handoff tool",
}
PROGRAM_TOOLS = {"git": "git", "github": "gh"}


def tool_available(name: str) -> bool:
    if name in PROVIDED_TOOLS:
        return True
    return shutil.which(PROGRAM_TOOLS.get(name, name)) is not None


def missing_tools(spec) -> list[str]:
    return [name for name in spec.tools.required if not tool_available(name)]


def needs_repository(spec) -> bool:
    return any(role.isolation == "worktree" for role in spec.roles.values()) or any(
        spec_input.type == "branch" for spec_input in spec.inputs.values()
    )


def demo_root() -> Path:
    return Path(settings.LOOP_DATA_DIR) / "demo-repositories"


def allowed_repositories() -> list[str]:
    """Repositories a run may be started on from the console or the API: those listed in
    LOOP_REPOSITORIES, and demo repositories made in the data folder."""
    found = [str(Path(p).expanduser().resolve()) for p in settings.LOOP_REPOSITORIES]
    root = demo_root()
    if root.is_dir():
        demos = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.name)
        found += [str(p) for p in reversed(demos) if git.is_repository(p)]
    return list(dict.fromkeys(found))


def check_repository(path: str) -> None:
    """`LoopKind.check_repository`: a repository chosen from the console or the API is one
    runs may use (the command line, run by someone at the machine, may name any folder)."""
    if path not in allowed_repositories():
        raise InputError(
            {"repository": "not one of the repositories runs may use (LOOP_REPOSITORIES)"}
        )


def default_repository() -> str:
    listed = [str(Path(p).expanduser().resolve()) for p in settings.LOOP_REPOSITORIES]
    return listed[0] if listed else ""


def command_inputs(spec) -> dict[str, str]:
    """Inputs a gates.run runs as a whole command: {input: step id}."""
    found = {}
    for step in spec.steps:
        for gate in step.gates:
            if whole_value(gate.command):
                for name in command_sources(gate.command)[0]:
                    found.setdefault(name, step.id)
    return found


def check_start(
    spec, inputs: dict, workdir: str, writes_shell: bool, *, message="", child=False
) -> None:
    # A schedule or a webhook is one more way in; a person may start such a recipe too.
    if spec.trigger.kind in UNRUNNABLE_TRIGGERS:
        raise Conflict(
            f"This recipe's trigger is '{spec.trigger.kind}', which the console cannot run: "
            "it has no task tracker to send task events. Use another trigger kind (manual, "
            "schedule, github_event, pr_feedback, ci_failure)."
        )
    missing = missing_tools(spec)
    if missing:
        raise Conflict(
            "This recipe requires tools that are not available: "
            + ", ".join(missing)
            + " (install the programs on the worker's PATH, or remove them from tools.required)."
        )
    errors = {}
    if needs_repository(spec) and not git.is_repository(workdir):
        errors["repository"] = (
            "this recipe works on a git repository (a role uses a worktree, or an input "
            "picks a branch): choose the top folder of one"
            + (f"; {workdir} is not one" if workdir else "")
        )
    elif git.is_repository(workdir):
        names = set(git.branches(workdir))
        for name, declared in spec.inputs.items():
            value = inputs.get(name)
            if declared.type == "branch" and value and value not in names:
                errors[name] = f"there is no branch {value!r} in the repository"
    may_write_shell = not child and writes_shell
    for name, step_id in command_inputs(spec).items():
        declared = spec.inputs.get(name)
        if may_write_shell:
            continue
        value = inputs.get(name)
        if name == "goal" and value in ("", None) and message:
            # Templates read the message as `goal` when no goal was given (context.run_inputs).
            errors["message"] = (
                f"step {step_id} runs the goal as a command and this message would be the "
                "goal: that needs the shell permission (a recipe author with shell)"
            )
            continue
        if declared is None:
            continue  # never given, so the command cannot print it: nothing runs
        if value in ("", None, declared.default):
            continue
        if declared.type == "select" and value in {o.value for o in declared.options}:
            continue
        errors[name] = (
            f"step {step_id} runs this input as a command, so changing it from the recipe's "
            f"default ({declared.default or 'none'}) needs the shell permission (a recipe author with shell)"
        )
    if errors:
        raise InputError(errors)


def check_run_start(
    spec, inputs: dict, workdir: str, writes_shell: bool, *, message="", child=False
) -> str:
    """`LoopKind.check_start`: the repository a run works on (LOOP_REPOSITORIES' first when
    none is given), once everything above holds for it."""
    workdir = workdir or default_repository()
    check_start(spec, inputs, workdir, writes_shell, message=message, child=child)
    return workdir


def created(run, start: bool) -> bool:
    """`LoopKind.created`: the run's machine node, made with the run; a run created without
    starting waits for `loop tick` (the kernel sends no advance_run for it)."""
    create_machine(run, started=start)
    return start


def form_options(chosen: str) -> dict:
    """The start form of a step machine: the repositories it may use and the chosen one's
    branches (for branch inputs)."""
    from . import git

    repositories = allowed_repositories()
    if chosen not in repositories:
        chosen = repositories[0] if repositories else ""
    branches = git.branches(chosen) if chosen and git.is_repository(chosen) else []
    return {"repositories": repositories, "repository": chosen, "branches": branches}
