"""The rows a console of the LAST RELEASE holds, made with that release's own code.

Not a test module: tests/upgrade/test_from_last_release.py runs this text through
`manage.py shell -c` in the release's tree (its cwd), on a database that release migrated.
It makes one recipe of each kind from the release's bundled files (through its
`recipes.editing.create_recipe`), then runs of each kind as its workers would have left
them, written with the ORM (no worker runs): the statuses a step machine set, a driven
run's pipeline steps (`agent` rows without max_iterations), a Python run's agents, an
iteration and a gate, and a loop_group's prompt steps whose usage their rows' state kept
(and the group's iteration carried as a sum). Its last line is IDS_MARK and a JSON object of what it made.

It imports only what the release and the code after it share (`recipes.editing`) and
reaches every model by its app label, so that little of it changes when the release it
runs against is bumped; what does is the rows whose upgrade is tested (a step machine's
statuses, the `agent` rows of a driven run), which are that release's.
"""

import json
from datetime import timedelta
from pathlib import Path

from django.apps import apps
from django.db import transaction
from django.utils import timezone

from recipes.editing import create_recipe

IDS_MARK = "UPGRADE-IDS "
BUILTIN = Path("recipes/builtin")  # the release's bundled recipes (cwd: its tree)
# The statuses a step machine set on its run before they became its phases.
STEP_MACHINE_WORDS = (
    "observing",
    "verifying",
    "blocked",
    "needs_human",
    "completed_unreviewed",
    "approved",
    "merged",
)

Run = apps.get_model("runs", "Run")
NodeRun = apps.get_model("runs", "NodeRun")
Iteration = apps.get_model("runs", "Iteration")
Gate = apps.get_model("runs", "Gate")
Loop = apps.get_model("loops", "Loop")
LoopIteration = apps.get_model("loops", "LoopIteration")
START = timezone.now() - timedelta(hours=1)


def at(seconds: int):
    """A moment of the made-up history, `seconds` after it began."""
    return START + timedelta(seconds=seconds)


def bundled_recipe(filename: str):
    """A Recipe (with its first version) from one of the release's bundled files."""
    path = BUILTIN / filename
    recipe, _ = create_recipe(
        path.read_text(), origin="builtin", source_path=str(path.resolve()), note="upgrade test"
    )
    return recipe


def hooked_driven_recipe():
    """The bundled driven recipe with the hook the release's docs show (docs/recipes.md:
    `loops.example_hooks:first_line_only`), made in the console."""
    loop = "      max_iterations: 5\n"
    source = (BUILTIN / "launch-note.yaml").read_text()
    assert source.count(loop) == 1, "the release's launch-note.yaml has no loop to hook"
    hook = '      hooks: {on_iteration_end: "loops.example_hooks:first_line_only"}\n'
    recipe, _ = create_recipe(source.replace(loop, loop + hook), slug="launch-note-hooked")
    return recipe


def new_run(recipe):
    return Run.objects.create(
        recipe=recipe,
        recipe_version=recipe.current_version,
        status="running",
        message="Widget 2.0 ships on Monday",
        started_by_name="upgrade test",
        started_at=at(0),
    )


def move(run, *statuses: str) -> None:
    """The run moves through `statuses` as the release moved runs (`Run.set_status`, under
    the run's lock), each move logged as its `run_<status>` event."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        for status in statuses:
            assert locked.set_status(status), f"run {run.pk} did not move to {status}"


def row(run, node_id: str, kind: str, status: str = "completed", **fields):
    done = status == "completed"
    return NodeRun.objects.create(
        run=run,
        node_id=node_id,
        kind=kind,
        status=status,
        started_at=at(1),
        finished_at=at(50) if done else None,
        **fields,
    )


def answered(run, node, number: int, output: str, started: int, finished: int):
    """A completed iteration of `node` (its row counts it)."""
    it = Iteration.objects.create(
        run=run,
        node_run=node,
        node_id=node.node_id,
        number=number,
        status="completed",
        prompt=f"Iteration {number} of {node.node_id}.",
        raw_output=output,
        output=output,
        attempts=1,
        started_at=at(started),
        finished_at=at(finished),
        duration_ms=(finished - started) * 1000,
    )
    NodeRun.objects.filter(pk=node.pk).update(iteration_count=number, output=output)
    return it


def step_machine_runs(recipe) -> dict:
    """A run in each status a step machine set, with its machine row (`steps`)."""
    machine_status = {"observing": "running", "verifying": "running"}
    machine_status |= {"blocked": "paused", "needs_human": "paused"}
    runs = {}
    for word in STEP_MACHINE_WORDS:
        run = new_run(recipe)
        state = {"current": "review", "round": 1, "ticks": 3, "status": word}
        row(run, "steps", "stepmachine", machine_status.get(word, "completed"), state=state)
        # A merged run was approved first; its review request was then merged.
        move(run, *(("approved", "merged") if word == "merged" else (word,)))
        runs[word] = run.pk
    return runs


def workflow_run(recipe) -> dict:
    """A workflow run paused at its loop's gate after the first iteration."""
    run = new_run(recipe)
    loop = row(run, "refine", "loop", "paused", max_iterations=5)
    it = answered(run, loop, 1, "A first draft of the note.", 2, 10)
    gate = Gate.objects.create(
        run=run,
        node_run=loop,
        iteration=it,
        node_id="refine",
        kind="loop",
        message="Read the draft. Accept it, or write feedback for another pass.",
    )
    move(run, "paused")
    return {"run": run.pk, "loop_row": loop.pk, "iteration": it.pk, "gate": gate.pk}


