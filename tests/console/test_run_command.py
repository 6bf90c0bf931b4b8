"""`manage.py run`: clear errors, help on every subcommand, the API's timestamp format,
and who started a run from the command line."""

import json
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from console.models import ApiToken
from runs.management.commands.run import Command
from runs.models import Run
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = StringIO()
    call_command("run", *args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    "command",
    [
        ["run", "status", "999999"],
        ["loop", "status", "999999"],
        ["recipe", "show", "no-such-recipe"],
    ],
    ids=["run", "loop", "recipe"],
)
def test_with_json_an_error_is_json_too(worker_env, command):
    """A script that asked for --json reads one format, refusals included (the API's
    {"detail": ...}), with a non-zero exit; without --json, the usual one line on stderr."""
    as_json = subprocess.run(
        [sys.executable, "manage.py", *command, "--json"],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert as_json.returncode == 1 and as_json.stderr == ""
    detail = json.loads(as_json.stdout)["detail"]
    assert "999999" in detail or "no-such-recipe" in detail
    plain = subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode == 1 and plain.stderr.strip() == f"CommandError: {detail}"


def test_workdir_that_is_a_file_is_a_clear_error_not_a_traceback(worker_env, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    result = subprocess.run(
        [sys.executable, "manage.py", "run", "start", "counter-loop", "--workdir", str(a_file)],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "this is a file; give a directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_every_run_subcommand_and_option_has_help():
    parser = Command().create_parser("manage.py", "run")
    sub = next(a for a in parser._actions if a.dest == "action")
    helped = {choice.dest: choice.help for choice in sub._choices_actions}
    assert set(helped) == set(sub.choices) and all(helped.values()), helped
    for name, subparser in sub.choices.items():
        for action in subparser._actions:
            if action.dest != "help":
                assert action.help, (name, action.dest)


def test_cli_json_and_the_api_share_one_timestamp_format(client, bundled, operator, viewer):
    run_id = int(_run("start", "counter-loop", "-m", "hello", "--user", "otto"))
    cli = json.loads(_run("status", str(run_id), "--json"))
    _, secret = ApiToken.issue(viewer, name="t")
    api = client.get(f"/api/runs/{run_id}", headers={"Authorization": f"Bearer {secret}"}).json()
    assert cli["created_at"] == api["created_at"]
    assert "T" in cli["created_at"]


def test_a_cli_run_records_the_os_user_account(bundled, operator, monkeypatch):
    monkeypatch.setattr("getpass.getuser", lambda: "otto")
    run = Run.objects.get(pk=int(_run("start", "counter-loop", "-m", "mine")))
    assert run.started_by == operator


def test_a_cli_run_without_an_account_says_cli(bundled, monkeypatch):
    monkeypatch.setattr("getpass.getuser", lambda: "somebody-else")
    run = Run.objects.get(pk=int(_run("start", "counter-loop", "-m", "theirs")))
    assert run.started_by is None
    assert run.events.get(kind="run_created").data["by"] == "cli (somebody-else)"


@pytest.mark.parametrize("message", [None, "", "   "])
def test_start_without_the_message_the_recipe_works_on_is_an_error(bundled, operator, message):
    """The console's rule and words (runs/services.py: start_run): the prompt would end in
    "about: " with nothing to work on."""
    given = [] if message is None else ["--message", message]
    with pytest.raises(CommandError) as refused:
        _run("start", "guided-refine", *given, "--user", "otto")
    assert str(refused.value) == (
        "--message: This recipe works on the message: write what the run is about."
    )
    assert not Run.objects.exists()
    # A recipe that does not read the message starts without one.
    assert Run.objects.filter(pk=int(_run("start", "release-approval", "--user", "otto")))
