#!/usr/bin/env python3
"""A plain command agent: the prompt on stdin, the answer streamed on stdout.

It reports the session the console gave it (LOOP_SESSION_ID / LOOP_SESSION_RESUME). When
the prompt carries the console's "## Output format" section, its first answer in a
working directory is broken JSON and later ones fit the schema (to exercise re-asks).
Switches: --fake-delay S between words; --fake-hold FILE: before the last word, wait until
FILE exists (a test says "go" once it has seen the words so far).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import State, option, payload_for, state_dir

SCHEMA_BLOCK = re.compile(r"```json\n(.*?)\n```", re.S)


def main(argv: list[str]) -> int:
    prompt = sys.stdin.read()
    delay = float(option(argv, "--fake-delay", "0"))
    state = State(state_dir(".fake-command"))
    calls = state.log_call(
        {
            "prompt": prompt,
            "session_id": os.environ.get("LOOP_SESSION_ID"),
            "resumed": os.environ.get("LOOP_SESSION_RESUME") == "1",
        }
    )
    if "## Output format" in prompt or "did not produce valid structured output" in prompt:
        blocks = SCHEMA_BLOCK.findall(prompt)
        answer = (
            "Here you go: {done: yes"
            if calls == 1
            else "```json\n" + json.dumps(payload_for(json.loads(blocks[-1]), True)) + "\n```"
        )
    else:
        answer = (
            f"Fake command call {calls}, resumed={os.environ.get('LOOP_SESSION_RESUME')}. Done."
        )
    hold = option(argv, "--fake-hold")
    words = answer.split(" ")
    for index, word in enumerate(words):
        if hold and index == len(words) - 1:
            while not os.path.exists(hold):
                time.sleep(0.05)
        sys.stdout.write(word + " ")
        sys.stdout.flush()
        time.sleep(delay)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
