"""The real agent CLIs' tests skip nothing: a CLI that is not installed fails them, saying
which package to install."""

import sys

import pytest

from tests.providers.real_clis import cli


def test_a_missing_cli_fails_naming_its_package(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="installs @google/gemini-cli from the npm"):
        cli("gemini")
