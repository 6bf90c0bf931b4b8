"""`manage.py run approve` while the broker is down: the decision is committed, so the
command says it is done (exit 0) and warns that the message that follows was not sent;
the sweep sends it (the soak's runs 26, 74 and 93 exited 1 with a kombu traceback)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from kombu.exceptions import OperationalError as BrokerDown

from runs import dispatch
from runs.models import Gate
from tests.console.conftest import add_iteration, gated_run, guided_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def broker_down(task_name, *args):
    raise BrokerDown("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


def test_an_approve_during_a_broker_outage_is_done_with_a_warning(
    gated_run,  # noqa: F811
    operator,
    monkeypatch,
):
    run, gate = gated_run
    monkeypatch.setattr(dispatch, "deliver", broker_down)
    out, err = StringIO(), StringIO()
    call_command("run", "approve", str(run.pk), "--user", "otto", stdout=out, stderr=err)
    gate.refresh_from_db()
    assert gate.status == Gate.Status.ACCEPTED
    assert f"run {run.pk}:" in out.getvalue()
    assert "warning: done, but the broker is out of reach" in err.getvalue()
    assert "advance_run" in err.getvalue() and "the sweep sends it" in err.getvalue()


def test_no_warning_when_the_broker_takes_the_message(gated_run, operator, monkeypatch):  # noqa: F811
    run, _ = gated_run
    monkeypatch.setattr(dispatch, "deliver", lambda *args: None)
    err = StringIO()
    call_command("run", "approve", str(run.pk), "--user", "otto", stdout=StringIO(), stderr=err)
    assert err.getvalue() == ""
