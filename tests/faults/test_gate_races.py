"""Two decisions on the same gate at the same moment: exactly one wins, the other is told
the gate was already decided, and exactly one next iteration exists."""

import multiprocessing
import threading

import pytest
from django.db import connection, connections, transaction

from runs import services
from runs.actor import ENGINE, Actor
from runs.executor.state import lock_run
from runs.models import Gate, Iteration, NodeRun

TRIALS = 30
RECIPE = """
name: gate-race
interactive: true
provider: demo
nodes:
  - id: work
    loop:
      prompt: "Draft it. When it is good, output: DONE"
      until: DONE
      max_iterations: 100
      interactive: true
      gate_message: Read the draft.
"""
# Each trial pits two contenders: two approvals with feedback, or an approval against a
# rejection (so the winner's effect differs: a next iteration, or a failed node).
PAIRS = [("approve", "approve"), ("approve", "reject"), ("reject", "approve")]


@pytest.fixture
def quiet_engine(monkeypatch):
    """No worker: record what would be enqueued, publish nothing (forked children share
    the parent's sockets)."""
    from runs import dispatch, live

    sent = []
    monkeypatch.setattr(dispatch, "deliver", lambda name, *args: sent.append((name, args)))
    monkeypatch.setattr(live, "publish", lambda run_id, message: None)
    return sent


def gate_at_first_iteration(recipe) -> Gate:
    run = services.start_run(recipe, actor=ENGINE, message="race")
    with transaction.atomic():
        locked = lock_run(run.pk)
        row = NodeRun.objects.create(
            run=run, node_id="work", kind="loop", status="running", iteration_count=1
        )
        it = Iteration.objects.create(
            run=run, node_run=row, node_id="work", number=1, status="completed", output="v1"
        )
        return row.pause(locked, kind=Gate.Kind.LOOP, message="Read it.", iteration=it)


def decide(gate_pk: int, action: str, who: str, wait) -> str:
    try:
        gate = Gate.objects.get(pk=gate_pk)
        wait()
        if action == "approve":
            services.approve(gate.pk, Actor("api"), comment=f"more from {who}")
        else:
            services.reject(gate.pk, Actor("cli"), reason=f"no from {who}")
        return "won"
    except services.AlreadyDecided as exc:
        return str(exc)
    finally:
        connection.close()


def in_threads(gate_pk: int, actions) -> list[str]:
    barrier = threading.Barrier(len(actions))
    results = [None] * len(actions)

    def contender(index, action):
        results[index] = decide(gate_pk, action, f"thread{index}", barrier.wait)

    threads = [threading.Thread(target=contender, args=pair) for pair in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


_INHERITED = []


def _contender_process(gate_pk, action, who, barrier, results):
    # A forked child may inherit an open connection the parent still uses (once Playwright
    # has run, the parent's code runs in another context than the one fork copies). Never
    # touch it, not even to close it: set it aside and open a connection of our own.
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            _INHERITED.append(conn.connection)
            conn.connection = None
    results.put((who, decide(gate_pk, action, who, barrier.wait)))


def in_processes(gate_pk: int, actions) -> list[str]:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(len(actions))
    results = context.Queue()
    connections.close_all()  # children must open their own connections
    procs = [
        context.Process(
            target=_contender_process, args=(gate_pk, action, f"proc{i}", barrier, results)
        )
        for i, action in enumerate(actions)
    ]
    for proc in procs:
        proc.start()
    answers = dict(results.get(timeout=30) for _ in procs)
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    return [answers[f"proc{i}"] for i in range(len(actions))]


def assert_one_winner(gate: Gate, actions, results) -> None:
    assert results.count("won") == 1, results
    assert all("already decided" in r for r in results if r != "won"), results
    winner = actions[results.index("won")]
    gate.refresh_from_db()
    run = gate.run
    assert run.events.filter(kind="gate_decided").count() == 1
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    iterations = list(Iteration.objects.filter(run=run).values_list("number", flat=True))
    if winner == "approve":
        assert gate.status == Gate.Status.ITERATED
        assert sorted(iterations) == [1, 2]
    else:
        assert gate.status == Gate.Status.REJECTED
        assert iterations == [1]
        assert NodeRun.objects.get(run=run, node_id="work").status == "failed"


@pytest.mark.parametrize("contenders", [in_threads, in_processes], ids=["threads", "processes"])
def test_simultaneous_decisions_have_one_winner(
    contenders, transactional_db, quiet_engine, make_recipe
):
    recipe = make_recipe(RECIPE)
    for trial in range(TRIALS):
        gate = gate_at_first_iteration(recipe)
        actions = PAIRS[trial % len(PAIRS)]
        assert_one_winner(gate, actions, contenders(gate.pk, actions))


def test_many_contenders_still_one_winner(transactional_db, quiet_engine, make_recipe):
    recipe = make_recipe(RECIPE)
    for _ in range(5):
        gate = gate_at_first_iteration(recipe)
        actions = ("approve", "reject") * 3
        assert_one_winner(gate, actions, in_threads(gate.pk, actions))
