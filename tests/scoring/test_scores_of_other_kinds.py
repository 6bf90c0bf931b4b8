"""The step-machine and driven kinds show scores where their recipes give them: a number
under `score` in a structured answer (a driven agent's output schema, any agent's
output_format) or in a step-machine role's handoff data is its iteration's score."""

from __future__ import annotations

import pytest

from loops.stepmachine.handoffs import record_handoff
from runs.actor import Actor
from runs.engine.stop_rules import score_in
from runs.executor.agent import AgentOutcome
from runs.models import Iteration, NodeRun
from runs.models.agent_call import answer_fields
from runs.providers.base import AgentResult
from tests.stepmachine.conftest import WAITING  # noqa: F401 - the recipe waiting_run starts

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("payload", "score"),
    [
        ({"score": 0.75, "text": "x"}, 0.75),
        ({"score": 3}, 3.0),
        ({"score": True}, None),
        ({"score": "0.9"}, None),
        ({"score": float("nan")}, None),
        ({"quality": 0.9}, None),
        ([0.9], None),
        (None, None),
    ],
)
def test_a_structured_answer_scores_itself_only_with_a_finite_number(payload, score):
    assert score_in(payload) == score


def test_an_agent_answer_with_a_score_field_scores_its_iteration():
    result = AgentResult(text='{"score": 0.6}')
    fields = answer_fields(AgentOutcome(result=result, raw="", text="", payload={"score": 0.6}))
    assert fields["score"] == 0.6 and fields["score_detail"] == {"source": "output"}
    plain = answer_fields(AgentOutcome(result=result, raw="", text="", payload=None))
    assert "score" not in plain


def test_a_step_machine_role_scores_its_turn_in_its_handoff_data(waiting_run, operator):
    session = NodeRun.objects.create(
        run=waiting_run, node_id="maker", kind="session", status="running"
    )
    turn = Iteration.objects.create(
        run=waiting_run, node_run=session, node_id="maker", number=1, status="running"
    )
    record_handoff(
        waiting_run.pk,
        role="maker",
        status="completed",
        summary="tests pass",
        data={"score": 0.8, "findings": []},
        actor=Actor.operator(operator, "api"),
        iteration_id=turn.pk,
    )
    turn.refresh_from_db()
    assert turn.score == 0.8 and turn.score_detail == {"source": "handoff"}
