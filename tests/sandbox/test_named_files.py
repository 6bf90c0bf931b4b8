"""What a command's words bring into its sandbox (only the files it names, never a hidden
one, and hiding always wins), and which `*_FILE` variables are secrets the sandbox hides."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.providers.base import AgentRequest
from runs.providers.cli import named_files
from runs.providers.command import CommandProvider
from runs.sandbox import for_run, run_process
from runs.sandbox.bwrap import secret_files
from tests.sandbox.conftest import requires_sandbox

CANARY = "sk-ant-canary-named-file"


@pytest.fixture
def secret_file(tmp_path, monkeypatch):
    """A provider key the console reads from a file, in a folder with other files."""
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "anthropic").write_text(CANARY + "\n")
    (folder / "notes.txt").write_text("not a secret\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(folder / "anthropic"))
    return folder / "anthropic"


def agent(command: str, workdir: Path) -> str:
    workdir.mkdir(exist_ok=True)
    result = CommandProvider("named", command).run(
        AgentRequest(prompt="", workdir=str(workdir)), on_chunk=lambda text: None
    )
    return result.text


def test_a_command_gets_the_files_it_names_never_a_hidden_one(secret_file, tmp_path):
    script = tmp_path / "tools" / "helper.py"
    script.parent.mkdir()
    script.write_text("print('helper')\n")
    command = f"cat {secret_file} /proc/self/mountinfo /sys/kernel/mm {script}"
    assert named_files(command) == (str(script),)
    # The program a command starts brings its folder (it may use what lies beside it).
    assert named_files(f"{script} --flag") == (str(script.parent),)


@requires_sandbox
def test_a_command_naming_a_secret_file_cannot_read_it(secret_file, tmp_path):
    output = agent(
        f"cat {secret_file}; cat {secret_file.parent}/notes.txt; "
        "grep -c . /proc/self/mountinfo >/dev/null && echo MOUNTINFO-READ; echo DONE",
        tmp_path / "work",
    )
    assert "DONE" in output and "MOUNTINFO-READ" in output, output
    assert CANARY not in output and "not a secret" not in output, output


@requires_sandbox
def test_hiding_wins_over_the_folder_of_the_program_a_command_starts(secret_file, tmp_path):
    """The secret lies beside the program: its folder is shown, the secret still hidden."""
    folder = secret_file.parent
    program = folder / "run.sh"
    program.write_text(f"#!/bin/sh\ncat {secret_file} {folder}/notes.txt; echo RAN\n")
    program.chmod(0o755)
    output = agent(str(program), tmp_path / "work")
    assert "RAN" in output and "not a secret" in output, output  # its folder is shown
    assert CANARY not in output, output


# --- which *_FILE variables are secrets ------------------------------------------------------


def test_only_the_consoles_secret_names_are_secret_files(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("SECRET_KEY_FILE", "/run/secrets/key")
    monkeypatch.setenv("FAKE_VENDOR_KEY_FILE", "/run/secrets/vendor")
    monkeypatch.setenv("MY_TOKEN_FILE", "/run/secrets/token")
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    monkeypatch.setenv("CURL_CA_BUNDLE_FILE", "/etc/ssl/bundle.pem")
    settings.LOOP_PROVIDER_ENV = ["openai:FAKE_VENDOR_KEY"]
    settings.LOOP_SECRET_FILE_NAMES = []
    assert set(secret_files()) == {"/run/secrets/key", "/run/secrets/vendor"}
    settings.LOOP_SECRET_FILE_NAMES = ["MY_TOKEN"]
    assert "/run/secrets/token" in secret_files()


@requires_sandbox
def test_a_ca_bundle_passes_through_and_an_odd_file_variable_breaks_nothing(
    monkeypatch, settings, secret_file, tmp_path
):
    bundle = Path("/etc/os-release").resolve()
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    # Paths the worker cannot even look at (too long to stat): a secret's and any other's.
    monkeypatch.setenv("SOME_TOOL_FILE", "/tmp/" + "x" * 5000)
    monkeypatch.setenv("LOOP_EXTRA_SECRET_FILE", "/tmp/" + "y" * 5000)
    settings.LOOP_SECRET_FILE_NAMES = ["LOOP_EXTRA_SECRET"]
    (tmp_path / "work").mkdir()
    done = run_process(
        ["bash", "-c", f"grep -c . {bundle}; cat {secret_file}; echo DONE"],
        sandbox=for_run(None, tmp_path / "work"),
        on_chunk=lambda text: None,
    )
    lines = done.output.split()
    assert lines[-1] == "DONE", done.output
    assert int(lines[0]) > 0, done.output  # the bundle's own lines, not /dev/null's none
    assert CANARY not in done.output
