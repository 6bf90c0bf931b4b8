"""The run page: header, nodes, gate panel, iteration timeline, bounded queries."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Iteration
from tests.console.conftest import add_iteration, login

pytestmark = pytest.mark.django_db


def test_viewer_reads_the_run_page(client, viewer, gated_run):
    run, gate = gated_run
    response = login(client, viewer).get(reverse("run_detail", args=[run.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert "guided-refine" in body or "Guided" in body
    assert "The agent said DONE." in body
    assert "iteration 1 of 5" in body
    # A viewer sees no buttons it cannot use.
    assert "Accept &amp; complete" not in body and "Cancel run" not in body


def test_operator_sees_the_gate_controls(client, operator, gated_run):
    run, gate = gated_run
    body = login(client, operator).get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "Accept &amp; complete" in body
    assert 'data-empty-approve-completes="true"' in body
    # Both labels come from the model; the page's script only picks one.
    assert 'data-label-empty="Accept &amp; complete"' in body
    assert 'data-label-with-feedback="Continue"' in body
    assert reverse("gate_reject", args=[run.pk, gate.pk]) in body
    assert "Cancel run" in body and "Re-run" in body and "Resume" not in body


def test_gate_without_completion_offers_continue(client, operator, guided_run):
    from tests.console.conftest import open_loop_gate

    run, row = guided_run
    it = add_iteration(run, row, 1, output="not yet")
    open_loop_gate(run, row, it, signaled=False)
    body = login(client, operator).get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "The agent did not say it was done" in body
    assert "Accept &amp; complete" not in body and ">Continue<" in body


def test_approval_gate_has_one_button_per_decision(client, operator, approval_run):
    run, gate = approval_run
    body = login(client, operator).get(reverse("run_detail", args=[run.pk])).content.decode()
    assert 'name="decision" value="ship"' in body and "Ship it" in body
    assert 'name="decision" value="hold"' in body


def test_outsider_is_forbidden(client, outsider, gated_run):
    run, _ = gated_run
    assert login(client, outsider).get(reverse("run_detail", args=[run.pk])).status_code == 403


def test_anonymous_is_sent_to_login(client, gated_run):
    run, _ = gated_run
    response = client.get(reverse("run_detail", args=[run.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response.url


def test_unknown_run_is_404(client, viewer):
    assert login(client, viewer).get(reverse("run_detail", args=[999999])).status_code == 404


def test_post_is_405(client, viewer, gated_run):
    run, _ = gated_run
    assert login(client, viewer).post(reverse("run_detail", args=[run.pk])).status_code == 405


def test_timeline_shows_feedback_prompt_and_diff(client, viewer, guided_run):
    run, row = guided_run
    add_iteration(run, row, 1, output="line one\nline two")
    add_iteration(
        run,
        row,
        2,
        output="line one\nline 2!",
        feedback="Please fix line two",
        prompt="Reviewer feedback to address: Please fix line two",
    )
    body = login(client, viewer).get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "Feedback that started it" in body and "Please fix line two" in body
    assert "Reviewer feedback to address: Please fix line two" in body
    assert "Diff against iteration 1" in body
    assert '<span class="d-del">-line two</span>' in body
    assert '<span class="d-add">+line 2!</span>' in body
    # newest first
    assert body.index("iteration 2") < body.index("iteration 1</strong>")


def test_running_iteration_streams_into_a_live_block(client, viewer, guided_run):
    run, row = guided_run
    it = add_iteration(run, row, 1, status="running", raw_output="partial <b>text</b>")
    body = login(client, viewer).get(reverse("run_detail", args=[run.pk])).content.decode()
    assert f'data-live-output="it-{it.pk}" data-live-length="{len(it.raw_output)}"' in body
    assert "partial &lt;b&gt;text&lt;/b&gt;" in body
    assert reverse("run_live", args=[run.pk]) in body


def test_agent_output_cannot_inject_markup(client, viewer, guided_run):
    run, row = guided_run
    add_iteration(
        run,
        row,
        1,
        output=(
            "# Title\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n"
            "[click](javascript:alert(3)) **bold**"
        ),
    )
    body = login(client, viewer).get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "<h1>Title</h1>" in body and "<strong>bold</strong>" in body
    assert "<script>alert(1)" not in body
    assert "<img src=x" not in body and 'onerror="alert' not in body
    assert 'href="javascript:' not in body


def test_markdown_filter_sanitises_raw_html():
    from runs.templatetags.console_tags import render_markdown

    html = render_markdown('ok <a href="#" onclick="x()">a</a>\n\n<div onmouseover=y>z</div>')
    # Raw HTML is shown as text, never as tags.
    assert "<a " not in html and "<div" not in html
    assert "&lt;a href" in html and "&lt;div onmouseover" in html


def _thousand_iterations(run, row, count=1000):
    Iteration.objects.bulk_create(
        Iteration(
            run=run,
            node_run=row,
            node_id=row.node_id,
            number=n,
            status="completed",
            prompt=f"p{n}",
            output=f"output {n}\nsame line",
        )
        for n in range(1, count + 1)
    )


def _queries_with(client, run, row, *counts):
    """The run page's query count with each of `counts` iterations in turn, and the last
    answer."""
    url = reverse("run_detail", args=[run.pk])
    seen, response = [], None
    for count in counts:
        Iteration.objects.filter(run=run).delete()
        _thousand_iterations(run, row, count=count)
        if not seen:
            client.get(url)  # warm caches (content types, permissions)
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        assert response.status_code == 200
        seen.append(len(captured.captured_queries))
    return seen, response


def test_first_screen_query_count_does_not_grow_with_iterations(client, viewer, guided_run):
    run, row = guided_run
    (small, big), response = _queries_with(login(client, viewer), run, row, 30, 1000)
    assert big == small
    assert big <= 20
    body = response.content.decode()
    assert (
        "iteration 1000" in body
        and "iteration 981" in body
        and "iteration 980</strong>" not in body
    )
    assert "Load older iterations" in body


def test_an_operators_run_page_asks_no_query_per_iteration_card(client, operator, guided_run):
    """Each card of an operator's page offers "Fork from here" when its node allows it: that
    is read from the iterations' own query, not asked once per card."""
    run, row = guided_run
    # 16 cards are still one page: no "older" link either way.
    (few, more), response = _queries_with(login(client, operator), run, row, 4, 16)
    assert response.content.decode().count("data-fork-link") == 16
    assert more == few


