"""Fork a step machine from a session turn, through a real worker: the new run carries the
turns up to it (copies, never sent again), its machine stands where the original's stood
when it sent that turn, and the step's prompt goes again as the next turn with the fork's
feedback; the original is untouched. Roles are the scripted command agent."""

import pytest

from loops.stepmachine.spec import SESSION_KIND
from runs import services
from runs.actor import Actor
from runs.errors import Conflict
from runs.models import Iteration
from tests.api.conftest import client_for
from tests.console.conftest import login
from tests.stepmachine.conftest import calls, events, git, machine, settled

FORK = "Fork from here"

REVIEWED = """
schema: planeai.loop.recipe.v1
id: reviewed
name: Made, then reviewed
roles:
  maker: {provider: scripted, mode: write, isolation: project}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: |
      Make it.
      @handoff 1: completed: made the first draft
  - id: wait_make
    kind: handoff.wait
    from: maker
    on: {completed: review}
  - id: review
    kind: session.prompt
    role: maker
    select: latest
    prompt: |
      Review round {{ runtime.round }} after: {{ runtime.last_error }}
      @handoff *: completed: reviewed turn
  - id: wait_review
    kind: handoff.wait
    from: maker
    on: {completed: done}
  - id: done
    kind: loop.status
    status: approved
"""


def turns(run) -> list[Iteration]:
    return list(Iteration.objects.filter(run=run, node_id="maker").order_by("number"))


@pytest.fixture
def original(live_worker, scripted, plane_recipe, operator):
    run = settled(
        services.start_run(
            plane_recipe(REVIEWED), actor=Actor.operator(operator, "console"), message="m"
        ),
        "approved",
    )
    run.refresh_from_db()  # settled() may have read the row just before the last turn ended
    return run


def test_fork_a_session_turn_carries_history_and_sends_the_step_again(original, operator):
    before = (original.iterations.count(), original.events.count(), original.last_seq)
    made, reviewed = turns(original)

    fork = services.fork_run(
        original,
        Actor.operator(operator, "console"),
        node="maker",
        iteration=2,
        feedback="look harder",
    )
    settled(fork, "approved")
    assert fork.forked_from_id == original.pk
    first, second, third = turns(fork)
    assert [t.carried_from_id for t in (first, second, third)] == [made.pk, reviewed.pk, None]
    assert (first.output, second.output) == (made.output, reviewed.output)
    # Only the new turn reached the agent, resuming the session as it was after turn 2.
    (call,) = calls(fork)
    assert call["turn"] == 3 and call["resume"] and call["session"] == reviewed.session_id
    # The review step's prompt again, as the machine had it then (round, last handoff's
    # summary as runtime.last_error), with the feedback appended.
    assert "Review round 1 after: made the first draft" in third.prompt
    assert third.prompt.index("made the first draft") < third.prompt.index("look harder")
    assert third.feedback == "look harder" and "look harder" not in reviewed.prompt
    sent = events(fork, "turn_sent")[0].data
    assert (sent["from_step"], sent["turn"], sent["round"]) == ("review", 3, 1)
    assert machine(fork).ticks == machine(original).ticks
    # The original is untouched, and knows its fork.
    original.refresh_from_db()
    assert (original.iterations.count(), original.events.count(), original.last_seq) == before
    assert list(original.forks.all()) == [fork]


def test_fork_a_step_machine_from_the_api_and_the_page(original, operator, client):
    login(client, operator)
    page = client.get(original.get_absolute_url()).content.decode()
    assert page.count(FORK) == 2  # one link on each of the maker's turns
    answer = client_for(operator).post(
        f"/api/runs/{original.pk}/fork",
        {
            "node": "maker",
            "iteration": 1,
            "prompt": "Make it better.\n@handoff *: completed: better",
        },
    )
    assert answer.status_code == 201, answer.body
    fork = type(original).objects.get(pk=answer.body["id"])
    settled(fork, "approved")
    # Turn 1 carried; the edited prompt replaced make's, then the machine went on as before.
    assert [t.carried_from_id is None for t in turns(fork)] == [False, True, True]
    assert [c["turn"] for c in calls(fork)] == [2, 3]
    assert "Make it better." in turns(fork)[1].prompt and "Make it." not in turns(fork)[1].prompt
    assert "Review round 1 after: better" in turns(fork)[2].prompt
    assert f"/runs/{original.pk}/" in client.get(fork.get_absolute_url()).content.decode()
    assert f"/runs/{fork.pk}/" in client.get(original.get_absolute_url()).content.decode()
    # The link's form: feedback for the next turn, the fork opens.
    form = f"/runs/{original.pk}/fork/"
    shown = client.get(form, {"node": "maker", "iteration": 2})
    assert shown.status_code == 200
    # Where the feedback goes, in the machine's words (no workflow variable to name).
    assert "under “Feedback from a person”" in shown.content.decode()
    assert "$LOOP_USER_INPUT" not in shown.content.decode()
    opened = client.post(form, {"node": "maker", "iteration": 2, "feedback": "once more"})
    assert opened.status_code == 302
    again = original.forks.order_by("-id").first()
    assert opened.url == again.get_absolute_url() and again.pk != fork.pk
    settled(again, "approved")
    assert "once more" in turns(again)[2].prompt


