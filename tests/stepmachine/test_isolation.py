"""Where roles work: a git worktree per session on loop/<run>/<role>-r<round> (or the
step's branch), the project tree, or read-only; the knowledge every prompt carries;
max_sessions; a template error failing its step."""

from runs import services
from runs.actor import Actor
from tests.stepmachine.conftest import calls, git, settled

WORKTREES = """
schema: planeai.loop.recipe.v1
id: worktrees
name: Worktrees
inputs:
  topic: {default: trees}
knowledge:
  files: [README.md, missing.md]
  instructions: [Keep it small.]
roles:
  maker:
    provider: scripted
    mode: write
    session_reuse: false
    instructions: You write files.
  reader: {provider: scripted, mode: review, isolation: readonly}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: |
      Round {{ runtime.round }} about {{ inputs.topic }}
      @write *: round.txt: round {{ runtime.round }}
      @handoff *: completed: wrote round {{ runtime.round }}
  - {id: wait, kind: handoff.wait, from: maker, on: {completed: next_round}}
  - {id: next_round, kind: round.next, next: again}
  - id: again
    kind: session.create
    role: maker
    branch: "topic/{{ inputs.topic }}"
    prompt: |
      @write *: named.txt: on a named branch
      @handoff *: completed: named
  - {id: wait_again, kind: handoff.wait, from: maker, on: {completed: read}}
  - id: read
    kind: session.create
    role: reader
    prompt: "@handoff *: completed: read it"
  - {id: wait_read, kind: handoff.wait, from: reader, on: {completed: done}}
  - {id: done, kind: loop.status, status: completed_unreviewed}
"""


def test_each_session_of_a_worktree_role_gets_its_own_branch(
    live_worker, scripted, plane_recipe, operator, repo
):
    run = services.start_run(
        plane_recipe(WORKTREES), actor=Actor.operator(operator, "console"), workdir=str(repo)
    )
    settled(run, "completed_unreviewed")
    first, second, reader = calls(run)
    round_one = f"loop/{run.pk}/maker-r1"
    assert first["cwd"].endswith(f"runs/{run.pk}/roles/maker-r1")
    assert second["cwd"].endswith(f"runs/{run.pk}/roles/maker-r2-s2")
    assert git("show", f"{round_one}:round.txt", cwd=repo) == "round 1"
    # the named branch started from the role's previous branch: round 1's work is on it
    assert git("show", "topic/trees:round.txt", cwd=repo) == "round 1"
    assert git("show", "topic/trees:named.txt", cwd=repo) == "on a named branch"
    assert git("log", "-1", "--format=%s", round_one, cwd=repo).strip() == (
        f"loop run {run.pk}: maker turn 1"
    )
    assert not (repo / "round.txt").exists()  # the project's own tree is untouched
    assert reader["cwd"] == str(repo) and reader["read_only"] == "1"
    assert git("status", "--porcelain", cwd=repo) == ""
    prompt = first["prompt"]
    assert prompt.index("You write files.") < prompt.index("Keep it small.")
    assert "# Context file README.md\n\nhello" in prompt
    assert "# Context file missing.md\n\n(not found in the working tree)" in prompt
    assert "Round 1 about trees" in prompt and "$LOOP_HANDOFF_CMD --status completed" in prompt
    assert run.events.filter(kind="worktree_diff", step="maker").count() == 2


SESSIONS = """
schema: planeai.loop.recipe.v1
id: two-sessions
name: Two sessions
policy: {max_sessions: 1}
roles:
  a: {provider: scripted, mode: write, isolation: project}
  b: {provider: scripted, mode: write, isolation: project}
steps:
  - {id: one, kind: session.create, role: a, prompt: "@handoff *: completed: a"}
  - {id: wait, kind: handoff.wait, from: a, on: {completed: two}}
  - {id: two, kind: session.create, role: b, prompt: "@handoff *: completed: b"}
  - {id: done, kind: loop.status, status: approved}
"""


def test_max_sessions_blocks_a_session_too_many(live_worker, scripted, plane_recipe, operator):
    run = services.start_run(plane_recipe(SESSIONS), actor=Actor.operator(operator, "console"))
    settled(run, "blocked")
    assert run.error == "max_sessions (1) reached: live sessions of a"


BROKEN_TEMPLATE = """
schema: planeai.loop.recipe.v1
id: broken-template
name: Broken template
roles:
  a: {provider: demo, mode: write, isolation: project}
inputs:
  topic: {}
steps:
  - {id: ask, kind: session.create, role: a, prompt: "About {{ inputs.topic }}"}
"""


def test_a_template_error_fails_the_step_with_its_message(live_worker, plane_recipe, operator):
    run = services.start_run(
        plane_recipe(BROKEN_TEMPLATE), actor=Actor.operator(operator, "console")
    )
    settled(run, "failed")
    assert run.error == (
        "step ask failed: template error in prompt: inputs.topic is undefined (known: none)"
    )
    assert not run.iterations.exists()


SHARED_TREE = """
schema: planeai.loop.recipe.v1
id: shared-tree
name: Shared tree
roles:
  maker: {provider: scripted, mode: write, isolation: project}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: |
      @write 1: agent.txt: written by the agent
      @handoff 1: completed: wrote agent.txt
  - {id: wait, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: completed_unreviewed}
"""


def test_isolation_project_commits_nothing_and_keeps_the_persons_changes_theirs(
    live_worker, scripted, plane_recipe, operator, repo
):
    git("checkout", "-q", "feature", cwd=repo)
    (repo / "README.md").write_text("hello\nthe person's edit, not committed\n")
    (repo / "notes.txt").write_text("the person's untracked notes\n")
    (repo / "staged.txt").write_text("staged by the person\n")
    git("add", "staged.txt", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo)
    staged = git("diff", "--cached", "--name-only", cwd=repo)
    objects = git("count-objects", cwd=repo)

    run = services.start_run(
        plane_recipe(SHARED_TREE), actor=Actor.operator(operator, "console"), workdir=str(repo)
    )
    settled(run, "completed_unreviewed")
    assert git("count-objects", cwd=repo) == objects  # the snapshots went elsewhere

    # Nothing was committed on the person's branch; their changes are as they left them.
    assert git("rev-parse", "HEAD", cwd=repo) == head
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=repo).strip() == "feature"
    assert git("diff", "--cached", "--name-only", cwd=repo) == staged == "staged.txt\n"
    assert "the person's edit" in (repo / "README.md").read_text()
    status = git("status", "--porcelain", cwd=repo).splitlines()
    assert sorted(status) == sorted(
        ["?? agent.txt", "?? notes.txt", " M README.md", "A  staged.txt"]
    )
    # The turn's diff holds what the agent changed, and only that.
    (diff,) = [e.data for e in run.events.filter(kind="worktree_diff", step="maker")]
    assert "agent.txt" in diff["stat"] and "written by the agent" in diff["diff"]
    for theirs in ("README.md", "notes.txt", "staged.txt"):
        assert theirs not in diff["stat"], diff["stat"]
    assert diff["commit"] == head.strip()
