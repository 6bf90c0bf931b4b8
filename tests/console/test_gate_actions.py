"""Deciding at gates from the console: approve (accept or iterate), decisions, reject."""

import pytest
from django.urls import reverse

from runs.models import Gate, Iteration
from tests.console.conftest import add_iteration, login, open_loop_gate

pytestmark = pytest.mark.django_db


def approve_url(run, gate):
    return reverse("gate_approve", args=[run.pk, gate.pk])


def test_empty_feedback_on_a_completed_iteration_accepts(client, operator, gated_run):
    run, gate = gated_run
    response = login(client, operator).post(approve_url(run, gate), {"comment": ""})
    assert response.status_code == 302 and response.url == reverse("run_detail", args=[run.pk])
    gate.refresh_from_db()
    assert gate.status == "accepted" and gate.decided_by == operator and gate.surface == "console"
    page = client.get(response.url).content.decode()
    assert "Accepted: refine completes with iteration 1." in page
    assert "by <strong>otto</strong>" in page


def test_feedback_iterates_with_the_feedback(client, operator, gated_run):
    run, gate = gated_run
    login(client, operator).post(approve_url(run, gate), {"comment": "shorter, please"})
    gate.refresh_from_db()
    assert gate.status == "iterated" and gate.comment == "shorter, please"
    nxt = Iteration.objects.get(run=run, number=2)
    assert nxt.feedback == "shorter, please" and nxt.after_gate


def test_a_line_break_counts_once_as_the_page_counts_it(client, operator, gated_run):
    """Browsers send a textarea's line breaks as CRLF: feedback of 90,000 characters as
    typed (120,000 as sent) is within the limit, and is kept with plain newlines."""
    run, gate = gated_run
    login(client, operator).post(approve_url(run, gate), {"comment": "ab\r\n" * 30_000})
    gate.refresh_from_db()
    assert gate.status == "iterated" and gate.comment == ("ab\n" * 30_000).strip()


def test_no_completion_and_no_feedback_iterates(client, operator, guided_run):
    run, row = guided_run
    row.iteration_count = 1
    row.save()
    gate = open_loop_gate(run, row, add_iteration(run, row, 1, output="draft"), signaled=False)
    login(client, operator).post(approve_url(run, gate), {"comment": ""})
    gate.refresh_from_db()
    assert gate.status == "iterated"