def test_older_iterations_load_on_demand(client, viewer, guided_run):
    run, row = guided_run
    _thousand_iterations(run, row)
    client = login(client, viewer)
    newest = Iteration.objects.filter(run=run).order_by("-id")[19]
    url = reverse("run_iterations", args=[run.pk]) + f"?before={newest.pk}"
    fragment = client.get(url, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    text = fragment.content.decode()
    assert "<html" not in text and "iteration 980" in text and "iteration 961" in text
    assert "iteration 960</strong>" not in text and "Diff against iteration" in text
    page = client.get(url)
    assert "<html" in page.content.decode()


def test_iterations_url_says_its_answer_varies_with_hx_request(client, viewer, guided_run):
    """One URL answers a fragment or a page: a cache must keep the two apart."""
    run, row = guided_run
    url = reverse("run_iterations", args=[run.pk])
    client = login(client, viewer)
    for response in (client.get(url), client.get(url, HTTP_HX_REQUEST="true")):
        vary = [v.strip().lower() for v in response.headers.get("Vary", "").split(",")]
        assert "hx-request" in vary


def test_parts_render_alone(client, viewer, gated_run):
    run, _ = gated_run
    client = login(client, viewer)
    for part, marker in [
        ("header", 'id="run-header"'),
        ("nodes", 'id="run-nodes"'),
        ("gate", 'id="gate-panel"'),
        ("timeline", 'id="timeline"'),
    ]:
        response = client.get(reverse("run_part", args=[run.pk, part]), HTTP_HX_REQUEST="true")
        assert response.status_code == 200 and marker in response.content.decode()
        assert "<html" not in response.content.decode()
    assert client.get(reverse("run_part", args=[run.pk, "nope"])).status_code == 404


def test_event_log_page(client, viewer, gated_run):
    run, _ = gated_run
    response = login(client, viewer).get(reverse("run_events", args=[run.pk]))
    assert response.status_code == 200 and "run_created" in response.content.decode()
