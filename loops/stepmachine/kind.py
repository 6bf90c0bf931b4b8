"""What the step machine plugs into the kernel (runs.kinds), registered from
`StepMachineConfig.ready()`."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from recipes.problems import LoadResult
from runs.fork import Continuation
from runs.kinds import LoopKind

from . import demo, forking, git, machine, runner, start, surfaces, sweep, tasks, turns  # noqa: F401  (tasks: registers the Celery task)
from .format import parse_planeai
from .spec import MACHINE_KIND, RECIPE_KIND, SCHEMA, SESSION_KIND

# A file whose YAML does not read at all still says on its own lines what it is and what it
# is called: known by them, it is a broken step-machine recipe under its id (reported with
# YAML's problem and line), not some other kind's file named after the file.
_SCHEMA_LINE = re.compile(rf"^schema:[ \t]*(['\"]?){re.escape(SCHEMA)}\1[ \t]*(#.*)?$", re.M)
_ID_LINE = re.compile(r"^id:[ \t]*(['\"]?)([^'\"#\s]+)\1[ \t]*(#.*)?$", re.M)


def is_step_machine(data) -> bool:
    schema = data.get("schema") if isinstance(data, dict) else None
    return isinstance(schema, str) and schema.strip() == SCHEMA


def is_unreadable_step_machine(source) -> bool:
    """Whether `source` is a step-machine recipe whose YAML does not decode."""
    return source.data is None and bool(_SCHEMA_LINE.search(source.text))


class StepMachineKind(LoopKind):
    name = RECIPE_KIND
    label = "Step machine"
    nodes = {MACHINE_KIND: runner.start}
    iterations = {SESSION_KIND: turns.run_turn}
    phases = machine.PHASES
    sweep_passes = (sweep.resend_lost_ticks, sweep.mark_stale_machines)
    run_parts = surfaces.RUN_PARTS
    urls = surfaces.URLS
    api_router = surfaces.API_ROUTER
    api_prefix = surfaces.API_PREFIX
    loop_commands = surfaces.LOOP_COMMANDS
    own_worktrees = True
    rerun_keeps_workdir = True
    resume_refused = (
        "A step-machine run cannot be resumed (its sessions and handoffs belong to "
        "that run): re-run it instead."
    )
    loop_rows = surfaces.LOOP_ROWS
    needs_a_person = surfaces.NEEDS_A_PERSON

    def reads(self, source):
        if is_unreadable_step_machine(source):
            return LoadResult(kind=RECIPE_KIND, spec=None)  # the loader adds YAML's problems
        if not is_step_machine(source.mapping):
            return None
        return parse_planeai(
            source.mapping, source.lines, provider_check=source.options.provider_check
        )

    def shell_parts(self, spec) -> dict[str, str]:
        """A step machine runs shell only in `gates.run`: the commands as the recipe writes
        them (templates of recipe text, rendered when the step runs)."""
        return {
            f"steps.{step.id}.gates.{index}.{gate.name}": gate.command
            for step in spec.steps
            for index, gate in enumerate(step.gates)
        }

    def user_recipe_folders(self):
        return [Path(settings.LOOP_PLANEAI_USER_DIR).expanduser()]  # ~/.config/planeai/loops

    def repository_recipe_folders(self, roots):
        return [root / ".planeai" / "loops" for root in roots]

    def slug_in(self, source):
        if "schema" not in source.text:
            return None  # the text test spares decoding every other recipe file
        if is_unreadable_step_machine(source):
            line = _ID_LINE.search(source.text)
            return line.group(2) if line else ""
        if not is_step_machine(source.mapping):
            return None
        recipe_id = source.mapping.get("id")
        return recipe_id if isinstance(recipe_id, str) else ""

    def declared_slug(self, spec):
        return spec.id  # a step-machine recipe is known by its id

    def start_options(self, chosen=""):
        return start.form_options(chosen)

    def check_repository(self, path):
        start.check_repository(path)

    def check_start(self, *args, **options):
        return start.check_run_start(*args, **options)

    def created(self, run, start_now):
        return start.created(run, start_now)

    def declared_trigger(self, spec):
        commands = start.command_inputs(spec)
        return {
            **spec.trigger.declared(),
            "command_inputs": sorted(commands),
            # Templates read the message as `goal` when no goal is given (context.run_inputs).
            "message_is_command": "goal" in commands,
        }

    def review_parts(self, run, gate):
        return git.branch_heads(run.workdir) if run.workdir else {}

    def gate_decided(self, run, gate, node_run, status, actor):
        runner.gate_decided(run, gate, node_run, status, actor)

    def derived_status(self, run, *, finished):
        return machine.derived_status(run, finished=finished)

    def continuations(self):
        return {SESSION_KIND: Continuation(forking.check, forking.carry)}  # its session turns

    def run_context(self, run):
        return surfaces.run_context(run)

    def event_sentence(self, event):
        return surfaces.event_sentence(event)

    def person_action(self, run):
        return surfaces.person_action(run)

    def plays(self, request):
        return demo.plays_role(request)

    def demo_turn(self, provider, request, on_chunk):
        return demo.role_turn(provider, request, on_chunk)