def test_htmx_gets_the_gate_fragment(client, operator, gated_run):
    run, gate = gated_run
    response = login(client, operator).post(
        approve_url(run, gate), {"comment": ""}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert response.status_code == 200 and body.startswith('<section id="gate-panel"')
    assert "Decision at" in body and "otto" in body and "accepted" in body


def test_second_decision_says_already_decided(client, operator, editor, gated_run):
    run, gate = gated_run
    login(client, operator).post(approve_url(run, gate), {"comment": ""})
    client.logout()
    login(client, editor)
    response = client.post(approve_url(run, gate), {"comment": "late"}, follow=True)
    assert response.status_code == 200
    assert "already decided by otto" in response.content.decode()
    fragment = client.post(approve_url(run, gate), {"comment": ""}, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "already decided by otto" in fragment.content.decode()
    assert Gate.objects.get(pk=gate.pk).decided_by == operator


def test_decisions_post_the_chosen_one(client, operator, approval_run):
    run, gate = approval_run
    login(client, operator).post(approve_url(run, gate), {"decision": "hold"})
    gate.refresh_from_db()
    assert gate.status == "accepted" and gate.decision == "hold"


def test_unknown_decision_is_a_message_not_an_error(client, operator, approval_run):
    run, gate = approval_run
    response = login(client, operator).post(
        approve_url(run, gate), {"decision": "yolo"}, follow=True
    )
    assert (
        response.status_code == 200 and "Choose one of the decisions" in response.content.decode()
    )
    gate.refresh_from_db()
    assert gate.status == "pending"


def test_reject_with_a_reason(client, operator, gated_run):
    run, gate = gated_run
    url = reverse("gate_reject", args=[run.pk, gate.pk])
    login(client, operator).post(url, {"reason": "off topic"})
    gate.refresh_from_db()
    assert gate.status == "rejected" and gate.comment == "off topic"


def test_reject_without_a_reason_is_refused_and_the_reason_shows_on_the_run(
    client, operator, gated_run
):
    run, gate = gated_run
    client = login(client, operator)
    url = reverse("gate_reject", args=[run.pk, gate.pk])
    refused = client.post(url, {"reason": "  "}, follow=True)
    gate.refresh_from_db()
    assert gate.status == "pending"
    assert "Say why you reject" in refused.content.decode()
    client.post(url, {"reason": "the tone is wrong"})
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "the tone is wrong" in page


@pytest.mark.parametrize("name", ["gate_approve", "gate_reject"])
def test_viewer_cannot_decide(client, viewer, gated_run, name):
    run, gate = gated_run
    response = login(client, viewer).post(reverse(name, args=[run.pk, gate.pk]))
    assert response.status_code == 403
    gate.refresh_from_db()
    assert gate.status == "pending"


@pytest.mark.parametrize("name", ["gate_approve", "gate_reject"])
def test_get_is_405(client, operator, gated_run, name):
    run, gate = gated_run
    assert login(client, operator).get(reverse(name, args=[run.pk, gate.pk])).status_code == 405


@pytest.mark.parametrize("name", ["gate_approve", "gate_reject"])
def test_unknown_gate_or_gate_of_another_run_is_404(
    client, operator, gated_run, approval_run, name
):
    run, gate = gated_run
    other_run, other_gate = approval_run
    client = login(client, operator)
    assert client.post(reverse(name, args=[run.pk, 999999])).status_code == 404
    assert client.post(reverse(name, args=[run.pk, other_gate.pk])).status_code == 404
    assert client.post(reverse(name, args=[999999, gate.pk])).status_code == 404


def test_csrf_is_enforced(operator, gated_run):
    from django.test import Client

    run, gate = gated_run
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    assert strict.post(approve_url(run, gate), {"comment": ""}).status_code == 403


@pytest.mark.parametrize("htmx", [False, True], ids=["post", "htmx"])
def test_feedback_over_the_limit_is_refused_and_the_gate_keeps_waiting(
    client, operator, gated_run, htmx
):
    """Too long a comment must not be dropped: on this gate an empty comment would accept
    the iteration and complete the run."""
    run, gate = gated_run
    too_long = "x" * 100_001
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = login(client, operator).post(
        approve_url(run, gate), {"comment": too_long}, follow=not htmx, **headers
    )
    body = response.content.decode()
    assert "Feedback is limited to 100,000 characters" in body
    assert "The gate is still waiting" in body
    gate.refresh_from_db()
    run.refresh_from_db()
    assert gate.status == "pending" and run.status == "paused"
    # The box has no maxlength (it would cut a paste silently): a counter, and this refusal.
    assert "maxlength" not in body and 'data-limit="100000"' in body
    assert "this has 100,001." in body
    if htmx:  # what was typed comes back in its box
        assert too_long in body


def test_a_reject_reason_over_the_limit_is_refused(client, operator, gated_run):
    run, gate = gated_run
    url = reverse("gate_reject", args=[run.pk, gate.pk])
    response = login(client, operator).post(url, {"reason": "x" * 100_001}, follow=True)
    assert "A reason is limited to 100,000 characters" in response.content.decode()
    gate.refresh_from_db()
    assert gate.status == "pending"


def test_a_gate_of_another_run_is_not_found(client, operator, gated_run, approval_run):
    run, _ = gated_run
    _, other = approval_run
    response = login(client, operator).post(approve_url(run, other), {"decision": "hold"})
    assert response.status_code == 404
    other.refresh_from_db()
    assert other.status == "pending"


def test_a_decision_that_needs_words_is_refused_without_them(client, operator, make_recipe):
    """`text_required` holds on every verb: the console's approval buttons (the older
    approve) as well as `respond`."""
    from runs import services
    from runs.actor import ENGINE
    from runs.models import Gate, NodeRun

    decisions = [{"id": "ship"}, {"id": "hold", "label": "Hold", "text_required": True}]
    source = f"name: g\nnodes:\n  - id: decide\n    approval:\n      message: Ship?\n      decisions: {decisions}\n"
    run = services.start_run(make_recipe(source, "g"), ENGINE)
    row = NodeRun.objects.create(run=run, node_id="decide", kind="approval")
    gate = row.pause(run, kind=Gate.Kind.APPROVAL, message="Ship?", decisions=decisions)
    page = login(client, operator).get(f"/runs/{run.pk}/gates/{gate.pk}/").content.decode()
    assert "Hold: required; otherwise optional" in page
    refused = client.post(approve_url(run, gate), {"decision": "hold"}, follow=True)
    assert "“Hold” needs a text" in refused.content.decode()
    gate.refresh_from_db()
    assert gate.is_pending
    client.post(approve_url(run, gate), {"decision": "hold", "comment": "legal first"})
    gate.refresh_from_db()
    assert (gate.status, gate.decision, gate.comment) == ("accepted", "hold", "legal first")
