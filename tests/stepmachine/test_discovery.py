"""Where step-machine recipes are found, as seed 003 says: the current repository's
`.planeai/loops/` (and a run's own repository's), the design's user folder, the bundled
ones; `loop recipe ls` shows what is there now, `loop create` uses it without a sync."""

import json

import pytest
from django.core.management import CommandError, call_command

from recipes.models import Recipe
from runs.models import Run
from tests.stepmachine.conftest import git

pytestmark = pytest.mark.django_db

ONLY_HERE = """\
schema: planeai.loop.recipe.v1
id: {id}
name: {name}
steps:
  - {{id: hello, kind: loop.event, event_kind: hello}}
"""


def project(tmp_path, recipe_id="only-here", name="Only here"):
    repository = tmp_path / "project"
    loops = repository / ".planeai" / "loops"
    loops.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=repository)
    (loops / "whatever.yaml").write_text(ONLY_HERE.format(id=recipe_id, name=name))
    git("add", ".", cwd=repository)
    git("commit", "-q", "-m", "loops", cwd=repository)
    return repository


def ls(capsys) -> dict:
    call_command("loop", "recipe", "ls", "--json")
    return {row["id"]: row for row in json.loads(capsys.readouterr().out)}


def test_the_current_repositorys_recipes_are_listed_and_created_without_a_sync(
    tmp_path, monkeypatch, capsys, operator
):
    repository = project(tmp_path)
    monkeypatch.chdir(repository / ".planeai")  # anywhere inside the repository
    row = ls(capsys)["only-here"]
    assert (row["origin"], row["valid"], row["synced"]) == ("project", True, "not synced")
    assert row["name"] == "Only here"

    call_command("loop", "create", "--recipe", "only-here", "--dry-run", "--json")
    assert json.loads(capsys.readouterr().out)["created"] is False
    assert not Recipe.objects.filter(slug="only-here").exists()  # a dry run loads nothing

    call_command("loop", "create", "--recipe", "only-here", "--user", operator.username)
    capsys.readouterr()
    run = Run.objects.get()
    assert run.recipe.slug == "only-here" and run.recipe.origin == "project"
    assert run.workdir == str(repository.resolve())
    assert ls(capsys)["only-here"]["synced"] == "synced"

    # An edit on disk shows at once; the next create loads it.
    loops = repository / ".planeai" / "loops"
    (loops / "whatever.yaml").write_text(ONLY_HERE.format(id="only-here", name="Edited"))
    row = ls(capsys)["only-here"]
    assert (row["name"], row["synced"]) == ("Edited", "changed since sync")


def test_a_runs_repository_given_by_path_is_scanned_too(tmp_path, capsys, operator):
    repository = project(tmp_path, "given-repo")
    call_command(
        "loop", "create", "--recipe", "given-repo", "--repository", str(repository),
        "--user", operator.username,
    )  # fmt: skip
    assert Run.objects.get().recipe.slug == "given-repo"


def test_the_designs_user_folder_is_read(tmp_path, settings, capsys):
    settings.LOOP_PLANEAI_USER_DIR = tmp_path / "planeai-loops"
    settings.LOOP_PLANEAI_USER_DIR.mkdir()
    (settings.LOOP_PLANEAI_USER_DIR / "mine.yaml").write_text(
        ONLY_HERE.format(id="from-user-folder", name="Mine")
    )
    row = ls(capsys)["from-user-folder"]
    assert (row["origin"], row["synced"]) == ("user", "not synced")
    call_command("recipe", "sync")
    capsys.readouterr()
    assert Recipe.objects.get(slug="from-user-folder").origin == "user"
    assert ls(capsys)["from-user-folder"]["synced"] == "synced"
    assert ls(capsys)["no-mistakes-demo"]["origin"] == "builtin"


