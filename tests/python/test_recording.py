"""Python loops on the run kernel: synced as recipes, recorded from a script, executed by
a real worker, with the same run shape either way."""

from __future__ import annotations

import pytest

from recipes import editing
from recipes.validation import validate_source
from runs import services
from runs.actor import ENGINE
from runs.models import Iteration, NodeRun, Run
from tests.conftest import wait_run
from tests.python.scripted import run_async


def shape(run: Run) -> list[tuple]:
    """What a person sees of a run: nodes, their iterations and the reviewer's scores."""
    rows = []
    for it in Iteration.objects.filter(run=run).order_by("node_id", "number"):
        score = (it.structured or {}).get("score") if isinstance(it.structured, dict) else None
        rows.append((it.node_id, it.number, it.status, score))
    return rows


def ended(run: Run) -> dict:
    return run.events.filter(kind="run_completed").get().data


def test_bundled_python_recipes_sync_as_python_kind(bundled):
    loop, pipeline = bundled["scored-writer-reviewer"], bundled["content-pipeline"]
    for recipe in (loop, pipeline):
        assert recipe.kind == "python" and recipe.valid, recipe.problems
        assert recipe.current_version.number == 1
        assert recipe.source_path.endswith(".py")
    assert loop.name == "Scored writer and reviewer (Python)"
    assert "score reaches 80" in loop.description
    assert "class Review(BaseModel)" in loop.current_version.source


def test_a_python_recipe_without_a_workflow_or_with_bad_syntax_says_where():
    missing = validate_source("x = 1\n", "loops/nothing.py")
    assert not missing.ok and "module-level `workflow`" in str(missing.errors[0])
    broken = validate_source("workflow = (\n", "loops/broken.py")
    assert not broken.ok and broken.errors[0].line == 1
    assert "syntax" in str(broken.errors[0])


def test_a_python_recipe_is_read_only_in_the_console(bundled):
    recipe = bundled["scored-writer-reviewer"]
    with pytest.raises(editing.SourceInvalid, match="read-only"):
        editing.save_source(recipe, recipe.source + "\n# edited\n")
    assert recipe.versions.count() == 1


def test_the_writer_reviewer_from_a_script_records_its_run(bundled, transactional_db):
    from recipes.builtin.scored_writer_reviewer import Review, workflow

    result = run_async(workflow.run("Write marketing copy"))

    assert result.status == "condition_met" and result.iterations == 3
    assert isinstance(result.output, Review) and result.output.score >= 80
    run = Run.objects.get()
    assert run.recipe.slug == "scored-writer-reviewer"
    assert run.recipe.versions.count() == 1  # the same file: the same version
    assert run.status == "completed" and run.message == "Write marketing copy"
    assert ended(run)["ended"] == "condition_met"
    assert shape(run) == [
        ("reviewer", 1, "completed", 55),
        ("reviewer", 2, "completed", 70),
        ("reviewer", 3, "completed", 85),
        ("writer", 1, "completed", None),
        ("writer", 2, "completed", None),
        ("writer", 3, "completed", None),
    ]
    first = Iteration.objects.get(run=run, node_id="writer", number=1)
    assert "Write marketing copy" in first.prompt
    assert first.tokens_in and first.tokens_out and first.duration_ms is not None
    assert not any(
        "Write marketing copy" in it.prompt for it in Iteration.objects.filter(run=run)[1:]
    )
    statuses = dict(NodeRun.objects.filter(run=run).values_list("node_id", "status"))
    assert statuses == {"workflow": "completed", "writer": "completed", "reviewer": "completed"}


def test_the_writer_reviewer_from_the_console_runs_on_a_worker(live_worker, bundled):
    recipe = bundled["scored-writer-reviewer"]
    run = services.start_run(recipe, actor=ENGINE, message="Write marketing copy")
    wait_run(run, "completed", "failed", timeout=120)
    assert run.status == "completed", run.error
    assert ended(run) == {**ended(run), "ended": "condition_met", "iterations": 3}
    assert shape(run)[2] == ("reviewer", 3, "completed", 85)
    workflow_row = run.nodes.get(node_id="workflow")
    assert workflow_row.kind == "python" and '"score": 85' in workflow_row.output

    # The same file started from a script records the same shape.
    from recipes.builtin.scored_writer_reviewer import workflow

    run_async(workflow.run("Write marketing copy"))
    script_run = Run.objects.exclude(pk=run.pk).get()
    assert script_run.recipe_version == run.recipe_version
    assert shape(script_run) == shape(run)


def test_the_pipeline_example_runs_each_stage_on_a_worker(live_worker, bundled):
    run = services.start_run(bundled["content-pipeline"], actor=ENGINE, message="A launch post")
    wait_run(run, "completed", "failed", timeout=120)
    assert run.status == "completed", run.error
    counts = {}
    for it in Iteration.objects.filter(run=run):
        counts[it.node_id] = counts.get(it.node_id, 0) + 1
    assert counts == {
        "research": 1,
        "analysis.market": 1,
        "analysis.audience": 1,
        "draft.writer": 3,
        "draft.reviewer": 3,
        "editor": 1,
    }
    editor = Iteration.objects.get(run=run, node_id="editor")
    assert '"score": 85' in editor.prompt and "A launch post" not in editor.prompt


def test_the_recipe_page_shows_the_python_source_and_the_start_form_starts_it(
    client, operator, bundled
):
    from django.urls import reverse

    from tests.console.conftest import login

    login(client, operator)
    page = client.get(reverse("recipe_detail", args=["scored-writer-reviewer"]))
    body = page.content.decode()
    assert page.status_code == 200
    assert "Scored writer and reviewer (Python)" in body and "quality_reached" in body
    response = client.post(
        reverse("recipe_start", args=["scored-writer-reviewer"]), {"message": "Copy please"}
    )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.recipe.kind == "python" and run.message == "Copy please"


MAX_ONLY = '''"""Never satisfied"""
from loops.python import Agent, LoopWorkflow, contains_keyword

workflow = LoopWorkflow(
    [Agent("drafter", "Draft.", provider="demo")],
    stop_condition=contains_keyword("a word the demo never says"),
    max_iterations=2,
)
'''


def test_a_loop_that_runs_out_of_iterations_says_so_on_the_run(transactional_db, tmp_path):
    from tests.python.test_gates import import_file

    path = tmp_path / "never_satisfied.py"
    path.write_text(MAX_ONLY)
    module = import_file(path, "never_satisfied")
    result = run_async(module.workflow.run("go"))
    assert result.status == "max_iterations_reached" and result.iterations == 2
    run = Run.objects.get()
    assert run.status == "completed"
    assert ended(run)["ended"] == "max_iterations_reached"
    assert run.nodes.get(node_id="workflow").state["ended"] == "max_iterations_reached"
    checks = run.events.filter(kind="python_iteration_checked").order_by("seq")
    assert [e.data for e in checks] == [
        {"iteration": 1, "condition_met": False},
        {"iteration": 2, "condition_met": False},
    ]
