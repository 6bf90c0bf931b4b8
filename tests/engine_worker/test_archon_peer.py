"""A peer's `.archon` folder run in place through a real worker: what the peer writes (values
pasted into literal text, literal fan-out lists, model aliases) gives the peer's output for
ordinary values and keeps hostile values data; checked places fail clearly before anything
runs; copies of the peer's deterministic join and fan-out tests end as the peer says."""

from __future__ import annotations

import json

import pytest

from recipes.models import Recipe
from recipes.sync import sync
from runs import services
from runs.actor import ENGINE
from runs.executor.context import run_dirs
from runs.models import Run
from tests.archon_peer import make_peer_repo
from tests.conftest import requires_runtime, wait_run

from .conftest import node

CANARY = "PWNED"
HOSTILE = [
    f"'; touch {CANARY}; '",
    f"$(touch {CANARY})",
    f"`touch {CANARY}`",
    f"EOF\ntouch {CANARY}\nEOF",
    f'"; touch {CANARY}; "',
]


@pytest.fixture
def peer(live_worker, tmp_path, settings):
    root = make_peer_repo(tmp_path / "checkout")
    settings.LOOP_RECIPE_DIRS = [str(root)]
    settings.LOOP_DEFAULT_PROVIDER = ""
    sync()
    recipes = {r.slug: r for r in Recipe.objects.filter(origin="project")}
    invalid = {slug: r.problems for slug, r in recipes.items() if not r.valid}
    assert not invalid, invalid
    return recipes


def _no_canary(run) -> None:
    for folder in run_dirs(run):
        if folder.exists():
            assert not list(folder.rglob(CANARY)), folder


def _ran(run) -> Run:
    wait_run(run, "completed", "failed")
    return run


@requires_runtime("bun")  # the peer's `ts` node
@pytest.mark.parametrize("message", ["hello world", *HOSTILE])
def test_values_pasted_into_literal_text_give_the_peer_output_and_stay_data(peer, message):
    run = _ran(services.start_run(peer["peer-literal"], actor=ENGINE, message=message))
    assert run.status == "completed", run.error
    assert node(run, "say").output == message
    assert node(run, "quoted").output == f"said: {message}."
    assert node(run, "compare").output == "same"
    assert node(run, "heredoc").output == f"$HOME stays; `date` stays; message: {message}"
    assert node(run, "ts").output == f"ts {len(message)} [{message}] true"
    assert node(run, "py").output == f"py {len(message)} [{message}] True"
    _no_canary(run)


def test_checked_places_run_for_an_integer(peer):
    run = _ran(services.start_run(peer["peer-checked"], actor=ENGINE, message="20"))
    assert run.status == "completed", run.error
    assert node(run, "arith").output == "40"
    assert node(run, "pyc").output == "21"
    assert node(run, "pysq").output == "60"


@pytest.mark.parametrize("message", HOSTILE[:3])
def test_checked_places_fail_before_running_a_hostile_value(peer, message):
    run = _ran(services.start_run(peer["peer-checked"], actor=ENGINE, message=message))
    assert run.status == "failed"
    arith = node(run, "arith")
    assert arith.status == "failed"
    assert "line 2: $count.output (the output of node 'count') is " in arith.error
    assert "not an integer; it reaches bash arithmetic through n there" in arith.error
    assert "so the step did not start" in arith.error
    assert arith.output == ""
    assert node(run, "pyc").status == "skipped"
    _no_canary(run)


@requires_runtime("bun")  # the peer's `check` node
def test_fan_out_over_a_literal_list_with_all_done_keeps_the_failure_as_data(peer):
    run = _ran(services.start_run(peer["peer-fan-all-done"], actor=ENGINE, message="go"))
    assert run.status == "completed", run.error
    kids = list(Run.objects.filter(parent=run).order_by("child_index"))
    assert [(k.message, k.status) for k in kids] == [
        ("one", "completed"),
        ("two", "completed"),
        ("fail-3", "failed"),
    ]
    results = json.loads(node(run, "each").output)
    assert results[:2] == ["did one", "did two"]
    assert results[2]["archon_failed"] is True and results[2]["status"] == "failed"
    assert node(run, "check").output == "ok did one,did two"


def test_fan_out_over_a_literal_list_with_all_success_fails_after_every_child(peer):
    run = _ran(services.start_run(peer["peer-fan-all-success"], actor=ENGINE, message="go"))
    assert run.status == "failed"
    each = node(run, "each")
    assert each.status == "failed"
    assert "1 of 3 child runs did not complete (join all_success)" in each.error
    failed = Run.objects.get(parent=run, child_index=2)
    assert f"run {failed.pk} (item 2) failed" in each.error
    statuses = [k.status for k in Run.objects.filter(parent=run).order_by("child_index")]
    assert statuses == ["completed", "completed", "failed"]
    assert node(run, "report").status == "skipped"


def test_the_join_test_ends_as_the_peer_says(peer):
    run = _ran(services.start_run(peer["peer-join"], actor=ENGINE, message="go"))
    assert node(run, "bad").status == "failed"
    assert node(run, "join-all-success").status == "skipped"
    assert node(run, "join-all-done").output == "done: a b"
    assert node(run, "join-one").output == "one"
    assert node(run, "join-none-failed").status == "skipped"
    assert node(run, "assert").output == "asserted"
    assert run.status == "failed" and "'bad' failed" in run.error


def test_model_aliases_and_the_repository_default_assistant(peer, settings):
    assert peer["peer-models"].problems["repository_assistant"] == "house"
    run = _ran(services.start_run(peer["peer-models"], actor=ENGINE, message="go"))
    assert run.status == "completed", run.error
    assert node(run, "small").output == "mini:tiny-1"
    assert node(run, "plain").output == "house:"  # no provider named: the repository's
    assert node(run, "insisted").output == "mini:tiny-1"  # the alias's provider wins
