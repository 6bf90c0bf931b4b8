"""A scored loop's scores where people read them (issue 40): each iteration's row (its score
as `shown` says it, where it came from, a judge's reason), the compare view, the convergence
chart (the score series, the target line, the plateau window) and the API. Rows are made by
hand: what is shown, not how a worker scores (that is the engine's tests' part)."""

import re

import pytest
from django.urls import reverse

from runs import chart
from runs.models import NodeRun
from tests.api.conftest import client_for
from tests.console.conftest import add_iteration, login, quiet_start

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script>"
SCORES = (0.3, 0.6, 0.8, 0.805, 0.81)
STOP = {
    "target": {"at": 0.9, "then": "complete"},
    "plateau": {"iterations": 3, "min_gain": 0.01, "then": "gate"},
}


@pytest.fixture
def scored_run(bundled, operator):
    """guided-refine's loop, judged: five scored iterations and a sixth still running."""
    run = quiet_start(bundled["guided-refine"], operator, "a haiku")
    run.status = "running"
    run.save()
    row = NodeRun.objects.create(
        run=run,
        node_id="refine",
        kind="loop",
        status="running",
        max_iterations=9,
        state={"stop": STOP, "score": "judge"},
    )
    its = [
        add_iteration(
            run,
            row,
            number,
            output=f"draft {number}",
            score=score,
            score_detail={"source": "judge", "reason": f"{HOSTILE} round {number}"},
            cost_usd="0.01",
        )
        for number, score in enumerate(SCORES, 1)
    ]
    its.append(add_iteration(run, row, len(SCORES) + 1, status="running"))
    return run, row, its


def card(page: str, it) -> str:
    return page.split(f'id="iteration-{it.pk}"', 1)[1].split("</li>", 1)[0]


def figure(page: str, node: str) -> str:
    return page.split(f'data-chart-node="{node}"', 1)[1].split("</figure>", 1)[0]


def assert_escaped(html: str) -> None:
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# --- the iteration's row ----------------------------------------------------------------


def test_each_scored_row_shows_its_score_its_source_and_the_judge_s_reason(
    client, viewer, scored_run
):
    run, _, its = scored_run
    page = login(client, viewer).get(reverse("run_detail", args=[run.pk])).content.decode()
    fourth = card(page, its[3])
    assert "score <strong>0.805</strong>" in fourth and 'data-score-source="judge"' in fourth
    assert "by a judge" in fourth and "The judge's reason" in fourth
    assert "round 4" in fourth
    assert "score <strong>0.3</strong>" in card(page, its[0])
    assert_escaped(page)
    # The running iteration has no score yet: its row says none.
    assert 'class="score"' not in card(page, its[5]) and "reason" not in card(page, its[5])


def test_the_refreshed_timeline_and_the_older_iterations_show_scores_too(
    client, viewer, scored_run
):
    run, _, its = scored_run
    login(client, viewer)
    part = client.get(reverse("run_part", args=[run.pk, "timeline"])).content.decode()
    assert "score <strong>0.81</strong>" in card(part, its[4])
    assert_escaped(part)
    older = client.get(reverse("run_iterations", args=[run.pk]), {"before": its[2].pk})
    older = older.content.decode()
    assert "score <strong>0.6</strong>" in card(older, its[1]) and "by a judge" in older
    assert_escaped(older)


def test_a_score_from_a_field_names_its_source_and_no_reason(client, viewer, bundled, operator):
    run = quiet_start(bundled["guided-refine"], operator, "a haiku")
    row = NodeRun.objects.create(run=run, node_id="refine", kind="loop", status="completed")
    it = add_iteration(run, row, 1, score=2 / 3, score_detail={"source": "field"})
    row_html = card(login(client, viewer).get(run.get_absolute_url()).content.decode(), it)
    assert "score <strong>0.6667</strong>" in row_html and "from the output" in row_html
    assert "score-reason" not in row_html


# --- the compare view --------------------------------------------------------------------


def test_the_compare_view_shows_both_scores_and_the_change(client, viewer, scored_run):
    run, _, its = scored_run
    login(client, viewer)
    page = client.get(reverse("iteration_compare"), {"a": its[1].pk, "b": its[3].pk})
    page = page.content.decode()
    scores = page.split('id="diff-score"', 1)[1].split("</section>", 1)[0]
    assert "— +0.205" in scores
    assert re.search(
        r'data-score-side="a"[^>]*><strong>0.6</strong> <span class="muted">by a judge', scores
    )
    assert re.search(r'data-score-side="b"[^>]*><strong>0.805</strong>', scores)
    assert "round 2" in scores and "round 4" in scores
    assert_escaped(page)