def test_a_link_or_a_pipe_an_agent_left_in_the_loops_folder_is_not_read(tmp_path):
    """`isolation: project` lets an agent write the repository, `.planeai/loops` included:
    a link there to a secret must not become a recipe's source, a pipe must not block."""
    import os

    from loops.stepmachine.recipe_files import recipe_file
    from recipes import sync

    repository = project(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("THE-SECRET\n")
    loops = repository / ".planeai" / "loops"
    (loops / "planted.yaml").symlink_to(secret)
    os.mkfifo(loops / "pipe.yaml")
    planted = recipe_file("planted", (str(repository),))
    assert planted.file_text is None and planted.unreadable
    assert "THE-SECRET" not in str(planted.result.errors)
    # A pipe is no recipe file (recipes.layout.recipe_files); were it swapped in between,
    # read_source would refuse it without blocking.
    assert recipe_file("pipe", (str(repository),)) is None
    with pytest.raises(OSError):
        sync.read_source(loops / "pipe.yaml")
    assert recipe_file("only-here", (str(repository),)).load().slug == "only-here"
    assert not Recipe.objects.filter(source__contains="THE-SECRET").exists()


UNPARSEABLE = "schema: planeai.loop.recipe.v1\nid: {id}\nname: Broken\nsteps: [\n"


def validate(capsys, target) -> tuple[int, str]:
    try:
        call_command("loop", "recipe", "validate", target)
    except SystemExit as exc:
        return exc.code, capsys.readouterr().out
    return 0, capsys.readouterr().out


def synced_then_broken(tmp_path, monkeypatch, capsys, text: str):
    """A project recipe synced valid, then broken on disk."""
    repository = project(tmp_path)
    monkeypatch.chdir(repository)
    call_command("recipe", "sync")
    capsys.readouterr()
    assert Recipe.objects.get(slug="only-here").valid
    (repository / ".planeai" / "loops" / "whatever.yaml").write_text(text)
    return repository


def test_validate_and_show_read_the_file_on_disk_not_the_synced_copy(tmp_path, monkeypatch, capsys):
    """`loop create` loads the file and refuses it when broken, sending the user to `loop
    recipe validate`: validate and show must read that same file."""
    synced_then_broken(
        tmp_path,
        monkeypatch,
        capsys,
        ONLY_HERE.format(id="only-here", name="X").replace(
            "event_kind: hello}", "event_kind: hello, next: nowhere}"
        ),
    )
    code, out = validate(capsys, "only-here")
    assert code == 1
    assert "error: line 5, steps[0].next: step 'hello': next names unknown step 'nowhere'" in out
    call_command("loop", "recipe", "show", "only-here")
    assert "next: nowhere" in capsys.readouterr().out
    with pytest.raises(CommandError, match="loop recipe validate only-here"):
        call_command("loop", "create", "--recipe", "only-here", "--dry-run")


def test_validate_shows_where_an_unparseable_file_breaks(tmp_path, monkeypatch, capsys):
    synced_then_broken(tmp_path, monkeypatch, capsys, UNPARSEABLE.format(id="only-here"))
    code, out = validate(capsys, "only-here")
    assert code == 1 and "error: line " in out and "valid" not in out.splitlines()
    call_command("loop", "recipe", "show", "only-here")
    assert capsys.readouterr().out.rstrip("\n") == UNPARSEABLE.format(id="only-here").rstrip("\n")


def test_ls_says_an_unparseable_file_is_invalid_and_why(tmp_path, monkeypatch, capsys):
    repository = synced_then_broken(
        tmp_path, monkeypatch, capsys, UNPARSEABLE.format(id="only-here")
    )
    row = ls(capsys)["only-here"]
    assert (row["valid"], row["origin"], row["synced"]) == (False, "project", "changed since sync")
    assert row["path"] == str(repository.resolve() / ".planeai" / "loops" / "whatever.yaml")
    assert row["errors"] and row["errors"][0]["line"]
    call_command("loop", "recipe", "ls")
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("only-here ")]
    assert " INVALID" in line and "line " in line and "file gone" not in line


def test_ls_finds_a_project_recipe_in_a_runs_repository_it_does_not_scan(
    tmp_path, monkeypatch, capsys, operator
):
    """A run's `--repository` is neither the folder `ls` runs in nor in LOOP_REPOSITORIES:
    the console remembers the file it loaded, and it is still there."""
    repository = project(tmp_path, "given-repo")
    call_command(
        "loop", "create", "--recipe", "given-repo", "--repository", str(repository),
        "--user", operator.username,
    )  # fmt: skip
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)  # no repository here
    row = ls(capsys)["given-repo"]
    path = repository.resolve() / ".planeai" / "loops" / "whatever.yaml"
    assert (row["origin"], row["valid"], row["synced"]) == ("project", True, "synced")
    assert (row["path"], row["found"]) == (str(path), "remembered")
    path.write_text(UNPARSEABLE.format(id="given-repo"))
    row = ls(capsys)["given-repo"]
    assert (row["valid"], row["synced"], row["found"]) == (
        False,
        "changed since sync",
        "remembered",
    )
    code, out = validate(capsys, "given-repo")
    assert code == 1 and "error: line " in out
    path.unlink()
    row = ls(capsys)["given-repo"]
    assert (row["synced"], row["found"]) == ("file gone", "console")
