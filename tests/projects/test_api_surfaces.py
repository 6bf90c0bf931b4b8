"""Projects on the programs' surfaces: the API, the orchestration MCP server, AG-UI, the
command line and API tokens (issue 38). Two projects, Alpha and Beta, each with a loop run
waiting at its gate, a schedule and a webhook; people who hold a role in Alpha only (a
viewer, an operator, an editor) and a global operator whose token is limited to Alpha.
Alpha's things are readable and usable as their role allows; Beta's answer as things that
do not exist (404, the same words, nothing of Beta in the answer); lists and the inbox show
only Alpha."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from console.models import ApiToken, Membership, Project
from runs import services
from runs.actor import ENGINE
from runs.models import Run
from tests.api.conftest import ApiClient
from tests.conftest import pending_gate, wait_for
from tests.orchestration.conftest import McpHttp

LOOP = """
name: {name}
interactive: true
providers:
  drafter:
    kind: demo
    complete_after: 1
nodes:
  - id: refine
    provider: drafter
    loop:
      prompt: "Draft about $USER_MESSAGE. When ready, output: DONE"
      until: DONE
      max_iterations: 3
      interactive: true
      gate_message: Accept the draft, or give feedback.
"""
PLAIN = """
name: alpha second
provider: demo
nodes:
  - id: work
    loop:
      prompt: "Do the work; output COMPLETE when done."
      until: COMPLETE
      max_iterations: 2
