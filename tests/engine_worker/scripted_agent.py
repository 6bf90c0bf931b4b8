#!/usr/bin/env python3
"""A scripted command-line agent for engine tests: reads the prompt on stdin and follows
directives found in it, one per line:

    @N: text        print text on iteration N (\\n becomes a newline)
    @*: text        print text on every iteration without its own line
    @sleep N: secs  sleep before answering on iteration N (* for every iteration)
    @idle N: secs   print a line, then stay silent for secs (idle-timeout tests)
    @exit N: code   exit with this status on iteration N

Every call is appended to $ARTIFACTS_DIR/calls.jsonl (prompt, session, resume flag,
iteration, pid, start and end times) so tests can check what the engine sent.
"""

import json
import os
import re
import sys
import time

prompt = sys.stdin.read()
iteration = os.environ.get("LOOP_ITERATION", "0")
record = {
    "prompt": prompt,
    "session": os.environ.get("LOOP_SESSION_ID"),
    "resume": os.environ.get("LOOP_SESSION_RESUME") == "1",
    "iteration": int(iteration),
    "node": os.environ.get("LOOP_NODE_ID"),
    "pid": os.getpid(),
    "start": time.time(),
}


def directive(name: str) -> str | None:
    for key in (iteration, "*"):
        match = re.search(rf"^@{name}{re.escape(key)}: ?(.*)$", prompt, re.M)
        if match:
            return match.group(1)
    return None


def log(**extra):
    path = os.path.join(os.environ.get("ARTIFACTS_DIR", "."), "calls.jsonl")
    with open(path, "a") as fh:
        fh.write(json.dumps({**record, **extra}) + "\n")


if (secs := directive("sleep ")) is not None:
    time.sleep(float(secs))
if (secs := directive("idle ")) is not None:
    print("started, now thinking quietly", flush=True)
    time.sleep(float(secs))
text = directive("")
if text is not None:
    print(text.replace("\\n", "\n"), flush=True)
code = directive("exit ")
log(end=time.time())
sys.exit(int(code) if code else 0)
