"""A run is fixed at its start: the command files its recipe uses are kept on the run, so an
edit reaches the next run at once and never changes, or breaks, a run in flight."""

from pathlib import Path

from django.core.management import call_command

from runs import services
from runs.actor import ENGINE, Actor
from tests.api.conftest import client_for
from tests.conftest import pending_gate, wait_for, wait_run

from .conftest import calls, node

AGENT = Path(__file__).with_name("scripted_agent.py")
HEAD = f"""name: snap
interactive: true
providers:
  scripted: {{kind: command, command: "python3 {AGENT}"}}
provider: scripted
"""


def project_recipe(make_recipe, tmp_path, body: str, commands: dict, slug: str):
    folder = tmp_path / slug
    (folder / "commands").mkdir(parents=True, exist_ok=True)
    for name, text in commands.items():
        (folder / "commands" / f"{name}.md").write_text(text)
    path = folder / f"{slug}.yaml"
    path.write_text(HEAD + body)
    recipe = make_recipe(HEAD + body, slug=slug, origin="project", source_path=str(path))
    return recipe, folder / "commands"


def test_an_edited_command_file_reaches_the_next_run_at_once(live_worker, make_recipe, tmp_path):
    recipe, commands = project_recipe(
        make_recipe,
        tmp_path,
        "nodes:\n  - id: greet\n    command: greet\n",
        {"greet": "@*: COMMAND TEXT V1"},
        "edit",
    )
    first = services.start_run(recipe, actor=ENGINE)
    wait_run(first, "completed", "failed")
    assert node(first, "greet").output == "COMMAND TEXT V1"
    (commands / "greet.md").write_text("@*: COMMAND TEXT V2")
    second = services.start_run(recipe, actor=ENGINE)  # same recipe version, same worker process
    wait_run(second, "completed", "failed")
    assert node(second, "greet").output == "COMMAND TEXT V2"
    assert second.recipe_version_id == first.recipe_version_id
    assert second.snapshot["commands"] and "V2" in str(second.snapshot)


REFINE = """nodes:
  - id: refine
    loop:
      command: refine-cmd
      until: DONE
      max_iterations: 3
      interactive: true
      gate_message: Look at it.
  - id: ok
    depends_on: [refine]
    approval:
      message: Ship it?
"""


def test_a_deleted_command_file_breaks_no_decision_on_a_paused_run(
    live_worker, make_recipe, tmp_path, operator
):
    recipe, commands = project_recipe(
        make_recipe,
        tmp_path,
        REFINE,
        {"refine-cmd": "feedback=[$LOOP_USER_INPUT]\n@*: draft <promise>DONE</promise>"},
        "gone",
    )
    run = services.start_run(recipe, actor=ENGINE)
    wait_run(run, "paused")
    gate = wait_for(lambda: pending_gate(run), 30, message="a gate")
    (commands / "refine-cmd.md").unlink()
    (commands / "refine-cmd.md").with_name("other.md").write_text("unrelated")

    # The command line: feedback on the gate runs iteration 2 with the text it started with.
    call_command(
        "run", "approve", str(run.pk), "--comment", "shorter", "--user", operator.get_username()
    )
    second = wait_for(
        lambda: (g := pending_gate(run)) and g.pk != gate.pk and g, 30, message="gate 2"
    )
    assert "feedback=[shorter]" in calls(run)[-1]["prompt"]

    # The API: accepting answers 200 and the run goes on to its approval node.
    api = client_for(operator)
    answer = api.post(f"/api/runs/{run.pk}/approve", {"gate": second.pk})
    assert answer.status_code == 200, answer.content
    approval = wait_for(
        lambda: (g := pending_gate(run)) and g.kind == "approval" and g, 30, message="approval"
    )
    services.approve(approval.pk, Actor.operator(operator, "console"))
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert node(run, "refine").iteration_count == 2


INCLUDING = """nodes:
  - id: block
    include: block
  - id: ok
    depends_on: [block]
    approval:
      message: "Ship $block.output?"
"""


def test_an_included_workflow_is_kept_with_the_run_too(
    live_worker, make_recipe, tmp_path, operator
):
    block = tmp_path / "inc" / "block.yaml"
    block.parent.mkdir()
    block.write_text("name: block\nnodes:\n  - id: say\n    bash: printf V1\n")
    recipe, _ = project_recipe(make_recipe, tmp_path, INCLUDING, {}, "inc")
    first = services.start_run(recipe, actor=ENGINE)
    gate = wait_for(lambda: pending_gate(first), 30, message="the approval")
    block.write_text("name: block\nnodes:\n  - id: say\n    bash: printf V2\n")
    second = services.start_run(recipe, actor=ENGINE)  # the edit reaches the next run at once
    wait_for(lambda: pending_gate(second), 30, message="the second approval")
    assert "Ship V2?" in pending_gate(second).message
    block.unlink()  # and deleting it breaks no decision of a run in flight
    answer = client_for(operator).post(f"/api/runs/{first.pk}/approve", {"gate": gate.pk})
    assert answer.status_code == 200, answer.content
    wait_run(first, "completed", "failed")
    assert first.status == "completed" and "Ship V1?" in gate.message
