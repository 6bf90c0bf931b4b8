"""The audit log page and its export: for administrators only, newest first, paginated,
filtered by kind, person, project and dates; the export streams CSV (with cells that
look like formulas made inert) or JSON Lines."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from console.models import AuditEvent, Project

pytestmark = pytest.mark.django_db

Kind = AuditEvent.Kind


@pytest.fixture
def history(client, operator, viewer):
    """A refused sign-in whose name reads as a formula, then a real one, and a membership."""
    beta = Project.objects.create(name="Beta", slug="beta")
    client.post("/accounts/login/", {"username": "=HYPERLINK(1)", "password": "x"})
    client.post("/accounts/login/", {"username": "otto", "password": "pw-otto"})
    client.logout()
    from console.models import Membership

    Membership.objects.create(project=beta, user=viewer, role="editor")
    return beta


def text(response) -> str:
    return response.content.decode()


def export(client, **params) -> str:
    response = client.get("/audit/export/", params)
    assert response.status_code == 200, text(response)
    return b"".join(response.streaming_content).decode()


def test_administrators_see_every_kind_newest_first(client, admin_user, history):
    client.force_login(admin_user)
    page = text(client.get("/audit/"))
    assert "sign-in refused for &#x27;=HYPERLINK(1)&#x27;" in page
    assert "otto signed in" in page and "vera: editor in Beta" in page
    assert page.index("vera: editor in Beta") < page.index("otto signed in")
    assert 'href="/audit/"' in page  # the navigation's link, for administrators


@pytest.mark.parametrize("persona", ["viewer", "operator", "editor", "outsider"])
def test_anyone_else_is_refused_with_the_missing_role(client, persona, request):
    user = request.getfixturevalue(persona)
    client.force_login(user)
    for url in ("/audit/", "/audit/export/?format=csv"):
        response = client.get(url)
        assert response.status_code == 403
        assert "<strong>administrator</strong> role" in text(response)
    assert 'href="/audit/"' not in text(client.get("/runs/"))


def test_an_anonymous_request_is_sent_to_sign_in(client):
    response = client.get("/audit/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_only_reading_the_log_is_allowed(client, admin_user):
    client.force_login(admin_user)
    assert client.post("/audit/").status_code == 405
    assert client.post("/audit/export/").status_code == 405


def test_filters_narrow_by_kind_person_project_and_dates(client, admin_user, history):
    client.force_login(admin_user)

    def shown(**filters):
        page = text(client.get("/audit/", filters))
        return [
            s for s in ("otto signed in", "otto signed out", "vera: editor in Beta") if s in page
        ]

    assert shown(kind="sign_in") == ["otto signed in"]
    assert shown(person="OTTO") == ["otto signed in", "otto signed out"]
    assert shown(project="beta") == ["vera: editor in Beta"]
    today = timezone.localdate()
    assert len(shown(since=today.isoformat(), until=today.isoformat())) == 3
    assert shown(until=(today - timedelta(days=1)).isoformat()) == []
    assert shown(since=(today + timedelta(days=1)).isoformat()) == []
    refused = text(client.get("/audit/", {"kind": "sudo"}))
    assert "No event is of the kind “sudo”." in refused and "otto signed in" not in refused


def test_the_page_is_paginated_newest_first(client, admin_user):
    client.force_login(admin_user)
    for n in range(60):
        AuditEvent.record(Kind.SIGN_IN, actor_name=f"p{n:02d}", subject=f"event-{n:02d}")
    first = text(client.get("/audit/", {"kind": "sign_in"}))
    assert "event-59" in first and "event-10" in first and "event-09" not in first
    older = first.split('<nav class="pager">')[1].split('href="?')[1].split('"')[0]
    second = text(client.get("/audit/?" + older.replace("&amp;", "&")))
    assert "event-09" in second and "event-00" in second and "event-10" not in second
    assert "← Newest" in second


def test_the_csv_export_makes_formulas_inert_and_keeps_the_filters(client, admin_user, history):
    client.force_login(admin_user)
    rows = list(csv.DictReader(io.StringIO(export(client, format="csv", kind="sign_in_refused"))))
    assert [r["actor"] for r in rows] == ["'=HYPERLINK(1)"]
    assert rows[0]["address"] == "127.0.0.1" and rows[0]["via"] == "password"
    assert json.loads(rows[0]["data"]) == {}
    everything = list(csv.DictReader(io.StringIO(export(client, format="csv"))))
    assert [int(r["id"]) for r in everything] == sorted(int(r["id"]) for r in everything)


def test_the_json_lines_export_has_every_field(client, admin_user, history):
    client.force_login(admin_user)
    (line,) = export(client, format="jsonl", project="beta").splitlines()
    record = json.loads(line)
    assert set(record) == {
        "id",
        "at",
        "kind",
        "actor",
        "via",
        "project",
        "subject",
        "address",
        "data",
    }
    assert record["kind"] == "membership_changed" and record["project"] == "beta"
    assert record["data"]["user"] == "vera" and record["data"]["after"] == "editor"


def test_the_export_refuses_an_unknown_format_or_filter(client, admin_user):
    client.force_login(admin_user)
    assert client.get("/audit/export/", {"format": "xlsx"}).status_code == 400
    refused = client.get("/audit/export/", {"format": "csv", "project": "nowhere"})
    assert refused.status_code == 400 and "There is no project “nowhere”." in text(refused)
