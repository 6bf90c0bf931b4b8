"""Every URL of the console and the API refuses anonymous requests and users without the
right role. The URL configuration is enumerated, so a new URL cannot be forgotten."""

import re

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver

from runs.actor import Actor

# Reachable without logging in, on purpose.
PUBLIC = {"accounts/login/", "accounts/logout/", "healthz", "favicon.ico", "oidc/logout/"}
# Reachable without logging in, proven by a signature instead (tests/triggers/test_webhooks.py).
SIGNED = {
    "hooks/<str:key>",
    "slack/interactions/",  # Slack's signature (tests/notifications/test_slack.py)
    # A decision link's signed token names the one person it decides as, who must still
    # operate; its form is CSRF-protected (tests/notifications/test_decision_links.py).
    "decide/<str:token>/",
    # Sign-in with the identity provider: the start sends the browser there; the answer
    # proves itself by the state, nonce and PKCE verifier of the browser's session, and
    # answers 404 while OIDC is off (tests/browser/oidc, and the test below).
    "oidc/authenticate/",
    "oidc/callback/",
}
# Read-only for viewers; everything else changes state and needs more than a viewer.
READ_ONLY_NAMES = {
    "favicon",
    "inbox",
    "run_list",
    "run_detail",
    "run_part",
    "run_iterations",
    "run_events",
    "run_live",
    "run_ag_ui",  # a POST is AG-UI's HttpAgent asking to follow the run: it changes nothing
    "inbox_live",
    "recipe_list",
    "recipe_detail",
    "list_recipes",
    "get_recipe",
    "list_runs",
    "get_run",
    "get_inbox",
    "list_iterations",
    "list_events",
    "openapi-json",
    "openapi-view",
    "api-root",
    "validate",
    "loop_list",
    "loop_detail",
    "run_loops_part",
    "list_loops",
    "get_loop",
    "iteration_output",
    "node_output",
    "step_output",
    "get_schedule",
    "get_webhook",
}
STREAMS = {"run_live", "inbox_live"}
# For administrators (superusers) only, whatever role anyone else holds: the audit log.
ADMINISTRATORS_ONLY = {"audit", "audit_export"}
# A well-formed body for every API write, so that only permissions can refuse it.
API_BODY = {
    "slug": "authz-new",
    "source": "name: x\nnodes:\n  - id: a\n    bash: echo\n",
    "recipe": "authz",
    "message": "x",
    "inputs": {},
    "comment": "x",
    "reason": "x",
    "node": "a",
    "iteration": 1,
    "role": "x",
    "status": "completed",
    "name": "x",
}


def send(client, method, url, form=None):
    if url.startswith("/api/") and method == "post":
        return client.post(url, API_BODY, content_type="application/json")
    return getattr(client, method)(url, form or {})


def walk(resolver, prefix=""):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            yield from walk(pattern, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern), pattern.name


def console_and_api_urls():
    seen = set()
    for route, name in walk(get_resolver()):
        if route.startswith(("admin/", "static/")) or route in PUBLIC | SIGNED:
            continue
        if (route, name) in seen:
            continue
        seen.add((route, name))
        yield route, name


@pytest.fixture
def objects(db, make_recipe, operator):
    from loops.driven.models import Loop
    from runs import services
    from runs.models import Gate, Iteration, NodeRun
    from triggers.models import Schedule, Webhook

    recipe = make_recipe("name: t\nnodes:\n  - id: a\n    bash: echo hi\n", slug="authz")
    run = services.start_run(recipe, actor=Actor.operator(operator, "console"), message="m")
    node = NodeRun.objects.create(run=run, node_id="a", kind="approval", status="paused")
    gate = Gate.objects.create(run=run, node_run=node, node_id="a", kind="approval", message="ok?")
    loop = Loop.objects.create(run=run, agent="a", pipeline=["a"], max_iterations=1)
    it = Iteration.objects.create(run=run, node_run=node, node_id="a", number=1, raw_output="x")
    schedule = Schedule.objects.create(recipe=recipe, name="s", every_seconds=3600)
    webhook = Webhook.objects.create(recipe=recipe, name="w")
    return {
        "iteration_id": it.pk,
        "node_id": node.pk,
        "step_id": node.pk,
        "run_id": run.pk,
        "gate_id": gate.pk,
        "slug": recipe.slug,
        "part": "nodes",
        "loop_id": loop.pk,
        "schedule_id": schedule.pk,
        "webhook_id": webhook.pk,
    }


