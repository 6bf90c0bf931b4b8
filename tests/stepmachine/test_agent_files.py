"""Files of the agents' tree the console reads (issue 34, M3 and H1): knowledge files that
became a FIFO, a link or a huge file, through a real worker (the turn goes on and its
prompt says what was refused or cut), and the review page reading gate logs an older run
left in its artifacts folder (no link followed, no FIFO waited on, never a failed page)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from loops.stepmachine import gate_commands
from loops.stepmachine.context import KNOWLEDGE_FILE_LIMIT
from loops.stepmachine.models import ReviewRequest
from loops.stepmachine.queries import gate_logs_of
from runs import services
from runs.actor import Actor
from tests.stepmachine.conftest import WAITING, calls, settled

KNOWING = """
schema: planeai.loop.recipe.v1
id: knowing
name: Knowing
knowledge:
  files: [pipe.md, link.md, big.md, docs/ok.md, via/ok.md]
roles:
  maker: {provider: scripted, mode: write, isolation: project}
steps:
  - {id: make, kind: session.create, role: maker, prompt: "@handoff 1: completed: read"}
  - {id: wait, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""


def test_knowledge_files_an_agent_replaced_never_block_or_leak(
    live_worker, scripted, plane_recipe, operator, repo, tmp_path
):
    secret = tmp_path / "secret.txt"
    secret.write_text("KNOWLEDGE-CANARY-SECRET\n")
    os.mkfifo(repo / "pipe.md")  # `rm notes.md; mkfifo notes.md`: no writer, ever
    (repo / "link.md").symlink_to(secret)
    (repo / "big.md").write_text("x" * (KNOWLEDGE_FILE_LIMIT + 10) + "END-OF-BIG")
    (repo / "docs").mkdir()
    (repo / "docs" / "ok.md").write_text("fine\n")
    (repo / "via").symlink_to(repo / "docs")  # a link on the way, even inside the tree
    run = services.start_run(
        plane_recipe(KNOWING), actor=Actor.operator(operator, "console"), workdir=str(repo)
    )
    settled(run, "approved")  # the worker was not blocked: the run went on to its end
    (call,) = calls(run)
    prompt = call["prompt"]
    assert (
        "# Context file pipe.md\n\n(not read: pipe.md is a FIFO (named pipe), not a regular "
        "file: not opened)"
    ) in prompt
    assert "# Context file link.md\n\n(not read: link.md is a symbolic link" in prompt
    assert "KNOWLEDGE-CANARY" not in prompt
    assert "x" * 1000 in prompt and "END-OF-BIG" not in prompt
    size = KNOWLEDGE_FILE_LIMIT + 20
    assert f"[cut at {KNOWLEDGE_FILE_LIMIT // 1024} KB of {size:,} bytes" in prompt
    assert "# Context file docs/ok.md\n\nfine" in prompt
    assert "# Context file via/ok.md\n\n(not read: via (in via/ok.md) is a symbolic link" in prompt


# --- gate logs an older run left in its artifacts folder ----------------------------------------


@pytest.fixture
def old_run(plane_recipe, operator):
    run = services.start_run(
        plane_recipe(WAITING), actor=Actor.operator(operator, "console"), start=False
    )
    ReviewRequest.objects.create(
        run=run, repository="", branch="b", target_branch="main", head_commit="0", target_commit="0"
    )
    return run


def _old_log(run, name: str) -> Path:
    folder = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "artifacts" / "gates"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    run.append_event(
        "gates_finished", "check", result="fail", gates=[], log=str(path), tail=f"tail of {name}"
    )
    return path


@pytest.mark.django_db
def test_old_gate_logs_in_the_artifacts_folder_are_read_safely(old_run, client, viewer, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("OLD-LOG-CANARY\n")
    _old_log(old_run, "plain.log").write_text("a plain old log\n")
    _old_log(old_run, "linked.log").symlink_to(secret)
    os.mkfifo(_old_log(old_run, "pipe.log"))
    _old_log(old_run, "gone.log")
    (_old_log(old_run, "long.log")).write_text("y" * gate_commands.OUTPUT_LIMIT + "LAST LINE\n")
    old_run.append_event("gates_finished", "check", result="fail", log="/etc/passwd", tail="t")
    logs = gate_logs_of(old_run)
    assert [(log["text"][-20:], log["cut"]) for log in logs] == [
        ("a plain old log\n", False),
        ("tail of linked.log", False),  # a link: the event's own tail, never the target
        ("tail of pipe.log", False),  # a FIFO: refused at once, never waited on
        ("tail of gone.log", False),
        ("y" * 10 + "LAST LINE\n", True),
        ("t", False),  # outside the run's folder: not opened at all
    ]
    client.force_login(viewer)
    page = client.get(f"/runs/{old_run.pk}/review/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "OLD-LOG-CANARY" not in text and "root:" not in text
    assert "Only the end of this log is shown." in text
