"""`manage.py loop handoff RUN_ID --role ROLE --status STATUS [--summary T] [--data-file F]`.

The operator's side (with the database): the same service the agent's `record_handoff`
tool and `POST /api/runs/{id}/handoffs` call. Inside an agent's process (LOOP_TOOL_SOCKET
set) manage.py sends this command to the agent's tool instead (runs.agent_tools.client)."""

import json

from django.core.management import CommandError

from runs import services
from runs.loop_commands.common import actor, add_common, emit

from ._common import step_machine_run

NAME = "handoff"
HELP = "Record a role's handoff on a step-machine run"


def add_arguments(parser):
    parser.add_argument("run_id", type=int, metavar="RUN_ID")
    parser.add_argument("--role", required=True)
    parser.add_argument("--status", required=True, help="completed, blocked, needs_human or failed")
    parser.add_argument("--summary", default="", help="what was done or found")
    parser.add_argument("--data-file", default="", help="a JSON object with details")
    add_common(parser)


def handle(command, options):
    run = step_machine_run(options["run_id"])
    data = None
    if options["data_file"]:
        try:
            with open(options["data_file"], encoding="utf-8") as handle_:
                data = json.load(handle_)
        except OSError as exc:
            raise CommandError(f"--data-file: cannot read it: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise CommandError(f"--data-file: not JSON: {exc.msg} (line {exc.lineno})") from None
    try:
        from loops.stepmachine.handoffs import record_handoff

        handoff = record_handoff(
            run.pk,
            actor=actor(options),
            role=options["role"],
            status=options["status"],
            summary=options["summary"],
            data=data,
        )
    except services.InputError as exc:
        raise CommandError(
            "handoff refused: " + "; ".join(f"{k}: {v}" for k, v in exc.errors.items())
        ) from None
    except services.ServiceError as exc:
        raise CommandError(str(exc)) from None
    emit(
        command,
        options,
        handoff.as_dict(),
        f"recorded handoff {handoff.pk}: {handoff.role} {handoff.status} on run {run.pk}",
    )