"""
MISSING = 10**9
PERSONAS = ("viewer", "operator", "limited")
OPERATES = {"operator", "limited"}


@pytest.fixture
def world(make_recipe, admin_user):
    """Alpha and Beta: in each a recipe, its run paused at its loop's gate (one iteration
    done), a schedule and a webhook."""
    admin = ApiClient(ApiToken.issue(admin_user, name="setup")[1])
    made = {}
    for slug in ("alpha", "beta"):
        project = Project.objects.create(name=slug.title(), slug=slug)
        recipe = make_recipe(LOOP.format(name=f"{slug} loop"), slug=f"{slug}-loop")
        recipe.project = project
        recipe.save()
        run = services.start_run(recipe, ENGINE, message=f"{slug} work")
        gate = wait_for(lambda run=run: pending_gate(run), message=f"{slug}'s gate")
        schedule = admin.post(
            "/api/schedules",
            {"recipe": recipe.slug, "name": f"{slug} nightly", "cron": "0 3 * * *"},
        )
        webhook = admin.post("/api/webhooks", {"recipe": recipe.slug, "name": f"{slug} pushes"})
        assert (schedule.status_code, webhook.status_code) == (201, 201)
        made[slug] = {
            "project": project,
            "recipe": recipe,
            "run": run.pk,
            "gate": gate.pk,
            "iteration": gate.iteration.pk,
            "step": gate.node_run_id,
            "schedule": schedule.body["id"],
            "webhook": webhook.body["id"],
        }
    return made


def member(django_user_model, role: str, project: Project):
    user = django_user_model.objects.create_user(f"alpha-{role}", password="pw")
    Membership.objects.create(project=project, user=user, role=role)
    return user


@pytest.fixture
def people(world, django_user_model, operator):
    """Each persona's account: Alpha's viewer, operator and editor, and a global operator
    (whose token the tests limit to Alpha)."""
    alpha = world["alpha"]["project"]
    return {
        "viewer": member(django_user_model, "viewer", alpha),
        "operator": member(django_user_model, "operator", alpha),
        "editor": member(django_user_model, "editor", alpha),
        "limited": operator,
    }


def secret_for(people, world, persona: str, scope: str = "edit") -> str:
    token, secret = ApiToken.issue(people[persona], name=persona, scope=scope)
    if persona == "limited":
        token.projects.set([world["alpha"]["project"]])
    return secret


def says_nothing_of_beta(text: str, world) -> bool:
    beta = world["beta"]
    return (
        not any(
            word in text
            for word in (beta["recipe"].slug, "beta work", "beta nightly", "beta pushes", "Beta")
        )
        and f"/runs/{beta['run']}/" not in text
    )


def missing_run(answer, run_id: int) -> bool:
    """A 404 in the words an id that does not exist gets."""
    return (answer.status_code, answer.body) == (404, {"detail": f"No run {run_id}."})


# --- the API ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("live_worker")
@pytest.mark.parametrize("persona", PERSONAS)
def test_the_api_reads_alpha_and_answers_beta_as_missing(persona, world, people):
    api = ApiClient(secret_for(people, world, persona))
    a, b = world["alpha"]["run"], world["beta"]["run"]
    for tail in ("", "/events", "/iterations", "/steps", "/chart", "/budget"):
        assert api.get(f"/api/runs/{a}{tail}").status_code == 200, tail
        assert missing_run(api.get(f"/api/runs/{b}{tail}"), b), tail
        assert missing_run(api.get(f"/api/runs/{MISSING}{tail}"), MISSING), tail
    assert api.get(f"/api/runs/{a}/wait", timeout=0).body["state"] == "needs_person"
    assert missing_run(api.get(f"/api/runs/{b}/wait", timeout=0), b)
    beta = world["beta"]
    for tail in (
        f"/iterations/{beta['iteration']}/output",
        f"/steps/{beta['step']}/output",
        "/machine",
        "/handoffs",
    ):
        assert missing_run(api.get(f"/api/runs/{b}{tail}"), b), tail
    compared = api.get(
        "/api/iterations/compare", a=world["alpha"]["iteration"], b=beta["iteration"]
    )
    assert (compared.status_code, compared.body) == (
        404,
        {"detail": f"No iteration {beta['iteration']}."},
    )

    listed = api.get("/api/runs")
    assert {r["id"] for r in listed.body["items"]} == {a}
    assert says_nothing_of_beta(json.dumps(listed.body), world)
    assert {r["id"] for r in api.get("/api/runs", status="paused").body["items"]} == {a}
    inbox = api.get("/api/inbox").body["items"]
    assert {item["run"] for item in inbox} == {a} and says_nothing_of_beta(json.dumps(inbox), world)
    recipes = api.get("/api/recipes").body
    assert {r["slug"] for r in recipes} == {world["alpha"]["recipe"].slug}
    hidden = api.get(f"/api/recipes/{beta['recipe'].slug}")
    assert (hidden.status_code, hidden.body) == (
        404,
        {"detail": f"No recipe '{beta['recipe'].slug}'."},
    )
    assert api.get("/api/recipes/no-such").body == {"detail": "No recipe 'no-such'."}
    assert api.get("/api/loops").body["items"] == []


@pytest.mark.usefixtures("live_worker")
@pytest.mark.parametrize("persona", PERSONAS)
def test_the_api_acts_in_alpha_as_the_role_allows_and_never_in_beta(persona, world, people):
    api = ApiClient(secret_for(people, world, persona))
    a, b = world["alpha"]["run"], world["beta"]["run"]
    beta = world["beta"]
    for path, body in (
        (f"/api/runs/{b}/approve", None),
        (f"/api/runs/{b}/reject", None),
        (f"/api/runs/{b}/respond", {"decision": "accept"}),
        (f"/api/runs/{b}/cancel", None),
        (f"/api/runs/{b}/resume", None),
        (f"/api/runs/{b}/fork", {"node": "refine", "iteration": 1}),
        (f"/api/runs/{b}/tick", None),
    ):
        assert missing_run(api.post(path, body), b), path
    assert missing_run(api.put(f"/api/runs/{b}/budget", {"cost_usd": 1}), b)
    started = api.post("/api/runs", {"recipe": beta["recipe"].slug, "message": "x"})
    assert (started.status_code, started.body) == (
        404,
        {"detail": f"No recipe '{beta['recipe'].slug}'."},
    )
    assert pending_gate(Run.objects.get(pk=b)).pk == beta["gate"]  # untouched

    decided = api.post(f"/api/runs/{a}/approve")
    assert decided.status_code == (200 if persona in OPERATES else 403), decided.body
    mine = api.post("/api/runs", {"recipe": world["alpha"]["recipe"].slug, "message": "more"})
    assert mine.status_code == (201 if persona in OPERATES else 403), mine.body


@pytest.mark.usefixtures("live_worker")
def test_schedules_webhooks_and_recipes_of_beta_are_missing(world, people):
    viewer = ApiClient(secret_for(people, world, "viewer"))
    editor = ApiClient(secret_for(people, world, "editor"))
    alpha, beta = world["alpha"], world["beta"]
    for kind in ("schedule", "webhook"):
        listed = viewer.get(f"/api/{kind}s").body
        assert [row["id"] for row in listed] == [alpha[kind]]
        assert says_nothing_of_beta(json.dumps(listed), world)
        assert viewer.get(f"/api/{kind}s/{alpha[kind]}").status_code == 200
        for client, method in ((viewer, "get"), (editor, "patch"), (editor, "delete")):
            call = client.call(method, f"/api/{kind}s/{beta[kind]}", {"enabled": False})
            assert (call.status_code, call.body) == (404, {"detail": f"No {kind} {beta[kind]}."})
        assert viewer.get(f"/api/{kind}s/{MISSING}").body == {"detail": f"No {kind} {MISSING}."}
        refused = viewer.call("patch", f"/api/{kind}s/{alpha[kind]}", {"enabled": False})
        assert refused.status_code == 403
        changed = editor.call("patch", f"/api/{kind}s/{alpha[kind]}", {"enabled": False})
        assert changed.status_code == 200 and changed.body["enabled"] is False
        elsewhere = editor.post(f"/api/{kind}s", {"recipe": beta["recipe"].slug, "name": "mine"})
        assert elsewhere.status_code == 404
    made = editor.post(
        "/api/schedules", {"recipe": alpha["recipe"].slug, "name": "x", "cron": "0 1 * * *"}
    )
    assert made.status_code == 201

    source = PLAIN  # no shell: an editor writes it
    created = editor.post("/api/recipes", {"source": source, "slug": "alpha-second"})
    assert created.status_code == 201, created.body
    assert world["alpha"]["project"].recipes.filter(slug="alpha-second").exists()
    refused = editor.post("/api/recipes", {"source": source, "slug": "x2", "project": "beta"})
    assert (refused.status_code, refused.body) == (404, {"detail": "No project 'beta'."})
    edit = editor.put(f"/api/recipes/{beta['recipe'].slug}", {"source": source})
    assert edit.status_code == 404


@pytest.mark.usefixtures("live_worker")
def test_the_decisions_export_holds_only_the_callers_projects(world, people, admin_user):
    admin = ApiClient(ApiToken.issue(admin_user, name="decides")[1])
    for slug in ("alpha", "beta"):
        assert admin.post(f"/api/runs/{world[slug]['run']}/approve").status_code == 200
    viewer = ApiClient(secret_for(people, world, "viewer"))
    exported = viewer.client.get("/api/audit/decisions", headers=viewer.headers)
    rows = [json.loads(line) for line in b"".join(exported.streaming_content).splitlines()]
    assert [row["run"] for row in rows] == [world["alpha"]["run"]]
    everything = admin.client.get("/api/audit/decisions", headers=admin.headers)
    rows = [json.loads(line) for line in b"".join(everything.streaming_content).splitlines()]
    assert {row["run"] for row in rows} == {world["alpha"]["run"], world["beta"]["run"]}


def test_the_loops_api_lists_and_shows_only_alpha_loops(db, make_recipe, django_user_model):
    from django.utils import timezone

    from runs.models import Iteration, NodeRun
    from tests.driven.conftest import drive, driven_recipe

    made = {}
    for slug in ("alpha", "beta"):
        recipe = make_recipe(driven_recipe("demo"), slug=f"{slug}-driven")
        recipe.project = Project.objects.create(name=slug.title(), slug=slug)
        recipe.save()
        run = services.start_run(recipe, ENGINE, message=f"{slug} work")
        host = NodeRun.objects.create(run=run, node_id="host", kind="driven", status="running")
        turn = Iteration.objects.create(
            run=run, node_run=host, node_id="host", number=1, started_at=timezone.now()
        )
        made[slug] = (run.pk, drive(run, turn).pk)
    viewer = member(django_user_model, "viewer", Project.objects.get(slug="alpha"))
    api = ApiClient(ApiToken.issue(viewer, name="loops")[1])
    assert [loop["id"] for loop in api.get("/api/loops").body["items"]] == [made["alpha"][1]]
    assert api.get("/api/loops", session=made["beta"][0]).body["items"] == []
    assert api.get(f"/api/loops/{made['alpha'][1]}").status_code == 200
    for loop_id in (made["beta"][1], MISSING):
        hidden = api.get(f"/api/loops/{loop_id}")
        assert (hidden.status_code, hidden.body) == (404, {"detail": "No such loop."})


# --- AG-UI, MCP ------------------------------------------------------------------------------


@pytest.mark.usefixtures("live_worker")
@pytest.mark.parametrize("persona", ("viewer", "limited"))
def test_the_ag_ui_stream_of_a_beta_run_is_missing(persona, world, people):
    headers = {"Authorization": f"Bearer {secret_for(people, world, persona, 'read')}"}
    a, b = world["alpha"]["run"], world["beta"]["run"]
    assert Client().get(f"/api/runs/{a}/ag-ui", headers=headers).status_code == 200
    hidden = Client().get(f"/api/runs/{b}/ag-ui", headers=headers)
    assert (hidden.status_code, hidden.json()) == (404, {"detail": f"No run {b}."})


@pytest.mark.usefixtures("live_worker")
@pytest.mark.parametrize("persona", PERSONAS)
def test_the_mcp_tools_see_and_steer_only_alpha(persona, world, people, console_server):
    scope = "operate" if persona in OPERATES else "read"
    mcp = McpHttp(console_server, secret_for(people, world, persona, scope))
    a, b = world["alpha"]["run"], world["beta"]["run"]
    beta_slug = world["beta"]["recipe"].slug
    assert not mcp.call("get_run", run_id=a).is_error
    for tool, arguments in (
        ("get_run", {}),
        ("get_gate", {}),
        ("wait_for_run", {"timeout_seconds": 0}),
        ("approve", {"accept": True}),
        ("respond", {"decision": "accept"}),
        ("reject", {}),
        ("cancel_run", {}),
    ):
        answer = mcp.call(tool, run_id=b, **arguments)
        assert answer.is_error and answer.content[0].text.endswith(f"No run {b}."), tool
    started = mcp.call("start_run", recipe=beta_slug)
    assert started.is_error and started.content[0].text.endswith(f"No recipe '{beta_slug}'.")
    listed = mcp.call("list_runs").structured_content["runs"]
    assert {r["id"] for r in listed} == {a}
    gates = mcp.call("list_gates").structured_content["gates"]
    assert {g["run"] for g in gates} == {a}
    inbox = mcp.call("inbox").structured_content["items"]
    assert {item["run"] for item in inbox} == {a}
    assert says_nothing_of_beta(json.dumps([listed, gates, inbox]), world)
    decided = mcp.call("approve", run_id=a, accept=True)
    assert decided.is_error == (persona not in OPERATES)


# --- the command line, tokens, the OpenAPI document ------------------------------------------


def run_command(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.usefixtures("live_worker")
def test_the_command_line_as_an_alpha_account_sees_only_alpha(world, people):
    a, b = world["alpha"]["run"], world["beta"]["run"]
    operator, viewer = people["operator"].username, people["viewer"].username
    assert f"run {a}: paused" in run_command("run", "status", str(a), "--user", viewer)
    for args in (
        ("run", "status", str(b), "--user", operator),
        ("run", "status", str(b), "--user", viewer),
        ("run", "wait", str(b), "--timeout", "0", "--user", operator),
        ("run", "cancel", str(b), "--user", operator),
        ("run", "approve", str(b), "--user", operator),
        ("run", "chart", str(b), "--user", viewer),
        ("loop", "stop", str(b), "--user", operator),
    ):
        with pytest.raises(CommandError, match=f"^No run {b}$"):
            run_command(*args)
    beta = world["beta"]
    with pytest.raises(CommandError, match=f"No iteration {beta['iteration']}"):
        run_command(
            "run",
            "compare",
            str(world["alpha"]["iteration"]),
            str(beta["iteration"]),
            "--user",
            viewer,
        )
    with pytest.raises(CommandError, match=f"No recipe '{beta['recipe'].slug}'"):
        run_command("run", "start", beta["recipe"].slug, "--user", operator)
    # The trusted command line, acting as no account, sees every project as before.
    assert f"run {b}: paused" in run_command("run", "status", str(b))


def test_api_token_create_limits_a_token_to_projects(db, operator, django_user_model):
    alpha = Project.objects.create(name="Alpha", slug="alpha")
    Project.objects.create(name="Beta", slug="beta")
    secret = run_command("api_token", "create", operator.username, "--project", "alpha").strip()
    token = ApiToken.for_secret(secret)
    assert token.project_ids == {alpha.pk}
    assert "only alpha" in run_command("api_token", "list")
    with pytest.raises(CommandError, match="No project 'gamma'"):
        run_command("api_token", "create", operator.username, "--project", "gamma")
    viewer = member(django_user_model, "viewer", alpha)
    with pytest.raises(CommandError, match="has no role in project 'beta'"):
        run_command("api_token", "create", viewer.username, "--project", "beta")


CHANGES = {"post", "put", "patch", "delete"}


def operations(secret: str) -> tuple[set[tuple[str, str]], dict]:
    document = Client().get("/api/openapi.json", headers={"Authorization": f"Bearer {secret}"})
    assert document.status_code == 200
    body = document.json()
    found = {(method, path) for path, ops in body["paths"].items() for method in ops}
    return found, body["components"]["schemas"]


def test_the_openapi_document_lists_only_what_the_token_may_use(db, editor, django_user_model):
    alpha = Project.objects.create(name="Alpha", slug="alpha")
    everything, all_schemas = operations(ApiToken.issue(editor, name="all")[1])
    assert ("post", "/api/recipes") in everything and (
        "delete",
        "/api/webhooks/{webhook_id}",
    ) in everything

    read, read_schemas = operations(ApiToken.issue(editor, name="read", scope="read")[1])
    # What a read token may call changes nothing: its one POST only validates.
    assert {op for op in read if op[0] in CHANGES} == {("post", "/api/recipes/validate")}
    assert ("get", "/api/runs/{run_id}") in read and ("get", "/api/audit/decisions") in read
    assert "RunStartIn" in all_schemas and "RunStartIn" not in read_schemas

    operator = member(django_user_model, "operator", alpha)
    operating, _ = operations(ApiToken.issue(operator, name="operate")[1])
    assert ("post", "/api/runs/{run_id}/approve") in operating
    assert ("post", "/api/recipes") not in operating and ("post", "/api/schedules") not in operating
    assert operating < everything

    limited, secret = ApiToken.issue(editor, name="alpha only")
    limited.projects.set([alpha])
    assert operations(secret)[0] == everything
