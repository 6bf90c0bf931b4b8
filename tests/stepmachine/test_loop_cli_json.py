"""`manage.py loop … --json` prints what the API would: a script reads each subcommand's
answer with `json.loads` and finds the fields the text version shows."""

import json

import pytest
from django.core.management import call_command

from loops.stepmachine.models import Handoff

pytestmark = pytest.mark.django_db


def check_status(data, run):
    # status, current step, round and ticks: what `loop status` promises
    assert data["id"] == run.pk and data["recipe"] == "waiting"
    assert (data["status"], data["started"], data["current_step"]) == ("pending", False, None)
    assert (data["round"], data["ticks"]) == (1, 0)
    assert (data["max_rounds"], data["max_ticks"]) == (3, 50)


def check_tick(data, run):
    assert data["id"] == run.pk
    assert data["tick"] == {"ticks": 0, "steps": [], "stopped": "the run was started"}


def check_stop(data, run):
    assert (data["id"], data["status"]) == (run.pk, "cancelled")
    assert data["error"] == "enough"


def check_handoff(data, run):
    handoff = Handoff.objects.get(run=run)
    assert data["id"] == handoff.pk
    assert (data["role"], data["status"], data["summary"]) == ("maker", "blocked", "stuck")
    assert data["schema"] == "planeai.handoff.v1"


def check_ls(data, run):
    rows = {row["id"]: row for row in data}
    assert rows["waiting"]["name"] == "Waiting for a maker" and rows["waiting"]["valid"] is True


def check_show(data, run):
    assert data["id"] == "waiting" and "kind: handoff.wait" in data["source"]


def check_validate(data, run):
    assert data["valid"] is True and data["kind"] == "planeai"
    assert data["errors"] == []


COMMANDS = {
    "status": (["status", "{id}"], check_status),
    "tick": (["tick", "{id}"], check_tick),
    "stop": (["stop", "{id}", "--reason", "enough"], check_stop),
    "handoff": (
        ["handoff", "{id}", "--role", "maker", "--status", "blocked", "--summary", "stuck"],
        check_handoff,
    ),
    "recipe ls": (["recipe", "ls"], check_ls),
    "recipe show": (["recipe", "show", "waiting"], check_show),
    "recipe validate": (["recipe", "validate", "waiting"], check_validate),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_subcommand_prints_json_a_script_can_read(
    name, waiting_run, sent, capsys, django_capture_on_commit_callbacks
):
    words, check = COMMANDS[name]
    capsys.readouterr()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("loop", *[w.format(id=waiting_run.pk) for w in words], "--json")
    data = json.loads(capsys.readouterr().out)
    waiting_run.refresh_from_db()
    check(data, waiting_run)
