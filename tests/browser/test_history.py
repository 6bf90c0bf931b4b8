"""What a person sees of a run's history: fork and continue, compare two iterations, the
convergence chart growing live, and a budget stop raised and resumed."""

import re

import pytest
from playwright.sync_api import expect

from runs import services
from runs.actor import Actor
from runs.models import Iteration, Run
from tests.browser.conftest import log_in, mark_page, screenshot, still_same_page
from tests.conftest import wait_run

pytestmark = pytest.mark.browser

LOOP = """name: {name}
providers:
  drafter: {{kind: demo, delay: 0}}
provider: drafter
nodes:
  - id: draft
    loop:
      prompt: |
        Draft about $USER_MESSAGE. Notes: $LOOP_USER_INPUT
        When it is good, output: DONE after 3 iterations
      until: DONE
      max_iterations: 8
"""

SCORED = """name: scored
interactive: true
providers:
  drafter: {kind: demo, delay: 0}
provider: drafter
nodes:
  - id: draft
    output_format:
      type: object
      properties:
        text: {type: string}
        score: {type: integer}
      required: [text, score]
    loop:
      prompt: "Write about $USER_MESSAGE. Feedback: $LOOP_USER_INPUT"
      until: FINISHED
      max_iterations: 6
      interactive: true
      gate_message: Read the draft and its score.
"""


def test_fork_from_an_iteration_and_continue(
    live_worker, make_recipe, operator, console_server, page
):
    recipe = make_recipe(LOOP.format(name="forkable"), slug="forkable")
    original = services.start_run(
        recipe, actor=Actor.operator(operator, "console"), message="tides"
    )
    wait_run(original)
    assert original.status == "completed", original.error
    first = original.iterations.get(number=1)

    log_in(page, console_server, "otto")
    page.goto(console_server + original.get_absolute_url())
    page.locator(f"#iteration-{first.pk} [data-fork-link]").click()
    expect(page.locator("#fork-title")).to_contain_text("after draft · iteration 1")
    page.fill("#fork-feedback", "Mention the moon")
    screenshot(page, "fork-form")
    page.click("button:has-text('Fork and continue')")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    fork = Run.objects.get(forked_from=original)
    assert page.url.endswith(fork.get_absolute_url())

    header = page.locator("#run-header")
    expect(header).to_contain_text("Forked from")
    expect(header.get_by_role("link", name=f"Run {original.pk}")).to_have_attribute(
        "href", f"/runs/{original.pk}/#iteration-{first.pk}"
    )
    carried = page.locator(".iteration", has=page.locator(".carried"))
    expect(carried).to_have_count(1)
    expect(carried).to_contain_text("draft · iteration 1")
    expect(carried.locator(".carried")).to_have_text(f"carried over from run {original.pk}")
    second = page.locator(".iteration", has_text="draft · iteration 2")
    expect(second.locator(".feedback")).to_contain_text("Mention the moon")
    expect(page.locator("#run-header .badge").first).to_have_text("completed")
    screenshot(page, "fork-run")
    wait_run(fork)
    assert fork.iterations.filter(carried_from__isnull=True).count() == 2

    # The original links to its fork and is unchanged.
    page.goto(console_server + original.get_absolute_url())
    expect(page.locator(".fork-links")).to_contain_text(f"Run {fork.pk}")
    assert original.iterations.count() == 3


def test_compare_two_iterations_within_and_across_runs(
    live_worker, make_recipe, operator, console_server, page
):
    recipe = make_recipe(LOOP.format(name="comparable"), slug="comparable")
    one = services.start_run(recipe, actor=Actor.operator(operator, "console"), message="rivers")
    two = services.start_run(recipe, actor=Actor.operator(operator, "console"), message="mountains")
    wait_run(one)
    wait_run(two)
    a = one.iterations.get(number=3)

    log_in(page, console_server, "otto")
    page.goto(console_server + one.get_absolute_url())
    page.locator(f"#iteration-{a.pk} .iteration-actions a", has_text="Compare").click()
    b_first = one.iterations.get(number=2)
    page.wait_for_url(re.compile(rf"/runs/compare/\?a={b_first.pk}&b={a.pk}$"))
    output = page.locator("#diff-output")
    expect(output).to_contain_text("Output")
    expect(output.locator("table.split-diff")).to_be_visible()
    expect(output.locator("td.d-del").first).to_contain_text("iteration 2")
    expect(output.locator("td.d-add").first).to_contain_text("iteration 3")
    screenshot(page, "compare-split")

    # Across runs of one recipe, in the unified view; the address keeps the comparison.
    page.select_option("select[name=b_run]", str(two.pk))
    page.select_option("select[name=view]", "unified")
    page.click("button:has-text('Compare')")
    b = two.iterations.get(number=3)
    page.select_option("select[name=a]", str(a.pk))
    page.select_option("select[name=b]", str(b.pk))
    page.click("button:has-text('Compare')")
    expect(page).to_have_url(re.compile(rf"a={a.pk}.*b={b.pk}"))
    prompt = page.locator("#diff-prompt pre.diff")
    expect(prompt.locator(".d-del").first).to_contain_text("rivers")
    expect(prompt.locator(".d-add").first).to_contain_text("mountains")
    kept = page.url
    page.goto(kept)
    expect(page.locator("#diff-prompt .d-add").first).to_contain_text("mountains")
    screenshot(page, "compare-unified")


