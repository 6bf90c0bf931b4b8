#!/usr/bin/env python3
"""A stand-in for `codex exec --json` (and `codex exec --json ... resume <thread id>`).

Reads the prompt on stdin and prints the JSONL events: thread.started, turn.started,
item.started / item.completed (command_execution, agent_message), turn.completed with
usage. With `--output-schema FILE` the last agent message is JSON that fits the schema.
Test-only switches: --fake-delay S, --fake-complete-after N, --fake-fail auth.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import State, emit, option, pause, payload_for, prose, state_dir  # noqa: E402


def main(argv: list[str]) -> int:
    if "exec" not in argv or "--json" not in argv:
        print("fake codex: expected `exec --json`", file=sys.stderr)
        return 2
    prompt = sys.stdin.read()
    delay = float(option(argv, "--fake-delay", "0"))
    after = int(option(argv, "--fake-complete-after", "2"))
    schema_path = option(argv, "--output-schema")
    state = State(state_dir(".fake-codex"))
    resume = option(argv, "resume")
    if resume:
        session = state.session(resume)
        if session is None:
            emit({"type": "error", "message": f"no rollout found for thread id {resume}"})
            return 1
        thread_id, turn = resume, session["turns"] + 1
    else:
        thread_id, turn = str(uuid.uuid4()), 1
    schema = json.loads(Path(schema_path).read_text()) if schema_path else None
    calls = state.log_call(
        {
            "argv": argv,
            "prompt": prompt,
            "thread_id": thread_id,
            "resumed": bool(resume),
            "schema": schema,
        }
    )
    emit({"type": "thread.started", "thread_id": thread_id})
    emit({"type": "turn.started"})
    if option(argv, "--fake-fail") == "auth":
        emit(
            {
                "type": "error",
                "message": "unexpected status 401 Unauthorized: Missing bearer authentication",
            }
        )
        emit(
            {
                "type": "turn.failed",
                "error": {
                    "message": "unexpected status 401 Unauthorized: Missing bearer authentication"
                },
            }
        )
        return 1
    emit(
        {
            "type": "item.started",
            "item": {
                "id": "item_0",
                "type": "command_execution",
                "command": "bash -lc ls",
                "aggregated_output": "",
                "status": "in_progress",
            },
        }
    )
    emit(
        {
            "type": "item.completed",
            "item": {
                "id": "item_0",
                "type": "command_execution",
                "command": "bash -lc ls",
                "aggregated_output": "README.md\n",
                "exit_code": 0,
                "status": "completed",
            },
        }
    )
    pieces = prose("Fake Codex", turn, thread_id, prompt, calls, after)
    if schema is not None:
        pieces = pieces[:1] + [json.dumps(payload_for(schema, calls >= after))]
    for number, piece in enumerate(pieces, start=1):
        pause(delay)
        emit(
            {
                "type": "item.completed",
                "item": {"id": f"item_{number}", "type": "agent_message", "text": piece},
            }
        )
    state.save_session(thread_id, {"turns": turn})
    emit(
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": len(prompt.split()),
                "cached_input_tokens": 0,
                "output_tokens": 17,
            },
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