def test_the_compare_view_of_unscored_iterations_says_nothing_of_scores(
    client, viewer, bundled, operator
):
    run = quiet_start(bundled["guided-refine"], operator, "a haiku")
    row = NodeRun.objects.create(run=run, node_id="refine", kind="loop", status="completed")
    one, two = (add_iteration(run, row, n, output=f"draft {n}") for n in (1, 2))
    page = login(client, viewer).get(reverse("iteration_compare"), {"a": one.pk, "b": two.pk})
    assert 'id="diff-score"' not in page.content.decode()


# --- the convergence chart ---------------------------------------------------------------


def test_the_chart_plots_the_score_with_the_target_line_and_the_plateau_window(
    client, viewer, scored_run
):
    run, _, _ = scored_run
    (series,) = chart.run_chart(run)
    assert series.metric == "score" and series.options[0] == ("score", "score")
    assert [p.value for p in series.points] == list(SCORES)
    # The scale reaches the target, above every score: the line is the plot's top.
    assert series.high == 0.9 and series.marks.target_y == chart.PAD_Y
    assert (series.marks.plateau_first, series.marks.plateau_last) == (3, 5)

    page = login(client, viewer).get(run.get_absolute_url()).content.decode()
    drawn = figure(page, "refine")
    assert "score per iteration" in drawn
    svg = drawn.split('<svg class="chart-svg"', 1)[1].split("</svg>", 1)[0]
    assert 'class="line score" data-series="score"' in svg and svg.count('class="dot') == 5
    target = re.search(r'<line class="rule target" data-rule="target"[^>]*>', svg).group(0)
    assert f'y1="{chart.PAD_Y}' in target and "<title>target 0.9</title>" in svg
    plateau = re.search(r'<rect class="rule plateau" data-rule="plateau" x="([\d.]+)"', svg)
    third, fourth = sorted(p.x for p in series.points)[1:3]
    assert float(plateau.group(1)) == pytest.approx((third + fourth) / 2, abs=0.1)
    assert "<title>plateau window: iterations 3 to 5</title>" in svg
    labels = drawn.split('class="chart-rules"', 1)[1]
    assert ">target 0.9</span>" in labels and ">plateau window</span>" in labels


def test_another_metric_draws_no_rule_and_the_part_keeps_the_choice(client, viewer, scored_run):
    run, _, _ = scored_run
    (series,) = chart.run_chart(run, metrics={"refine": "duration"})
    assert series.metric == "duration" and series.marks is None
    part = login(client, viewer).get(
        reverse("run_part", args=[run.pk, "chart"]), {"metric-refine": "cost"}
    )
    part = part.content.decode()
    assert 'data-rule="target"' not in part and 'data-rule="plateau"' not in part


def test_a_scored_loop_without_stop_rules_and_an_output_field_called_score(bundled, operator):
    run = quiet_start(bundled["guided-refine"], operator, "a haiku")
    row = NodeRun.objects.create(run=run, node_id="refine", kind="loop", status="completed")
    for n in (1, 2):
        add_iteration(run, row, n, score=n / 4, structured={"score": 10 * n})
    (series,) = chart.run_chart(run)
    assert series.metric == "score" and series.marks is None
    assert series.options[:2] == [("score", "score"), ("field:score", "score (output field)")]


# --- the API -----------------------------------------------------------------------------


def test_the_api_gives_each_iteration_s_score_and_the_chart_s_stop_rules(viewer, scored_run):
    run, _, its = scored_run
    api = client_for(viewer)
    items = api.get(f"/api/runs/{run.pk}/iterations").body["items"]
    assert [it["score"] for it in items] == [*SCORES, None]
    assert items[0]["score_detail"] == {"source": "judge", "reason": f"{HOSTILE} round 1"}
    assert items[-1]["score_detail"] is None

    (loop,) = api.get(f"/api/runs/{run.pk}/chart").body["loops"]
    assert loop["metric"] == "score" and loop["metrics"][0] == "score"
    assert loop["stop_rules"] == STOP
    assert [p["score"] for p in loop["points"]] == list(SCORES)

    compared = api.get("/api/iterations/compare", a=its[0].pk, b=its[4].pk).body
    assert (compared["a"]["score"], compared["b"]["score"]) == (0.3, 0.81)
    assert compared["b"]["score_detail"]["source"] == "judge"