def test_the_convergence_chart_grows_live(live_worker, make_recipe, operator, console_server, page):
    recipe = make_recipe(SCORED, slug="scored")
    run = services.start_run(recipe, actor=Actor.operator(operator, "console"), message="bridges")
    wait_run(run, "paused")
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    mark_page(page)
    chart = page.locator("#run-chart")
    # One iteration is no line: its figures in words, not a chart of one dot.
    expect(chart.locator("figcaption")).to_contain_text("iteration 1 · score 55")
    expect(chart.locator(".chart-last")).to_have_text("55")
    expect(chart.locator(".chart-svg")).to_have_count(0)
    # One point is no line: the inbox draws no sparkline for it yet.
    page.goto(console_server + "/")
    gate_row = page.locator("#inbox tr", has_text=f"Run {run.pk}")
    expect(gate_row).to_contain_text("draft")
    expect(gate_row.locator("svg[data-sparkline]")).to_have_count(0)
    page.goto(console_server + run.get_absolute_url())
    mark_page(page)

    for count, score in ((2, "70"), (3, "85")):
        page.locator("[data-gate-feedback]").fill(f"Better, please ({count})")
        page.locator("[data-gate-primary]").click()
        expect(chart.locator(".chart-svg .dot")).to_have_count(count)
        expect(chart.locator(".chart-last")).to_have_text(score)
        expect(chart.locator(".chart-x .tick")).to_have_text(["#1", f"#{count}"])
    assert still_same_page(page)

    # Another number, chosen in the page, stays chosen when the chart refreshes.
    page.select_option("[data-chart-metric]", "tokens")
    expect(chart.locator("figcaption")).to_contain_text("tokens per iteration")
    page.locator("[data-gate-feedback]").fill("Once more")
    page.locator("[data-gate-primary]").click()
    expect(chart.locator(".chart-svg .dot")).to_have_count(4)
    expect(chart.locator("figcaption")).to_contain_text("tokens per iteration")
    screenshot(page, "chart-live")
    # The choice is in the address: a reload keeps it.
    assert "metric-draft=tokens" in page.url
    page.reload()
    expect(chart.locator("figcaption")).to_contain_text("tokens per iteration")
    expect(page.locator("[data-chart-metric]")).to_have_value("tokens")

    # The inbox draws a sparkline beside the loop waiting at its gate.
    page.goto(console_server + "/")
    gate_row = page.locator("#inbox tr", has_text=f"Run {run.pk}")
    expect(gate_row.locator("svg[data-sparkline='draft'] polyline")).to_have_count(1)


def test_budget_stop_then_raise_and_resume(
    live_worker, make_recipe, operator, console_server, page
):
    make_recipe(
        LOOP.format(name="budgeted").replace("3 iterations", "4 iterations"), slug="budgeted"
    )
    log_in(page, console_server, "otto")
    page.goto(console_server + "/recipes/budgeted/start/")
    page.fill("textarea[name=message]", "canals")
    page.fill("input[name=budget_iterations]", "2")
    page.click("button:has-text('Start run')")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    mark_page(page)
    run = Run.objects.get(message="canals")
    assert run.budget == {"iterations": 2}

    expect(page.locator("#run-header .badge").first).to_have_text("budget_exceeded")
    expect(page.locator("#run-header")).to_contain_text(
        "Stopped by its budget before the next iteration: iterations: 2 of 2"
    )
    panel = page.locator("#run-budget")
    expect(panel).to_contain_text("The run is stopped before its next iteration")
    expect(page.locator("#run-nodes .badge").first).to_have_text("paused")
    expect(panel.locator("[data-budget-limit=iterations]")).to_contain_text("stopped the run")
    assert Iteration.objects.filter(run=run).count() == 2
    screenshot(page, "budget-stopped")

    # The inbox lists it as needing a person, not as running, and offers what its page does.
    page.goto(console_server + "/")
    row = page.locator("#inbox .attention .run-rows li", has_text=f"Run {run.pk}")
    expect(row.locator("[data-budget-flag=iterations]")).to_contain_text("stopped")
    expect(row.locator("svg[data-sparkline='draft']")).to_be_visible()
    expect(page.locator("#inbox .counts")).not_to_contain_text("running")
    screenshot(page, "budget-inbox")
    row.locator("a.button", has_text="Raise the budget").click()
    page.wait_for_url(re.compile(rf"/runs/{run.pk}/#run-budget$"))
    mark_page(page)

    panel.locator("input[name=iterations]").fill("10")
    panel.locator("button:has-text('Save and resume')").click()
    expect(page.locator("#run-header .badge").first).to_have_text("completed")
    expect(page.locator("#run-budget [data-budget-limit=iterations]")).to_contain_text("4 of 10")
    assert still_same_page(page)
    wait_run(run, "completed")
    assert run.iterations.count() == 4
    screenshot(page, "budget-resumed")
