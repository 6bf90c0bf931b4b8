"""A step-machine recipe's `trigger:` block: the fields each trigger kind takes, refused on
their own line when they are wrong, and what the kind declares to the triggers app
(`LoopKind.declared_trigger`)."""

from __future__ import annotations

import pytest

from recipes.loader import load_recipe
from runs import kinds

RECIPE = """\
schema: planeai.loop.recipe.v1
id: on-pull-requests
name: On pull requests
trigger:
{trigger}
inputs:
  branch: {{type: branch, required: true}}
  test_command: {{type: text, default: make test}}
roles:
  maker: {{provider: demo, mode: write, isolation: project}}
steps:
  - id: test
    kind: gates.run
    role: maker
    gates:
      - {{name: test, command: "{{{{ inputs.test_command }}}}"}}
    on: {{pass: done, fail: done, error: done}}
  - {{id: done, kind: loop.status, status: approved}}
"""
# The trigger block starts on line 5.
FIRST = 5


def load(trigger: str):
    block = "\n".join("  " + line for line in trigger.strip("\n").splitlines())
    return load_recipe(RECIPE.format(trigger=block))


def errors(trigger: str) -> list[tuple[int | None, str]]:
    return [(p.line, p.message) for p in load(trigger).errors]


def test_a_github_trigger_with_events_filters_and_inputs_loads_and_is_declared():
    result = load("""
kind: github_event
events: [pull_request]
filters:
  /action: [opened, synchronize]
  /pull_request/draft: false
inputs:
  branch: /pull_request/head/ref
""")
    assert result.ok, [str(p) for p in result.errors]
    assert result.warnings == []
    declared = kinds.get("planeai").declared_trigger(result.spec)
    assert declared == {
        "kind": "github_event",
        "events": ["pull_request"],
        "filters": {"/action": ["opened", "synchronize"], "/pull_request/draft": False},
        "inputs": {"branch": "/pull_request/head/ref"},
        "cron": None,
        "every": None,
        "timezone": "UTC",
        "command_inputs": ["test_command"],
        "message_is_command": False,
    }


def test_a_schedule_takes_cron_or_every_and_a_time_zone():
    assert load("kind: schedule\ncron: '0 9 * * 1-5'\ntimezone: Europe/Paris").ok
    assert load("kind: schedule\nevery: 300").ok
    assert load("kind: manual").spec.trigger.declared()["kind"] == "manual"


@pytest.mark.parametrize(
    ("trigger", "line", "message"),
    [
        (
            "kind: schedule\nevents: [push]",
            FIRST + 1,
            "trigger: a schedule trigger takes no 'events' (only github_event or pr_feedback or "
            "ci_failure triggers do)",
        ),
        (
            "kind: manual\ninputs: {branch: /ref}",
            FIRST + 1,
            "trigger: a manual trigger takes no 'inputs'",
        ),
        (
            "kind: github_event\ncron: '* * * * *'",
            FIRST + 1,
            "trigger: a github_event trigger takes no 'cron' (only schedule triggers do)",
        ),
        (
            "kind: pr_feedback\nevery: 60",
            FIRST + 1,
            "trigger: a pr_feedback trigger takes no 'every'",
        ),
        (
            "kind: schedule\ncron: '0 9 * *'",
            FIRST + 1,
            "trigger.cron: a cron expression has five fields",
        ),
        ("kind: schedule\ncron: '99 * * * *'", FIRST + 1, "trigger.cron: not a cron expression"),
        (
            "kind: schedule\ncron: '0 9 * * *'\nevery: 60",
            FIRST + 2,
            "trigger: give 'cron' or 'every', not both",
        ),
        ("kind: schedule\nevery: 0", FIRST + 1, "must be greater than 0"),
        (
            "kind: schedule\ntimezone: Mars/Olympus",
            FIRST + 1,
            "trigger: unknown time zone 'Mars/Olympus'",
        ),
        (
            "kind: github_event\nfilters: {action: opened}",
            FIRST + 1,
            "trigger: 'action' is not a JSON pointer: write it from the body's top, e.g. '/action'",
        ),
        (
            "kind: github_event\ninputs:\n  branch: pull_request/head/ref",
            FIRST + 2,
            "trigger: 'pull_request/head/ref' is not a JSON pointer",
        ),
        ("kind: ci_failure\nfilters: {/a~b: x}", FIRST + 1, "'~' is written '~0'"),
        (
            "kind: github_event\ninputs:\n  title: /pull_request/title",
            FIRST + 2,
            "trigger: 'title' is not a declared input (inputs: branch, test_command)",
        ),
        (
            "kind: github_event\ninputs:\n  test_command: /pull_request/title",
            FIRST + 2,
            "trigger: step test runs the input 'test_command' as a command; a value from a "
            "delivery never becomes a command",
        ),
        ("kind: github_event\nevents: pull_request", FIRST + 1, "must be a list"),
    ],
)
def test_each_wrong_field_is_refused_on_its_line(trigger, line, message):
    found = errors(trigger)
    assert any(at == line and message in text for at, text in found), found


def test_an_unknown_field_is_a_warning_and_an_unknown_kind_an_error():
    result = load("kind: github_event\nbranches: [main]")
    assert result.ok
    assert [(p.line, p.message) for p in result.warnings] == [
        (FIRST + 1, "trigger: unknown field 'branches' is ignored")
    ]
    assert errors("kind: webhook")[0] == (
        FIRST,
        "unknown trigger kind 'webhook'; expected one of manual, schedule, github_event, "
        "task_event, pr_feedback, ci_failure",
    )
