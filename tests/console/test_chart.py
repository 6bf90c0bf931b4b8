"""The convergence chart on the run page (runs/chart.py, runs/_chart.html): a line needs two
iterations; a node called once (a pipeline's one-shot agent) shows its one call's figures as
text, its duration among them, instead of a chart of one dot."""

import pytest

from runs import chart
from runs.models import NodeRun
from tests.console.conftest import add_iteration, login, quiet_start

pytestmark = pytest.mark.django_db


@pytest.fixture
def pipeline_run(bundled, operator):
    """content-pipeline as it ends: one call each for research and editor, three rounds of
    the write-review loop."""
    run = quiet_start(bundled["content-pipeline"], operator, "A launch post")
    run.status = "completed"
    run.save()
    for node_id, durations in (("research", [474]), ("draft.reviewer", [446, 436, 435])):
        row = NodeRun.objects.create(run=run, node_id=node_id, kind="agent", status="completed")
        for number, ms in enumerate(durations, 1):
            score = {"score": 50 + 15 * number} if node_id == "draft.reviewer" else None
            add_iteration(run, row, number, structured=score, tokens_in=100, tokens_out=20)
            row.iterations.filter(number=number).update(duration_ms=ms)
    return run


def figure(page: str, node: str) -> str:
    return page.split(f'data-chart-node="{node}"', 1)[1].split("</figure>", 1)[0]


def test_a_node_called_once_has_no_line_to_draw(pipeline_run):
    by_node = {series.node_id: series for series in chart.run_chart(pipeline_run)}
    assert by_node["research"].path == "" and by_node["research"].one_iteration
    assert by_node["draft.reviewer"].path and not by_node["draft.reviewer"].one_iteration


def test_the_page_says_a_one_call_node_s_figures_and_charts_the_loop(client, viewer, pipeline_run):
    page = login(client, viewer).get(pipeline_run.get_absolute_url()).content.decode()
    research = figure(page, "research")
    assert "<svg" not in research and "<circle" not in research
    assert "474 ms" in research and "120 tokens" in research
    reviewer = figure(page, "draft.reviewer")
    assert '<svg class="chart-svg"' in reviewer and reviewer.count('class="dot') == 3
    assert "score per iteration" in reviewer
