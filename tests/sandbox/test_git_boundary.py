"""A workspace is hostile input: what an agent writes into a `.git` never decides a mount
of the next sandbox (C1 of the 2026-12-06 probe), nor what the console's own git reads or
runs, nor what a person's git runs afterwards (C2). Each attack runs through the real
sandbox, proves it ran (its own marker), and leaves no marker on the host side."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from loops.stepmachine import git as plane_git
from runs import worktree
from runs.sandbox import Confinement, for_run, run_process
from runs.sandbox.repository import UntrustedRepository, layout_of, record_file
from tests.sandbox.conftest import requires_sandbox
from tests.stepmachine.conftest import git as person_git  # git as a person types it

pytestmark = requires_sandbox


def bash(script: str, confinement: Confinement) -> str:
    done = run_process(["bash", "-c", script], sandbox=confinement, on_chunk=lambda text: None)
    return done.output


@pytest.fixture
def repo(tmp_path) -> Path:
    """A person's repository, outside the data folder."""
    path = tmp_path / "repo"
    path.mkdir()
    person_git("init", "-q", "-b", "main", cwd=path)
    (path / "a.txt").write_text("a\n")
    person_git("add", ".", cwd=path)
    person_git("commit", "-q", "-m", "first", cwd=path)
    return path


@pytest.fixture
def run_id() -> int:
    """A run number of the data folder no other test uses (these tests need no row)."""
    return 900_000 + uuid.uuid4().int % 90_000


def hook(tmp_path: Path, workspace: Path) -> tuple[Path, list[Path]]:
    """A program that leaves a marker where it runs: on the host side (a folder no
    sandbox sees) and in the workspace (which every sandbox of the run sees)."""
    host = tmp_path / "host-side"
    host.mkdir(exist_ok=True)
    markers = [host / "HOOK-RAN", workspace / "HOOK-RAN-IN-WORKSPACE"]
    script = tmp_path / "pwn.sh"
    script.write_text("#!/bin/sh\n" + "".join(f"touch {m}\n" for m in markers) + "exit 0\n")
    script.chmod(0o755)
    return script, markers


# --- C1: a `.git` file never decides a mount ------------------------------------------------


@pytest.mark.parametrize("target", ["data", "/", "/proc", "/tmp"])
def test_a_git_file_written_by_a_step_mounts_nothing_in_the_next(tmp_path, run_id, target):
    workdir = Path(settings.LOOP_DATA_DIR) / "runs" / str(run_id) / "work"
    workdir.mkdir(parents=True)
    secret = Path(settings.LOOP_DATA_DIR) / f"c1-{uuid.uuid4().hex}"
    secret.write_text("DATA-FOLDER-SECRET")
    host_only = tmp_path / "host-only"
    host_only.mkdir()
    (host_only / "marker").write_text("HOST-ONLY")
    gitdir = {"data": str(settings.LOOP_DATA_DIR)}.get(target, target)
    planted = bash(
        f"printf 'gitdir: %s\\n' '{gitdir}' > .git && echo PLANTED-{run_id}",
        for_run(run_id, workdir),
    )
    assert f"PLANTED-{run_id}" in planted  # the first step really wrote it
    seen = bash(
        f"""
        echo NEXT-STEP-RAN
        cat {secret} 2>/dev/null
        cat {host_only}/marker 2>/dev/null
        test -d /proc/{os.getpid()} && echo HOST-PROCESSES-VISIBLE
        touch {gitdir}/written-from-sandbox-{run_id} 2>/dev/null
        """,
        for_run(run_id, workdir),
    )
    assert "NEXT-STEP-RAN" in seen
    for leak in ("DATA-FOLDER-SECRET", "HOST-ONLY", "HOST-PROCESSES-VISIBLE"):
        assert leak not in seen, seen
    # What the step wrote there went to its own private folders, not the host's.
    assert not (Path(gitdir) / f"written-from-sandbox-{run_id}").exists()
    if target == "data":
        assert not (Path(gitdir) / "hooks").exists()  # nothing made in the named folder
    assert (workdir / ".git").read_text().startswith("gitdir:")  # still just a file


