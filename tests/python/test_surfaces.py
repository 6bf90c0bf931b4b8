"""A Python recipe from every surface: the API, `manage.py run start`, and the bundled file
run as a script in its own process, as docs/python.md shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runs.models import Run
from tests.api.conftest import client_for
from tests.conftest import ROOT, wait_run


def test_started_through_the_api(live_worker, bundled, operator):
    response = client_for(operator).post(
        "/api/runs", {"recipe": "scored-writer-reviewer", "message": "Via the API"}
    )
    assert response.status_code == 201, response.body
    run = wait_run(Run.objects.get(pk=response.body["id"]), "completed", "failed", timeout=120)
    assert run.status == "completed", run.error
    assert run.iterations.filter(node_id="reviewer").count() == 3


def run_command(worker_env, *args):
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_run_start_from_the_cli_waits_for_the_end(live_worker, worker_env):
    assert run_command(worker_env, "manage.py", "recipe", "sync").returncode == 0
    result = run_command(
        worker_env,
        "manage.py",
        "run",
        "start",
        "content-pipeline",
        "-m",
        "CLI",
        "--wait",
        "--json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "completed" and data["recipe"] == "content-pipeline"


def _documented_script_command() -> str:
    """The one command docs/python.md gives under "From a script"."""
    section = (ROOT / "docs" / "python.md").read_text().split("### From a script", 1)[1]
    block = section.split("```", 2)[1]
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_the_bundled_file_runs_as_a_script_as_the_docs_say(
    transactional_db, worker_env, bundled, viewer, client
):
    """The command docs/python.md (and the recipe's page) give works as written in a shell
    where no virtualenv is active, from the project's folder, and its run reads "started by
    script" in the console."""
    command = _documented_script_command()
    assert command.startswith(".venv/bin/python -m recipes.builtin.scored_writer_reviewer ")
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin
    )
    env = {k: v for k, v in worker_env.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env={**env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "condition_met after 3 iterations: score 85" in result.stdout
    run = Run.objects.get()
    assert run.status == "completed" and run.recipe == bundled["scored-writer-reviewer"]
    assert run.recipe.versions.count() == 1

    client.force_login(viewer)
    recipe_page = client.get("/recipes/scored-writer-reviewer/").content.decode()
    assert command.split(' "')[0] in recipe_page
    assert run.started_by_name == "script"
    header = client.get(f"/runs/{run.pk}/part/header/").content.decode()
    assert "<dt>Started by</dt><dd>script</dd>" in header
    assert "<td>script</td>" in client.get("/runs/").content.decode()


def test_run_start_takes_a_python_file(live_worker, worker_env, tmp_path):
    from tests.python.test_recording import MAX_ONLY

    path = tmp_path / "from_a_file.py"
    path.write_text(MAX_ONLY)
    result = run_command(
        worker_env, "manage.py", "run", "start", str(path), "-m", "go", "--wait", "--json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "completed" and data["recipe"] == "from-a-file"
    run = Run.objects.get(pk=data["id"])
    assert run.recipe.kind == "python"
    assert run.iterations.filter(node_id="drafter").count() == 2