def fill(route: str, objects: dict) -> str:
    def value(match):
        name = match.group(1).split(":")[-1]
        return str(objects[name])

    return "/" + re.sub(r"<([^>]+)>", value, route)


def refused_anonymously(response) -> bool:
    if response.status_code in (401, 404, 405):  # 404: ninja's bare /api/ root
        return True
    return response.status_code == 302 and "/login/" in response.headers.get("Location", "")


def test_the_enumeration_finds_the_console_and_the_api():
    names = {name for _, name in console_and_api_urls()}
    assert {"run_detail", "gate_approve", "recipe_start", "get_run", "approve"} <= names


@pytest.mark.parametrize("method", ["get", "post"])
def test_anonymous_requests_are_refused_everywhere(client, objects, method):
    for route, name in console_and_api_urls():
        url = fill(route, objects)
        response = send(client, method, url)
        assert refused_anonymously(response), (method, url, name, response.status_code)


@pytest.mark.parametrize("method", ["get", "post"])
def test_users_without_a_role_get_403(client, objects, outsider, method):
    client.force_login(outsider)
    for route, name in console_and_api_urls():
        url = fill(route, objects)
        response = send(client, method, url)
        allowed = (403, 404, 405) if name == "api-root" else (403, 405)
        assert response.status_code in allowed, (method, url, name, response.status_code)


def test_viewers_cannot_change_anything(client, objects, viewer):
    client.force_login(viewer)
    for route, name in console_and_api_urls():
        if name in READ_ONLY_NAMES:
            continue
        url = fill(route, objects)
        response = send(client, "post", url, {"comment": "x", "reason": "x", "message": "x"})
        assert response.status_code in (403, 405), (url, name, response.status_code)


def test_viewers_can_read(client, objects, viewer):
    client.force_login(viewer)
    for route, name in console_and_api_urls():
        if name not in READ_ONLY_NAMES or name in STREAMS or name in ("validate", "api-root"):
            continue
        response = client.get(fill(route, objects))
        assert response.status_code == 200, (route, name, response.status_code)


def test_state_changing_console_forms_need_the_csrf_token(objects, operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    for route, name in console_and_api_urls():
        if name in READ_ONLY_NAMES or route.startswith("api/"):
            continue
        response = client.post(fill(route, objects), {"comment": "x"})
        assert response.status_code == 403, (route, name, response.status_code)
        assert b"CSRF" in response.content


def test_api_session_writes_need_the_csrf_token(objects, operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(f"/api/runs/{objects['run_id']}/cancel", content_type="application/json")
    assert response.status_code == 403


def test_admin_refuses_anonymous_and_non_staff(client, outsider):
    for url in ["/admin/", "/admin/recipes/recipe/", "/admin/runs/run/", "/admin/auth/user/"]:
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    client.force_login(outsider)
    for url in ["/admin/", "/admin/recipes/recipe/"]:
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url


def test_sign_in_with_an_identity_provider_answers_404_while_it_is_off(client, outsider):
    """LOOP_OIDC_ISSUER is empty here: its URLs exist but lead nowhere, signed in or not."""
    for url in ["/oidc/authenticate/", "/oidc/callback/?code=x&state=y"]:
        assert client.get(url).status_code == 404, url
    client.force_login(outsider)
    for url in ["/oidc/authenticate/", "/oidc/callback/?code=x&state=y"]:
        assert client.get(url).status_code == 404, url


@pytest.mark.parametrize("persona", ["viewer", "operator", "editor", "shell_author"])
def test_only_administrators_reach_their_pages(client, objects, admin_user, persona, request):
    routes = [route for route, name in console_and_api_urls() if name in ADMINISTRATORS_ONLY]
    assert {name for _, name in console_and_api_urls()} >= ADMINISTRATORS_ONLY
    client.force_login(request.getfixturevalue(persona))
    for route in routes:
        assert client.get(fill(route, objects)).status_code == 403, (persona, route)
    client.force_login(admin_user)
    for route in routes:
        assert client.get(fill(route, objects)).status_code == 200, route
