"""A bash or script step's output is its stdout; its stderr is kept apart (NodeRun.stderr),
shown apart on the run page and in the API, and never read as `$node.output`."""

from django.urls import reverse

from runs import services
from runs.actor import ENGINE
from tests.api.conftest import client_for
from tests.conftest import wait_run

from .conftest import node

SEPARATE = """
nodes:
  - id: b
    bash: "echo out; echo 'err: ok' >&2"
  - id: s
    script: "import sys; print('py-out'); print('py-err', file=sys.stderr)"
    runtime: uv
  - id: after
    depends_on: [b]
    when: "$b.output == 'out'"
    bash: "printf 'saw=%s' $b.output"
"""


def test_stderr_is_kept_apart_from_the_output(live_worker, make_scripted_recipe, viewer, client):
    run = services.start_run(make_scripted_recipe(SEPARATE), actor=ENGINE)
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    b = node(run, "b")
    assert (b.output, b.stderr) == ("out", "err: ok\n")
    script = node(run, "s")
    assert (script.output, script.stderr) == ("py-out", "py-err\n")
    assert node(run, "after").output == "saw=out"  # the condition read stdout alone

    api = client_for(viewer)
    summary = {n["node"]: n for n in api.get(f"/api/runs/{run.pk}").body["nodes"]}
    assert summary["b"]["output"] == "out" and summary["b"]["stderr"] == "err: ok\n"
    assert summary["b"]["stderr_truncated"] is False
    steps = {s["node"]: s for s in api.get(f"/api/runs/{run.pk}/steps").body["items"]}
    assert steps["s"]["output"] == "py-out" and steps["s"]["stderr"] == "py-err\n"

    client.force_login(viewer)
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "<summary>Stderr</summary><pre>err: ok\n</pre>" in page


def test_a_failing_steps_stderr_says_why(live_worker, make_scripted_recipe):
    run = services.start_run(
        make_scripted_recipe('nodes:\n  - id: b\n    bash: "echo half; echo broke >&2; exit 3"\n'),
        actor=ENGINE,
    )
    wait_run(run, "completed", "failed")
    b = node(run, "b")
    assert b.status == "failed" and "status 3" in b.error
    assert (b.output, b.stderr) == ("half\n", "broke\n")


SEED_IDIOMS = """
nodes:
  - id: fix
    loop_group:
      until_bash: test $test.output = "green"
      max_iterations: 4
      nodes:
        - id: implement
          prompt: "@*: patched"
        - id: repair
          depends_on: [implement]
          when: "$LOOP_PREV.test.output == 'red'"
          bash: echo repaired
        - id: test
          depends_on: [implement]
          bash: |
            echo x >> attempts
            echo "3 tests, a report on stderr as test runners write it" >&2
            if [ $(wc -l < attempts) -ge 2 ]; then printf green; else printf red; fi
"""


def test_the_seed_idioms_fire_when_the_runner_writes_to_stderr(live_worker, make_scripted_recipe):
    run = services.start_run(make_scripted_recipe(SEED_IDIOMS), actor=ENGINE)
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    group = node(run, "fix")
    assert group.iteration_count == 2 and group.output == "green"
    repair = list(run.nodes.filter(node_id="fix.repair").order_by("iteration"))
    # iteration 2 read iteration 1's test output, "red", though the runner wrote stderr
    assert [r.status for r in repair] == ["skipped", "completed"]
    tests = run.nodes.filter(node_id="fix.test").order_by("iteration")
    assert all("report on stderr" in t.stderr for t in tests)
