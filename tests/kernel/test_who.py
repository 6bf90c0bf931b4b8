""" "Who" reads the same everywhere: the person who cancelled or decided, on the run page,
in the CLI's words and in the admin's gate log (the three symptoms a review found)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from runs.models import Gate
from tests.console.conftest import gated_run, guided_run  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def test_a_console_cancel_at_a_gate_names_the_person(
    gated_run,  # noqa: F811
    operator,
    client,
):
    run, gate = gated_run
    client.force_login(operator)
    response = client.post(f"/runs/{run.pk}/cancel/")
    assert response.status_code in (200, 302)
    gate.refresh_from_db()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert gate.status == Gate.Status.CANCELLED
    assert gate.decider == "otto" and gate.surface == "console"
    assert "the engine" not in gate.comment and "otto" in gate.comment
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "cancelled by otto" in page and "cancelled by the engine" not in page


def test_a_cli_reject_without_a_user_reads_the_command_line_and_its_os_user(
    gated_run,  # noqa: F811
    monkeypatch,
):
    run, gate = gated_run
    monkeypatch.setattr("getpass.getuser", lambda: "somebody-else")
    call_command("run", "reject", str(run.pk), "--reason", "not this", stdout=StringIO())
    gate.refresh_from_db()
    assert gate.status == Gate.Status.REJECTED
    assert gate.decider == "cli (somebody-else)" and gate.surface == "cli"
    event = run.events.get(kind="gate_decided")
    assert event.data["by"] == "cli (somebody-else)"
    assert "system" not in gate.decider


def test_a_cli_reject_by_the_os_users_account_names_that_account(
    gated_run,  # noqa: F811
    operator,
    monkeypatch,
):
    run, gate = gated_run
    monkeypatch.setattr("getpass.getuser", lambda: "otto")
    call_command("run", "reject", str(run.pk), "--reason", "no", stdout=StringIO())
    gate.refresh_from_db()
    assert gate.decider == "otto" and gate.decided_by == operator


def test_the_admin_gate_log_shows_who_cancelled_a_gate(
    gated_run,  # noqa: F811
    operator,
    admin_user,
    client,
):
    run, gate = gated_run
    client.force_login(operator)
    client.post(f"/runs/{run.pk}/cancel/")
    client.force_login(admin_user)
    page = client.get("/admin/runs/gate/").content.decode()
    gate.refresh_from_db()
    assert gate.status == Gate.Status.CANCELLED
    row = page[page.index(f"/admin/runs/gate/{gate.pk}/") :]
    row = row[: row.index("</tr>")]
    assert '<td class="field-who">otto</td>' in row and "console" in row.lower()
