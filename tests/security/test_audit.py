"""Every decision at a gate is in the audit log: who, when, what, from which surface."""

import pytest
from django.core.management import call_command

from console.models import ApiToken
from runs.actor import Actor
from runs.models import Gate, NodeRun


@pytest.fixture
def gates(bundled, operator):
    from runs import services

    made = []
    for _ in range(3):
        run = services.start_run(
            bundled["release-approval"], actor=Actor.operator(operator, "console"), message="audit"
        )
        row = NodeRun.objects.create(run=run, node_id="decide", kind="approval", status="paused")
        made.append(
            Gate.objects.create(
                run=run,
                node_run=row,
                node_id="decide",
                kind="approval",
                message="ship?",
                decisions=[{"id": "ship", "label": "Ship"}, {"id": "hold", "label": "Hold"}],
            )
        )
    return made


@pytest.mark.django_db
def test_decisions_from_every_surface_are_recorded(client, operator, gates, capsys):
    by_console, by_api, by_cli = gates
    client.force_login(operator)
    client.post(f"/runs/{by_console.run_id}/gates/{by_console.pk}/approve/", {"decision": "ship"})
    _, secret = ApiToken.issue(operator, name="audit")
    api = client.post(
        f"/api/runs/{by_api.run_id}/reject",
        {"reason": "not today"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert api.status_code == 200, api.content
    call_command("run", "approve", str(by_cli.run_id), "--decision", "hold", "--user", "otto")
    for gate, surface, status, what in [
        (by_console, "console", "accepted", "ship"),
        (by_api, "api", "rejected", "not today"),
        (by_cli, "cli", "accepted", "hold"),
    ]:
        gate.refresh_from_db()
        assert (gate.surface, gate.status, gate.decided_by) == (surface, status, operator)
        assert gate.decided_at is not None and what in (gate.decision + gate.comment)
        event = gate.run.events.get(kind="gate_decided")
        assert event.data["by"] == "otto" and event.data["surface"] == surface


@pytest.mark.django_db
def test_the_audit_log_is_listed_and_read_only_in_the_admin(client, admin_user, gates, operator):
    from runs import services

    services.approve(gates[0].pk, Actor.operator(operator, "api"), decision="ship")
    client.force_login(admin_user)
    page = client.get("/admin/runs/gate/").content.decode()
    assert "otto" in page and "api" in page
    assert client.get(f"/admin/runs/gate/{gates[0].pk}/change/").status_code == 200  # view only
    response = client.post(f"/admin/runs/gate/{gates[0].pk}/change/", {"comment": "rewritten"})
    assert response.status_code == 403
    assert (
        client.post(f"/admin/runs/gate/{gates[0].pk}/delete/", {"post": "yes"}).status_code == 403
    )
    gates[0].refresh_from_db()
    assert gates[0].comment == ""