def test_a_turn_without_the_machine_position_is_refused(original, operator):
    original.events.filter(kind="turn_sent", data__turn=1).delete()
    with pytest.raises(Conflict, match="position"):
        services.fork_run(original, Actor.operator(operator, "api"), node="maker", iteration=1)


IN_WORKTREES = """
schema: planeai.loop.recipe.v1
id: drafted
name: Drafted, then polished, in a worktree
roles:
  maker: {provider: scripted, mode: write}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: |
      Make it.
      @write *: draft.txt: first draft
      @handoff *: completed: made
  - {id: wait_make, kind: handoff.wait, from: maker, on: {completed: polish}}
  - id: polish
    kind: session.prompt
    role: maker
    select: latest
    prompt: |
      Polish it.
      @write *: draft.txt: polished
      @handoff *: completed: polished
  - {id: wait_polish, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""


def test_a_role_in_its_own_worktree_forks_into_a_worktree_of_the_fork(
    live_worker, scripted, plane_recipe, operator, repo
):
    original = settled(
        services.start_run(
            plane_recipe(IN_WORKTREES), actor=Actor.operator(operator, "console"), workdir=str(repo)
        ),
        "approved",
    )
    theirs = f"loop/{original.pk}/maker-r1"
    their_head = git("rev-parse", theirs, cwd=repo).strip()
    assert git("show", f"{theirs}:draft.txt", cwd=repo) == "polished"

    fork = services.fork_run(
        original,
        Actor.operator(operator, "console"),
        node="maker",
        iteration=1,
        feedback="Keep a note too.\n@write *: note.txt: from the fork",
    )
    settled(fork, "approved")
    ours = f"loop/{fork.pk}/maker-r1"
    # The fork's turns ran in the fork's own worktree, on its own branch, which began where
    # the original's stood after turn 1 (the first draft, not the polish that came later).
    first, second = calls(fork)
    assert first["cwd"].endswith(f"runs/{fork.pk}/roles/maker-r1") and first["turn"] == 2
    assert "Make it." in first["prompt"] and "Keep a note too." in first["prompt"]
    log = git("log", "--format=%s", ours, cwd=repo).splitlines()
    assert log[:3] == [
        f"loop run {fork.pk}: maker turn 3",
        f"loop run {fork.pk}: maker turn 2",
        f"loop run {original.pk}: maker turn 1",
    ]
    assert git("show", f"{ours}:note.txt", cwd=repo) == "from the fork"
    assert git("show", f"{ours}:draft.txt", cwd=repo) == "polished"  # turn 3, polish again
    # The original's branch and worktree did not move.
    assert git("rev-parse", theirs, cwd=repo).strip() == their_head
    assert "note.txt" not in git("ls-tree", "--name-only", theirs, cwd=repo)
    diffs = fork.events.filter(kind="worktree_diff", step="maker").order_by("seq")
    assert [(d.data["session"], d.data["iteration"]) for d in diffs] == [(1, 2), (1, 3)]


def test_a_worktree_session_opened_before_bases_were_recorded_is_refused(
    live_worker, scripted, plane_recipe, operator, repo
):
    original = settled(
        services.start_run(
            plane_recipe(IN_WORKTREES), actor=Actor.operator(operator, "console"), workdir=str(repo)
        ),
        "approved",
    )
    session = original.nodes.get(node_id="maker", kind=SESSION_KIND)
    session.state.pop("base")
    session.save(update_fields=["state"])
    with pytest.raises(Conflict, match="worktree opened before"):
        services.fork_run(original, Actor.operator(operator, "api"), node="maker", iteration=1)
    assert not original.forks.exists()


def test_a_turn_from_the_last_step_forks_and_the_fork_ends_after_it(
    live_worker, scripted, plane_recipe, operator
):
    last = REVIEWED.split("  - id: wait_review")[0].replace("id: reviewed", "id: last-turn")
    original = settled(
        services.start_run(
            plane_recipe(last), actor=Actor.operator(operator, "console"), message="m"
        ),
        "completed_unreviewed",
    )
    fork = services.fork_run(
        original, Actor.operator(operator, "api"), node="maker", iteration=2, feedback="again"
    )
    settled(fork, "completed_unreviewed")
    *_, new = turns(fork)
    assert new.number == 3 and new.status == Iteration.Status.COMPLETED
    assert "again" in new.prompt and machine(fork).ended_at_step == "review"
