#!/usr/bin/env python3
"""A scripted role agent for step-machine tests. It reads its prompt on stdin and follows
directives found in it, one per line (N is the session's turn, LOOP_ITERATION, or *):

    @say N: text                print text
    @handoff N: STATUS: summary  run `$LOOP_HANDOFF_CMD --status STATUS --summary "summary"`
                                 through a shell, as an agent in a terminal would
    @handoff-data N: STATUS: {json}  the same with --data-file (a file it writes first)
    @write N: path: text        write a file in the working directory
    @exit N: code               exit with this status (a crashed session)
    @wait-file N: path          wait (up to 120 s) until the file exists, then go on

Every call is appended to $ARTIFACTS_DIR/calls.jsonl: role, session, resume flag, turn,
working directory, whether the handoff command was there, and what it answered.
"""

import json
import os
import re
import subprocess
import sys
import time

prompt = sys.stdin.read()
turn = os.environ.get("LOOP_ITERATION", "0")
record = {
    "role": os.environ.get("LOOP_ROLE"),
    "run": os.environ.get("LOOP_RUN_ID"),
    "session": os.environ.get("LOOP_SESSION_ID"),
    "resume": os.environ.get("LOOP_SESSION_RESUME") == "1",
    "turn": int(turn),
    "cwd": os.getcwd(),
    "read_only": os.environ.get("LOOP_READ_ONLY"),
    "handoff_cmd": bool(os.environ.get("LOOP_HANDOFF_CMD")),
    "has_database_url": "DATABASE_URL" in os.environ,
    "prompt": prompt,
}


def directives(name):
    found = []
    for key in (turn, "*"):
        found += re.findall(rf"^@{name} {re.escape(key)}: ?(.*)$", prompt, re.M)
    return found


def log(**extra):
    path = os.path.join(os.environ.get("ARTIFACTS_DIR", "."), "calls.jsonl")
    with open(path, "a") as fh:
        fh.write(json.dumps({**record, **extra}) + "\n")


for path in directives("wait-file"):
    deadline = time.time() + 120
    while not os.path.exists(path.strip()) and time.time() < deadline:
        time.sleep(0.05)
for text in directives("say"):
    print(text, flush=True)
for spec in directives("write"):
    path, _, text = spec.partition(": ")
    with open(path, "w") as fh:
        fh.write(text.replace("\\n", "\n"))
answers = []
for spec in directives("handoff"):
    status, _, summary = spec.partition(": ")
    done = subprocess.run(
        ["bash", "-c", '$LOOP_HANDOFF_CMD --status "$1" --summary "$2"', "agent", status, summary],
        capture_output=True,
        text=True,
    )
    answers.append({"code": done.returncode, "out": done.stdout, "err": done.stderr})
    print(f"handoff {status}: exit {done.returncode} {done.stdout.strip()}", flush=True)
for spec in directives("handoff-data"):
    status, _, data = spec.partition(": ")
    with open("details.json", "w") as fh:
        fh.write(data)
    done = subprocess.run(
        ["bash", "-c", '$LOOP_HANDOFF_CMD --status "$1" --data-file details.json', "a", status],
        capture_output=True,
        text=True,
    )
    os.unlink("details.json")
    answers.append({"code": done.returncode, "out": done.stdout, "err": done.stderr})
codes = directives("exit")
log(answers=answers, end=time.time())
sys.exit(int(codes[0]) if codes else 0)
