"""Bearer tokens and the browser session: hashed, shown once, revocable, CSRF-checked."""

import hashlib
import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from console.models import ApiToken
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db


def test_token_is_stored_hashed_and_acts_as_its_user(viewer):
    token, secret = ApiToken.issue(viewer, name="laptop")
    assert secret.startswith("lc_") and token.prefix == secret[:8]
    assert token.key_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(ApiToken.objects.filter(pk=token.pk).values().get())
    assert ApiToken.authenticate(secret) == viewer
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_revoked_token_is_401(viewer):
    token, secret = ApiToken.issue(viewer)
    client = ApiClient(secret)
    assert client.get("/api/runs").status_code == 200
    token.revoke()
    assert client.get("/api/runs").status_code == 401


def test_inactive_user_token_is_401(viewer):
    _, secret = ApiToken.issue(viewer)
    viewer.is_active = False
    viewer.save()
    assert ApiClient(secret).get("/api/runs").status_code == 401


@pytest.mark.parametrize("header", ["Bearer", "Bearer ", "Token abc", "Basic dXNlcjpwYXNz"])
def test_malformed_authorization_is_401(db, header):
    response = Client().get("/api/runs", headers={"Authorization": header})
    assert response.status_code == 401 and response.json()["detail"]


# As the live streams and /mcp say it (console/auth.py).
NO_TOKEN = "Authentication required: send 'Authorization: Bearer <token>'."
NOT_VALID = "Invalid API token: it is unknown or was revoked."


def test_a_wrong_or_revoked_token_is_told_apart_from_no_token(viewer):
    """Who sent a token learns it does not work (not that they should send one); a revoked
    and an unknown token read the same, so the answer tells nothing about which existed."""
    token, secret = ApiToken.issue(viewer)
    token.revoke()
    for client in [ApiClient(), ApiClient("lc_not-a-token"), ApiClient(secret)]:
        for path in ["/api/runs", "/api/openapi.json", "/api/docs"]:
            response = client.get(path)
            expected = NOT_VALID if client.headers else NO_TOKEN
            assert (response.status_code, response.body["detail"]) == (401, expected), path
    assert Client().get("/api/runs")["WWW-Authenticate"] == "Bearer"
    refused = ApiClient(secret).get("/api/runs")
    assert refused["WWW-Authenticate"] == 'Bearer error="invalid_token"'


def test_session_reads_without_a_token(viewer):
    client = Client()
    client.force_login(viewer)
    assert client.get("/api/runs").status_code == 200


def test_session_writes_need_the_csrf_token(operator, bundled):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    refused = client.post("/api/runs", {"recipe": "guided-refine"}, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]

    client.get(reverse("inbox"))  # sets the csrftoken cookie
    csrf = client.cookies["csrftoken"].value
    accepted = client.post(
        "/api/runs",
        {"recipe": "guided-refine", "message": "m"},
        content_type="application/json",
        headers={"X-CSRFToken": csrf},
    )
    assert accepted.status_code == 201


def test_bearer_writes_need_no_csrf(operator, bundled):
    _, secret = ApiToken.issue(operator)
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        "/api/runs",
        {"recipe": "guided-refine", "message": "m"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 201


def test_docs_and_schema_need_a_login(db, viewer):
    assert Client().get("/api/openapi.json").status_code == 401
    browser = Client().get("/api/docs", headers={"Accept": "text/html"})
    assert browser.status_code == 302 and "/accounts/login/" in browser["Location"]
    _, secret = ApiToken.issue(viewer, name="docs")
    schema = Client().get("/api/openapi.json", headers={"Authorization": f"Bearer {secret}"})
    assert schema.status_code == 200
    client = Client()
    client.force_login(viewer)
    assert client.get("/api/docs").status_code == 200
    # A token reads the page too (README, "The API"): it holds nothing the schema does not.
    page = Client().get("/api/docs", headers={"Authorization": f"Bearer {secret}"})
    assert page.status_code == 200 and "/api/openapi.json" in page.content.decode()
    paths = schema.json()["paths"]
    for path in [
        "/api/recipes",
        "/api/recipes/{slug}",
        "/api/recipes/validate",
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}/iterations",
        "/api/runs/{run_id}/events",
    ]:
        assert path in paths
    # It lists only what the token may use: a viewer's leaves out what operates.
    for path in [
        "/api/runs/{run_id}/approve",
        "/api/runs/{run_id}/reject",
        "/api/runs/{run_id}/cancel",
        "/api/runs/{run_id}/resume",
    ]:
        assert path not in paths
    assert "post" not in paths["/api/runs"] and "get" in paths["/api/runs"]


# --- manage.py api_token -------------------------------------------------------------------


def run_command(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("api_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_command_creates_lists_and_revokes(operator):
    out, err = run_command("create", "otto", "--name", "ci")
    secret = out.strip()
    assert ApiClient(secret).get("/api/runs").status_code == 200
    token = ApiToken.objects.get()
    assert token.name == "ci" and "not stored" in err

    listing, _ = run_command("list")
    assert token.prefix in listing and "otto" in listing and secret not in listing

    revoked, _ = run_command("revoke", str(token.pk))
    assert "Revoked" in revoked
    assert ApiClient(secret).get("/api/runs").status_code == 401
    with pytest.raises(CommandError, match="already revoked"):
        run_command("revoke", str(token.pk))


def test_command_refuses_unknown_user_and_token(db):
    with pytest.raises(CommandError, match="No user"):
        run_command("create", "nobody")
    with pytest.raises(CommandError, match="No token"):
        run_command("revoke", "999")


# --- the admin -----------------------------------------------------------------------------


def test_admin_creates_a_token_and_shows_the_secret_once(admin_user, operator):
    client = Client()
    client.force_login(admin_user)
    response = client.post(
        reverse("admin:console_apitoken_add"),
        {"user": operator.pk, "name": "deploy", "scope": "operate"},
        follow=True,
    )
    html = response.content.decode()
    token = ApiToken.objects.get()
    secret = html.split("copy it now: ", 1)[1].split("<", 1)[0].strip()
    assert secret.startswith(token.prefix)
    assert ApiClient(secret).get("/api/runs").status_code == 200
    again = client.get(reverse("admin:console_apitoken_change", args=[token.pk]))
    assert secret not in again.content.decode()


def test_admin_revoke_action(admin_user, operator):
    token, secret = ApiToken.issue(operator)
    client = Client()
    client.force_login(admin_user)
    client.post(
        reverse("admin:console_apitoken_changelist"),
        {"action": "revoke_tokens", "_selected_action": [token.pk]},
    )
    assert ApiClient(secret).get("/api/runs").status_code == 401
