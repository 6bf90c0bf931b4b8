"""manage.py recipe … and run … as a script would use them."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

BROKEN = """name: broken
nodes:
  - id: loop
    loop:
      prompt: hi
      max_iterations: 0
"""


def manage(worker_env, *args, check=False):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


def test_validate_prints_errors_with_lines_and_exits_1(worker_env, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    result = manage(worker_env, "recipe", "validate", str(path))
    assert result.returncode == 1
    assert "line 6" in result.stdout and "max_iterations" in result.stdout
    data = json.loads(manage(worker_env, "recipe", "validate", str(path), "--json").stdout)
    assert data["valid"] is False
    assert {"path", "line", "column", "message"} <= set(data["errors"][0])


@pytest.mark.parametrize("slug", ["counter-loop", "fix-until-green", "writer-reviewer"])
def test_bundled_recipes_complete_from_run_start_wait(live_worker, worker_env, slug):
    manage(worker_env, "recipe", "sync", check=True)
    result = manage(
        worker_env, "run", "start", slug, "--message", "from the CLI", "--wait", "--json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "completed" and data["recipe"] == slug


def test_interactive_run_from_the_cli(live_worker, worker_env, django_user_model):
    from tests.conftest import make_user

    make_user(django_user_model, "cli-op", "operator")
    manage(worker_env, "recipe", "sync", check=True)
    paused = manage(
        worker_env, "run", "start", "guided-refine", "-m", "docs", "-i", "tone=formal", "--wait"
    )
    assert paused.returncode == 1 and "The agent said DONE." in paused.stdout
    run_id = paused.stdout.split()[1].rstrip(":")
    approve = manage(worker_env, "run", "approve", run_id, "--user", "cli-op", "--json")
    assert approve.returncode == 0, approve.stderr
    done = manage(worker_env, "run", "status", run_id, "--wait", "--json")
    assert json.loads(done.stdout)["status"] == "completed"
    again = manage(worker_env, "run", "approve", run_id)
    assert again.returncode != 0 and "already decided by cli-op" in again.stderr
    from runs.models import Gate

    assert Gate.objects.get(run_id=run_id).surface == "cli"


def test_bad_input_is_a_clear_error(live_worker, worker_env):
    manage(worker_env, "recipe", "sync", check=True)
    result = manage(worker_env, "run", "start", "guided-refine", "-i", "tone=loud")
    assert result.returncode != 0 and "tone: must be one of: friendly, formal" in result.stderr