def group_run(recipe) -> dict:
    """A finished writer-reviewer run: one loop_group iteration whose two body prompt steps
    kept their usage in their state, the group's iteration carrying their sum."""
    run = new_run(recipe)
    group = row(run, "draft-loop", "loop_group", max_iterations=5)
    Iteration.objects.create(
        run=run,
        node_run=group,
        node_id="draft-loop",
        number=1,
        status="completed",
        output="Scored 85.",
        attempts=1,
        started_at=at(2),
        finished_at=at(20),
        tokens_in=30,
        tokens_out=12,
        cost_usd="0.030000",
    )
    NodeRun.objects.filter(pk=group.pk).update(iteration_count=1)
    steps = {}
    for node, (tokens_in, tokens_out, cost) in {
        "write": (10, 4, "0.01"),
        "review": (20, 8, "0.02"),
    }.items():
        state = {"prompt": f"Ask {node}.", "raw": f"{node} said", "session_id": f"s-{node}"}
        state |= {"tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost}
        step = row(
            run, f"draft-loop.{node}", "prompt", iteration=1, output=f"{node} said", state=state
        )
        steps[node] = step.pk
    row(run, "publish", "bash", output="Final review: Scored 85.")
    move(run, "completed")
    return {"run": run.pk, "group": group.pk, "steps": steps}


def driven_run(recipe) -> dict:
    """A finished driven run: the host's turn drove one loop iteration, a pipeline of
    researcher then drafter, each step an iteration of the agent's own `agent` row."""
    run = new_run(recipe)
    host = row(run, "host", "driven")
    turn = answered(run, host, 1, "The note is ready.", 1, 40)
    loop = Loop.objects.create(
        run=run,
        host_iteration=turn,
        agent="host",
        pipeline=["researcher", "drafter"],
        input="Widget 2.0 ships on Monday",
        max_iterations=5,
        status="completed",
        iteration_count=1,
        result="The launch note.",
        started_at=at(2),
        finished_at=at(30),
    )
    steps, agents = [], {}
    for n, agent in enumerate(loop.pipeline):
        agents[agent] = row(run, agent, "agent")  # no max_iterations: the host sets the cap
        it = answered(run, agents[agent], 1, f"What {agent} wrote.", 3 + 10 * n, 12 + 10 * n)
        steps.append({"agent": agent, "iteration": it.pk, "attempt": 1})
    LoopIteration.objects.create(
        loop=loop,
        number=1,
        status="completed",
        input="Widget 2.0 ships on Monday",
        output="The launch note.",
        steps=steps,
        started_at=at(3),
        finished_at=at(25),
        duration_ms=22_000,
    )
    move(run, "completed")
    return {"run": run.pk, "loop": loop.pk, "rows": {k: v.pk for k, v in agents.items()}}


def python_run(recipe) -> dict:
    """A finished Python run: its `workflow` node, an agent called once outside any loop
    (no max_iterations) and a LoopWorkflow's agent (max_iterations: the loop's)."""
    run = new_run(recipe)
    row(run, "workflow", "python")
    research = row(run, "content.research", "agent", state={"provider": "demo"})
    answered(run, research, 1, "The facts.", 2, 5)
    writer = row(run, "content.draft.writer", "agent", max_iterations=5, state={"provider": "demo"})
    answered(run, writer, 1, "A draft.", 6, 9)
    move(run, "completed")
    return {"run": run.pk, "rows": {"research": research.pk, "writer": writer.pk}}


def make_everything() -> dict:
    recipes = {
        "workflow": bundled_recipe("guided-refine.yaml"),
        "planeai": bundled_recipe("no-mistakes-demo.yaml"),
        "driven": bundled_recipe("launch-note.yaml"),
        "python": bundled_recipe("content_pipeline.py"),
        "driven_hooked": hooked_driven_recipe(),
        "group": bundled_recipe("writer-reviewer.yaml"),
    }
    made = {
        "recipes": {kind: [r.pk, r.kind] for kind, r in recipes.items()},
        "step_machine": step_machine_runs(recipes["planeai"]),
        "workflow": workflow_run(recipes["workflow"]),
        "driven": driven_run(recipes["driven"]),
        "python": python_run(recipes["python"]),
        "group": group_run(recipes["group"]),
    }
    made["statuses"] = dict(Run.objects.values_list("pk", "status"))
    made["operator"] = an_operator()
    return made


def an_operator() -> str:
    """A person with the release's global operator role (a group), to see after the
    upgrade that they keep what they could do."""
    user = apps.get_model("auth", "User").objects.create_user("upgrade-otto", password="pw")
    user.groups.add(apps.get_model("auth", "Group").objects.get(name="operator"))
    return user.username


print(IDS_MARK + json.dumps(make_everything()))