# --- C2: the console's git runs nothing an agent planted ------------------------------------


def test_a_worktree_git_file_pointed_at_an_agents_repository(tmp_path, repo, run_id):
    """(a) of the probe: the agent makes a repository with core.fsmonitor and points the
    worktree's `.git` at it; the console then records the turn (commit, diff)."""
    workdir = worktree.create(run_id, repo)
    script, markers = hook(tmp_path, workdir)
    # The agent's repository sits in the run's artifacts folder, which it may write.
    evil = Path(settings.LOOP_DATA_DIR) / "runs" / str(run_id) / "artifacts" / "evil"
    attempt = bash(
        f"""
        git init -q {evil} && git config -f {evil}/.git/config core.fsmonitor {script}
        printf 'gitdir: %s\\n' "{evil}/.git" > .git 2>/dev/null && echo REPOINTED
        echo ATTACK-RAN; echo change > b.txt
        """,
        for_run(run_id, workdir),
    )
    assert "ATTACK-RAN" in attempt and "REPOINTED" not in attempt, attempt
    assert (evil / ".git" / "config").is_file()
    # Even when the agent's `.git` file is in place (as if the mount had not held), the
    # console's git reads its own record of the worktree, not the file.
    (workdir / ".git").write_text(f"gitdir: {evil}/.git\n")
    recorded = worktree.record_changes(str(workdir), iteration=1, node_id="maker")
    assert recorded and "b.txt" in recorded["stat"]
    assert "b.txt" in person_git("show", "--stat", "loop/run-" + str(run_id), cwd=repo)
    assert plane_git.commit_all(workdir, "another") is None
    for marker in markers:
        assert not marker.exists(), f"{marker.name}: the planted fsmonitor ran"


def test_a_commondir_planted_in_the_persons_repository(tmp_path, repo, run_id):
    """(b) of the probe: `isolation: project`; the agent makes `.git/fakecommon` with
    core.fsmonitor and writes `.git/commondir`. The console's git ignores it, the file is
    removed when the agent's process ends, and the person's own git runs nothing after."""
    script, markers = hook(tmp_path, repo)
    attempt = bash(
        f"""
        mkdir -p .git/fakecommon && cp -r .git/objects .git/refs .git/HEAD .git/fakecommon/
        printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {script}\\n' \
          > .git/fakecommon/config
        echo fakecommon > .git/commondir && echo PLANTED-COMMONDIR
        """,
        for_run(run_id, repo),
    )
    assert "PLANTED-COMMONDIR" in attempt
    assert not (repo / ".git" / "commondir").exists()  # removed as the process ended
    person_git("status", cwd=repo)
    for marker in markers:
        assert not marker.exists(), "the person's own git ran what the agent planted"
    # Planted behind the sandbox's back: the console's git still reads the real repository.
    (repo / ".git" / "commondir").write_text("fakecommon\n")
    (repo / "c.txt").write_text("c\n")
    store = Path(settings.LOOP_DATA_DIR) / "runs" / str(run_id) / "snapshots"
    tree = plane_git.snapshot(repo, store)
    assert plane_git.tree_changes(repo, tree, plane_git.snapshot(repo, store), store) is None
    assert plane_git.dirty(repo)
    for marker in markers:
        assert not marker.exists(), f"{marker.name}: the planted fsmonitor ran"


