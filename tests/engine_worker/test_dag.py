"""The DAG: layers, joins, trigger rules, `when`, skips, cancel nodes, commands, resume."""

from pathlib import Path

from runs import services
from runs.actor import ENGINE, Actor
from runs.models import RunEvent
from tests.conftest import wait_for, wait_run

from .conftest import node


def test_trigger_rules_and_skip_propagation(live_worker, make_scripted_recipe):
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: ok
    bash: echo fine
  - id: bad
    bash: exit 1
  - id: strict
    depends_on: [ok, bad]
    bash: echo never
  - id: after-strict
    depends_on: [strict]
    bash: echo never
  - id: lenient
    depends_on: [ok, bad]
    trigger_rule: one_success
    bash: echo lenient
  - id: cleanup
    depends_on: [strict, bad]
    trigger_rule: all_done
    bash: echo cleaned
  - id: nofail
    depends_on: [ok, strict]
    trigger_rule: none_failed_min_one_success
    bash: echo nofail
"""),
        actor=ENGINE,
    )
    wait_run(run, "completed", "failed")
    assert run.status == "failed" and "'bad' failed" in run.error
    status = {n.node_id: n.status for n in run.nodes.all()}
    assert status == {
        "ok": "completed",
        "bad": "failed",
        "strict": "skipped",
        "after-strict": "skipped",
        "lenient": "completed",
        "cleanup": "completed",
        "nofail": "completed",
    }


def test_when_conditions_with_fields_and_or(live_worker, make_scripted_recipe):
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: classify
    output_format:
      type: object
      properties: {type: {type: string}, risk: {type: string}}
      required: [type, risk]
    prompt: '@*: {"type": "bug", "risk": "low"}'
  - id: fix-bug
    depends_on: [classify]
    when: "$classify.output.type == 'bug' and $classify.output.risk != 'high'"
    bash: echo fixing
  - id: feature
    depends_on: [classify]
    when: "$classify.output.type == 'feature' or $classify.output.risk == 'high'"
    bash: echo building
"""),
        actor=ENGINE,
    )
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert node(run, "fix-bug").output == "fixing"
    assert node(run, "feature").status == "skipped"
    assert "when condition is false" in node(run, "feature").skip_reason


def test_layers_run_concurrently(live_worker, make_scripted_recipe):
    """Each of a and b marks that it started, then waits for the other's mark: both see it
    only if they run at the same time (one after the other, the first gives up)."""
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: a
    bash: |
      touch a.started
      timeout 60 sh -c 'until [ -e b.started ]; do sleep 0.05; done' && echo met b
  - id: b
    bash: |
      touch b.started
      timeout 60 sh -c 'until [ -e a.started ]; do sleep 0.05; done' && echo met a
  - id: join
    depends_on: [a, b]
    bash: echo joined
"""),
        actor=ENGINE,
    )
    wait_run(run, "completed", "failed", timeout=120)
    assert run.status == "completed", run.error
    assert (node(run, "a").output, node(run, "b").output) == ("met b", "met a")
    assert node(run, "join").output == "joined"


def test_cancel_node_stops_the_run_with_its_reason(live_worker, make_scripted_recipe):
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: check
    bash: echo stop
  - id: halt
    depends_on: [check]
    when: "$check.output == 'stop'"
    cancel: Nothing to do today
  - id: later
    depends_on: [halt]
    bash: echo never
"""),
        actor=ENGINE,
    )
    wait_run(run, "cancelled", "completed", "failed")
    assert run.status == "cancelled" and run.error == "Nothing to do today"
    assert not run.nodes.filter(node_id="later", status="completed").exists()


def test_command_node_and_loop_command_resolve_from_the_commands_dir(
    live_worker, make_recipe, tmp_path
):
    project = tmp_path / "project"
    (project / "commands").mkdir(parents=True)
    (project / "commands" / "greet.md").write_text("@*: hello from a command file")
    source = f"""name: cmd
providers:
  scripted: {{kind: command, command: "python3 {Path(__file__).with_name("scripted_agent.py")}"}}
provider: scripted
nodes:
  - id: greet
    command: greet
"""
    path = project / "cmd.yaml"
    path.write_text(source)
    recipe = make_recipe(source, slug="cmd", origin="project", source_path=str(path))
    run = services.start_run(recipe, actor=ENGINE)
    wait_run(run, "completed", "failed")
    assert node(run, "greet").output == "hello from a command file"


def test_resume_reruns_only_what_did_not_complete(
    live_worker, make_scripted_recipe, operator, tmp_path
):
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: first
    bash: echo x >> first-runs; echo first
  - id: always
    always_run: true
    depends_on: [first]
    bash: echo x >> always-runs; echo always
  - id: flaky
    depends_on: [always]
    bash: test -f fixed
  - id: last
    depends_on: [flaky]
    bash: echo last
"""),
        actor=ENGINE,
    )
    wait_run(run, "failed", "completed")
    assert run.status == "failed"
    from runs.executor.context import run_dirs

    (run_dirs(run)[0] / "fixed").touch()  # in the run's folder: its steps see nothing else
    services.resume_run(run, Actor.operator(operator, "console"))
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    work = Path(run.workdir) if run.workdir else None
    from runs.executor.context import run_dirs

    work, _ = run_dirs(run)
    assert (work / "first-runs").read_text().count("x") == 1
    assert (work / "always-runs").read_text().count("x") == 2
    assert RunEvent.objects.filter(run=run, kind="run_running").count() == 2


def test_cancel_kills_a_running_iteration(live_worker, make_scripted_recipe, operator, tmp_path):
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: work
    loop:
      prompt: "@sleep *: 60\\n@*: never"
      until: DONE
      max_iterations: 2
"""),
        actor=ENGINE,
    )
    it = wait_for(lambda: run.iterations.filter(status="running").first(), 30)
    from .conftest import calls  # noqa: F401

    def agent_pids():
        import subprocess

        out = subprocess.run(
            ["pgrep", "-f", "scripted_agent.py"], capture_output=True, text=True
        ).stdout
        return [int(p) for p in out.split()]

    wait_for(agent_pids, 10)
    services.cancel_run(run, Actor.operator(operator, "console"))
    run.refresh_from_db()
    assert run.status == "cancelled"
    it.refresh_from_db()
    assert it.status == "cancelled"
    wait_for(lambda: not agent_pids(), 10, message="the agent process to be killed")
