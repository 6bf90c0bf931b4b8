"""Seed 003 (step-machine loop recipes): its own examples, run through a real worker with
the demo agent as the default provider, checked against what the design says happens.

- `seed003/maker-verifier.yaml`: the seed's example of every field and step kind, put
  together (see its header). On a repository whose tests pass it goes maker → gates pass →
  verifier → `loop.event` → `human.wait` → `completed_unreviewed`; on one whose tests fail
  it retries the maker with the gate's output each round until `max_rounds` blocks it.
- The seed's full `no-mistakes` YAML is the bundled recipe, byte for byte
  (tests/stepmachine/test_format.py); its run to `approved` on the demo repository is
  tests/stepmachine/test_no_mistakes.py. Here: its `needs_human` ending.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command

from loops.stepmachine.demo import FEATURE_BRANCH, create_repository
from recipes.editing import create_recipe
from runs import inbox, services
from runs.actor import Actor
from runs.models import Gate, ProviderConfig, Run
from tests.stepmachine.conftest import events, git, settled

HERE = Path(__file__).parent / "seed003"
GOAL = "Add a farewell() function"


@pytest.fixture
def maker_verifier(db):
    ProviderConfig.objects.create(name="house", kind="demo", is_default=True)
    path = HERE / "maker-verifier.yaml"
    recipe, _ = create_recipe(path.read_text(), slug="maker-verifier", source_path=str(path))
    return recipe


def test_the_create_dry_run_resolves_the_seeds_inputs(maker_verifier, capsys, tmp_path):
    import json

    repository = create_repository(tmp_path)
    call_command(
        "loop", "create", "--recipe", "maker-verifier", "--goal", GOAL, "--dry-run", "--json",
        "--repository", str(repository),
    )  # fmt: skip
    preview = json.loads(capsys.readouterr().out)
    assert preview["inputs"] == {
        "goal": GOAL,
        "gate_command": "make ci",
        "draft_pr": True,
        "merge_strategy": "squash",
    }
    assert preview["created"] is False and not Run.objects.exists()


def test_passing_gates_lead_to_the_verifier_the_event_and_the_human(
    live_worker, maker_verifier, operator, tmp_path
):
    repository = create_repository(tmp_path)  # main checked out: `make ci` passes
    run = services.start_run(
        maker_verifier,
        actor=Actor.operator(operator, "console"),
        inputs={"goal": GOAL},
        workdir=str(repository),
    )
    settled(run, "paused")
    # human.wait: blocks with the seed's prompt shown to the person
    gate = run.gates.get(status=Gate.Status.PENDING)
    assert gate.node_id == "await_approval" and "approve or request changes" in gate.message
    assert [e.step for e in events(run, "tick")] == [
        "create_maker",
        "wait_for_maker",
        "run_gates",
        "create_verifier",
        "wait_for_verifier",
        "review_complete_event",
        "await_approval",
    ]
    # session.create: the default branch loop/<id>/<role>-r<round>, in a worktree
    (maker,) = [e.data for e in events(run, "session_started") if e.step == "maker"]
    assert maker["branch"] == f"loop/{run.pk}/maker-r1" and maker["isolation"] == "worktree"
    first = run.iterations.get(node_id="maker", number=1).prompt
    assert f"Goal: {GOAL}\nRound: 1" in first
    assert "# Context file AGENTS.md" in first  # knowledge.files injected
    assert "docs/adr/001-loop-recipes.md" in first and "(not found in the working tree)" in first
    assert "Follow TDD workflow" in first and "You implement features using TDD" in first
    # gates.run: the template default ran, and passed
    (finished,) = [e.data for e in events(run, "gates_finished")]
    assert finished["result"] == "pass" and [g["name"] for g in finished["gates"]] == ["ci"]
    # the conditional block disappears when the input is absent
    review = run.iterations.get(node_id="verifier", number=1).prompt
    assert f"Review the work for: {GOAL}" in review and "Task:" not in review
    (event,) = [e.data for e in events(run, "loop_event")]
    assert event["event"] == "review.complete"

    services.approve(gate.pk, Actor.operator(operator, "console"))
    settled(run, "completed_unreviewed")
    assert [e.step for e in events(run, "tick")][-1] == "done"


def test_failing_gates_retry_the_maker_with_the_error_until_max_rounds_blocks(
    live_worker, maker_verifier, operator, tmp_path
):
    repository = create_repository(tmp_path)
    git("checkout", "-q", FEATURE_BRANCH, cwd=repository)  # its new test fails
    run = services.start_run(
        maker_verifier,
        actor=Actor.operator(operator, "console"),
        inputs={"goal": GOAL},
        workdir=str(repository),
    )
    settled(run, "blocked")
    assert run.error == "max_rounds (3) reached"
    assert [e.data["result"] for e in events(run, "gates_finished")] == ["fail"] * 3
    # session.prompt re-prompts the maker's live session with runtime.last_error
    retries = run.iterations.filter(node_id="maker", number__gt=1).order_by("number")
    assert [f"Round {n} — fix the issues:" in it.prompt for n, it in enumerate(retries, 1)] == [
        True
    ] * 3
    assert all("[gate ci: exit" in it.prompt for it in retries)
    assert [e.data["round"] for e in events(run, "round_started")] == [2, 3]
    assert run.nodes.filter(kind="session", node_id="maker").count() == 1  # reused


def test_no_mistakes_ends_needs_human_when_the_rebase_conflicts(
    live_worker, bundled, operator, tmp_path
):
    ProviderConfig.objects.create(name="house", kind="demo", is_default=True)
    recipe = bundled["no-mistakes"]
    recipe.refresh_from_db()
    repository = create_repository(tmp_path)
    # main and the branch change the same line: the gatekeeper cannot rebase cleanly
    git("checkout", "-q", "main", cwd=repository)
    (repository / "greeting.py").write_text("def greet(name):\n    return 'Hi ' + name\n")
    git("add", "greeting.py", cwd=repository)
    git("commit", "-q", "-m", "a conflicting greet", cwd=repository)
    git("checkout", "-q", FEATURE_BRANCH, cwd=repository)
    run = services.start_run(
        recipe,
        actor=Actor.operator(operator, "console"),
        inputs={"branch": FEATURE_BRANCH},
        workdir=str(repository),
    )
    settled(run, "needs_human")
    assert [e.step for e in events(run, "tick")] == ["rebase", "wait_for_rebase", "needs_human"]
    assert "conflicts" in run.error
    assert (run.status, run.phase) == ("paused", "needs_human")
    assert run in inbox.needs_a_person()  # the inbox lists it for a person


def test_the_seeds_run_lifecycle_commands(live_worker, maker_verifier, operator, tmp_path, capsys):
    """create (without --start), tick, status, stop — as the seed's CLI section lists them."""
    import json

    repository = create_repository(tmp_path)

    def loop(*args) -> dict:
        call_command("loop", *args, "--json")
        return json.loads(capsys.readouterr().out)

    created = loop(
        "create", "--recipe", "maker-verifier", "--goal", GOAL, "--repository", str(repository),
        "--user", operator.username,
    )  # fmt: skip
    assert created["started"] is False and created["ticks"] == 0
    run = Run.objects.get(pk=created["id"])
    loop("tick", str(run.pk), "--user", operator.username)  # starts it: its worker ticks
    settled(run, "paused")
    status = loop("status", str(run.pk))
    assert status["current_step"]["id"] == "await_approval" and status["round"] == 1
    assert (status["ticks"], status["max_ticks"], status["max_rounds"]) == (7, 50, 3)
    stopped = loop("stop", str(run.pk), "--user", operator.username)
    assert stopped["status"] == "cancelled"
