"""Hostile agent output and hostile expressions cost bounded CPU and end in a clear answer.

Each measurement runs in a child process with a hard timeout, so a regression to quadratic
time fails the test instead of hanging the suite. The ceiling (5 s of CPU for a megabyte)
is generous for a busy machine and still far below what the quadratic parsers took
(180 KB of output cost 35 s; a megabyte would cost over a quarter of an hour).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from runs.engine.completion import detect_signal, strip_signal_tags
from runs.engine.conditions import MAX_CONDITION_DEPTH, ConditionError, evaluate, parse_condition
from runs.engine.structured import MAX_JSON_DEPTH, extract_json
from tests.conftest import ROOT

MEGABYTE = 1_000_000
CPU_CEILING_SECONDS = 5.0

# Each: what a hostile agent (or a message a person typed) can send, about 1 MB long.
HOSTILE_OUTPUTS = {
    "unclosed_tags": "<promise>" * (MEGABYTE // 9),
    "unclosed_spaced_tags": "< promise >DONE " * (MEGABYTE // 16),
    "closing_tags_only": "</promise>" * (MEGABYTE // 10),
    "word_run": "a" * MEGABYTE,
    "dotted_run": "a." * (MEGABYTE // 2),
    "digit_run": "1" * MEGABYTE,
    "signal_then_punctuation": "DONE" + "." * MEGABYTE + "x",
    "blank_lines": "\n \n" * (MEGABYTE // 3),
    "markers": "\ue000" + "\ue001" * MEGABYTE,
}


def cpu_seconds(call: str, payload_expr: str) -> float:
    """CPU time a fresh interpreter spends on ``call(payload)`` (after building it)."""
    script = textwrap.dedent(
        f"""
        import os, sys, time
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
        from runs.engine.completion import detect_signal, strip_signal_tags
        from runs.engine.structured import extract_json
        from runs.providers.base import AgentRequest
        from runs.providers.demo import DemoProvider
        import tempfile
        workdir = tempfile.mkdtemp()
        payload = {payload_expr}
        started = time.process_time()
        {call}
        print(time.process_time() - started)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return float(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(HOSTILE_OUTPUTS))
def test_completion_parsing_of_a_megabyte_of_hostile_output_is_linear(name):
    payload = f"HOSTILE_OUTPUTS[{name!r}]"
    expr = f"__import__('tests.security.test_cpu_bounds', fromlist=['x']).{payload}"
    spent = cpu_seconds(
        "detect_signal(payload, 'DONE'); strip_signal_tags(payload); extract_json(payload)",
        expr,
    )
    assert spent < CPU_CEILING_SECONDS, f"{name}: {spent:.2f} s of CPU for 1 MB"


@pytest.mark.parametrize("name", ["word_run", "dotted_run", "digit_run", "unclosed_tags"])
def test_demo_agent_answers_a_megabyte_message_in_bounded_time(name):
    payload = f"HOSTILE_OUTPUTS[{name!r}]"
    expr = f"__import__('tests.security.test_cpu_bounds', fromlist=['x']).{payload}"
    spent = cpu_seconds(
        "DemoProvider(delay=0).run(AgentRequest(prompt=payload, workdir=workdir), lambda c: None)",
        expr,
    )
    assert spent < CPU_CEILING_SECONDS, f"{name}: {spent:.2f} s of CPU for 1 MB"


def test_signal_detection_still_reads_tags_lines_and_endings():
    assert detect_signal("work\n<promise> done </promise>\nmore", "DONE")
    assert detect_signal("all finished: DONE.", "DONE")
    assert detect_signal("first\n  DONE \r\nthen more", "DONE")
    assert not detect_signal("I am not DONE yet, more to do", "DONE")
    assert not detect_signal("UNDONE", "DONE")
    assert detect_signal("finished DONE!", "DONE!")
    assert strip_signal_tags("a <promise>X</promise>\n<promise>Y</promise>\nb") == "a\nb"
    # An unclosed tag is left as the agent wrote it.
    assert strip_signal_tags("a <promise>X") == "a <promise>X"


def test_deeply_nested_json_in_agent_output_is_a_clear_error():
    payload, error = extract_json("[" * 100_000)
    assert payload is None
    assert f"more than {MAX_JSON_DEPTH} levels deep" in error

    nested = '{"a":' * 50_000 + "1" + "}" * 50_000
    payload, error = extract_json(f"Here it is:\n```json\n{nested}\n```")
    assert payload is None and "levels deep" in error


def test_json_nested_within_the_limit_still_parses():
    depth = MAX_JSON_DEPTH - 1
    text = "Result: " + '{"a":' * depth + "true" + "}" * depth + " (end)"
    payload, error = extract_json(text)
    assert error is None
    for _ in range(depth - 1):
        payload = payload["a"]
    assert payload == {"a": True}
    # Brackets inside strings are text, not nesting.
    payload, error = extract_json(json.dumps({"note": "[" * 5000}))
    assert error is None and payload == {"note": "[" * 5000}


@pytest.mark.parametrize(
    "expr",
    [
        "(" * 10_000 + "$a.output" + ")" * 10_000,
        "not " * 10_000 + "$a.output",
        " and ".join(["$a.output"] * 10_000),
        " or ".join(["$a.output == 'x'"] * 10_000),
    ],
    ids=["parentheses", "not_chain", "and_chain", "or_chain"],
)
def test_deeply_nested_when_is_a_clear_error(expr):
    with pytest.raises(ConditionError, match=f"more than {MAX_CONDITION_DEPTH} levels deep"):
        parse_condition(expr)


def test_when_within_the_depth_limit_parses_and_evaluates():
    depth = MAX_CONDITION_DEPTH - 2
    nested = "(" * depth + "$a.output == 'x'" + ")" * depth
    assert evaluate(parse_condition(nested), lambda *_: "x")
    chain = " and ".join(["$a.output"] * (MAX_CONDITION_DEPTH - 1))
    assert evaluate(parse_condition(chain), lambda *_: "yes")
    assert not evaluate(parse_condition("not " * 10 + "not $a.output"), lambda *_: "yes")
