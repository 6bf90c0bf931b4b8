"""Token scopes narrow what a token's user may do; expired tokens stop working with a clear
401; both are settable from `manage.py api_token` and the admin."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console.models import ApiToken
from tests.api.conftest import ApiClient
from tests.api.test_recipes_api import GOOD

pytestmark = pytest.mark.django_db


def token_client(user, **kwargs) -> ApiClient:
    _, secret = ApiToken.issue(user, name="scoped", **kwargs)
    return ApiClient(secret)


def test_read_only_token_reads_but_cannot_start_a_run(operator, bundled):
    client = token_client(operator, scope="read")
    assert client.get("/api/runs").status_code == 200
    assert client.get("/api/recipes").status_code == 200
    refused = client.post("/api/runs", {"recipe": "guided-refine"})
    assert refused.status_code == 403
    assert refused.body["detail"] == (
        "This API token's scope is 'read', which does not allow this;"
        " it needs a token with scope 'operate'."
    )
    # The same person with an operate token can.
    assert (
        token_client(operator, scope="operate")
        .post("/api/runs", {"recipe": "guided-refine", "message": "m"})
        .status_code
        == 201
    )


def test_operate_token_runs_but_cannot_change_recipes(editor, bundled):
    client = token_client(editor, scope="operate")
    assert client.post("/api/runs", {"recipe": "guided-refine", "message": "m"}).status_code == 201
    refused = client.post("/api/recipes", {"source": GOOD})
    assert refused.status_code == 403 and "scope is 'operate'" in refused.body["detail"]
    assert "scope 'edit'" in refused.body["detail"]
    assert (
        token_client(editor, scope="edit").post("/api/recipes", {"source": GOOD}).status_code == 201
    )


def test_a_scope_never_gives_more_than_the_role(viewer, bundled):
    refused = token_client(viewer, scope="edit").post("/api/runs", {"recipe": "guided-refine"})
    assert refused.status_code == 403
    assert refused.body["detail"] == "Your role does not allow this."


def test_expired_token_is_401_saying_so(operator):
    past = timezone.now() - timedelta(minutes=1)
    token, secret = ApiToken.issue(operator, expires_at=past)
    response = ApiClient(secret).get("/api/runs")
    assert response.status_code == 401
    assert response.body["detail"].startswith(
        f"This API token expired on {past:%Y-%m-%d %H:%M} UTC"
    )
    assert ApiToken.authenticate(secret) is None
    # The docs pages say the same.
    docs = Client().get("/api/openapi.json", headers={"Authorization": f"Bearer {secret}"})
    assert docs.status_code == 401 and "expired" in docs.json()["detail"]
    # A token that has not reached its expiry works.
    _, fresh = ApiToken.issue(operator, expires_at=timezone.now() + timedelta(days=1))
    assert ApiClient(fresh).get("/api/runs").status_code == 200


def run_command(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("api_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_command_sets_scope_and_expiry_and_lists_them(operator, bundled):
    out, err = run_command("create", "otto", "--scope", "read", "--expires-in-days", "7")
    token = ApiToken.objects.get()
    assert token.scope == "read"
    assert timedelta(days=6, hours=23) < token.expires_at - timezone.now() <= timedelta(days=7)
    assert "scope read" in err and "expires" in err
    client = ApiClient(out.strip())
    assert client.get("/api/runs").status_code == 200
    assert client.post("/api/runs", {"recipe": "guided-refine"}).status_code == 403

    listing, _ = run_command("list")
    assert " read " in listing and f"expires {token.expires_at:%Y-%m-%d}" in listing


def test_command_defaults_to_ninety_days_and_can_opt_out(operator):
    run_command("create", "otto", "--name", "default")
    run_command("create", "otto", "--name", "forever", "--no-expiry")
    default = ApiToken.objects.get(name="default")
    assert default.scope == "edit"
    assert timedelta(days=89) < default.expires_at - timezone.now() <= timedelta(days=90)
    assert ApiToken.objects.get(name="forever").expires_at is None
    listing, _ = run_command("list")
    assert "never expires" in listing


def test_admin_sets_scope_and_expiry(admin_user, operator):
    client = Client()
    client.force_login(admin_user)
    form = client.get(reverse("admin:console_apitoken_add")).content.decode()
    assert 'name="scope"' in form and 'name="expires_at_0"' in form
    when = timezone.now() + timedelta(days=3)
    response = client.post(
        reverse("admin:console_apitoken_add"),
        {
            "user": operator.pk,
            "name": "dashboard",
            "scope": "read",
            "expires_at_0": f"{when:%Y-%m-%d}",
            "expires_at_1": f"{when:%H:%M:%S}",
        },
        follow=True,
    )
    token = ApiToken.objects.get()
    assert token.scope == "read" and token.expires_at.date() == when.date()
    secret = response.content.decode().split("copy it now: ", 1)[1].split("<", 1)[0].strip()
    assert ApiClient(secret).post("/api/runs", {"recipe": "x"}).status_code == 403
    listing = client.get(reverse("admin:console_apitoken_changelist")).content.decode()
    assert "read-only" in listing