def test_configuration_an_agent_tries_to_plant_in_a_worktree(tmp_path, repo, run_id):
    """core.hooksPath, diff.external and a filter driver with `.gitattributes`: the agent
    cannot write the repository's configuration or a worktree's, and the console's diff
    runs no external diff or textconv program even when the person's configuration names
    one."""
    workdir = worktree.create(run_id, repo)
    script, markers = hook(tmp_path, workdir)
    attempt = bash(
        f"""
        git config core.hooksPath {tmp_path} 2>/dev/null && echo HOOKSPATH-SET
        git config diff.external {script} 2>/dev/null && echo EXTERNAL-SET
        git config filter.evil.clean {script} 2>/dev/null && echo FILTER-SET
        git config --worktree core.fsmonitor {script} 2>/dev/null && echo WORKTREE-CONFIG-SET
        echo x > "$(git rev-parse --git-dir)/config.worktree" 2>/dev/null && echo PLANTED-WT
        echo '* filter=evil diff=evil' > .gitattributes && echo ATTRIBUTES-WRITTEN
        echo change >> a.txt
        """,
        for_run(run_id, workdir),
    )
    assert "ATTRIBUTES-WRITTEN" in attempt
    for refused in ("HOOKSPATH-SET", "EXTERNAL-SET", "FILTER-SET", "WORKTREE-CONFIG-SET"):
        assert refused not in attempt, attempt
    assert "PLANTED-WT" not in attempt  # an empty one the console made, read-only
    # The person's own configuration names diff programs: the console's diff uses none.
    person_git("config", "diff.external", str(script), cwd=repo)
    person_git("config", "diff.evil.textconv", str(script), cwd=repo)
    recorded = worktree.record_changes(str(workdir), iteration=1, node_id="maker")
    assert recorded and "a.txt" in recorded["stat"] and "+change" in recorded["diff"]
    for marker in markers:
        assert not marker.exists(), f"{marker.name}: a planted program ran"


def test_the_console_trusts_no_git_folder_it_did_not_make_in_a_run(tmp_path, run_id):
    """A repository an agent made in its run's folder is the agent's (its configuration
    included): the console's git does not run there."""
    workdir = Path(settings.LOOP_DATA_DIR) / "runs" / str(run_id) / "work"
    workdir.mkdir(parents=True)
    script, markers = hook(tmp_path, workdir)
    bash(
        f"git init -q . && git config core.fsmonitor {script} && echo x > x.txt",
        for_run(run_id, workdir),
    )
    with pytest.raises(UntrustedRepository):
        layout_of(workdir)
    assert not plane_git.is_repository(workdir)
    assert worktree.git("status", cwd=workdir).returncode != 0
    assert not any(marker.exists() for marker in markers)


def test_a_worktree_the_console_made_is_recorded_out_of_the_agents_reach(repo, run_id):
    workdir = worktree.create(run_id, repo)
    record = record_file(workdir)
    assert record.is_file() and record.parent == workdir.parent
    layout = layout_of(workdir)
    assert layout.common_dir == (repo / ".git").resolve()
    seen = bash(f"cat {record} 2>/dev/null || echo NOT-VISIBLE", for_run(run_id, workdir))
    assert "NOT-VISIBLE" in seen


def test_a_worktree_the_person_made_is_found_from_their_repository(tmp_path, repo):
    """The review merges into a worktree where the person has the target checked out: the
    console finds its git folders from the repository's side, never from its `.git` file."""
    own = tmp_path / "main-tree"
    person_git("worktree", "add", "-q", "-b", "side", str(own), cwd=repo)
    script, markers = hook(tmp_path, own)
    evil = tmp_path / "evil"
    person_git("init", "-q", str(evil), cwd=tmp_path)
    person_git(
        "config", "-f", str(evil / ".git" / "config"), "core.fsmonitor", str(script), cwd=tmp_path
    )
    (own / ".git").write_text(f"gitdir: {evil}/.git\n")
    assert not plane_git.dirty(own, repo)
    (own / "new.txt").write_text("new\n")
    assert plane_git.dirty(own, repo)
    with pytest.raises(plane_git.GitError):
        plane_git.dirty(own)  # without the repository nothing vouches for its `.git`
    assert not any(marker.exists() for marker in markers)
