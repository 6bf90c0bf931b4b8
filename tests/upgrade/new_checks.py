"""What the CURRENT code makes of the rows the last release left, once it has migrated them.

Not a test module: tests/upgrade/test_from_last_release.py runs this text through
`manage.py shell -c` in the project's tree, after `manage.py migrate`, with a first line
that sets MADE (what tests/upgrade/old_rows.py printed). It asks what a person and a
script would ask, through Django's test client as a superuser (the pages) and with an API
token (the API), reads the migrated rows, and prints CHECKS_MARK and a JSON object of what
it saw; the test compares that with what the release had.
"""

import json

from django.contrib.auth import get_user_model
from django.test import Client

from console.models import ApiToken
from recipes.models import Recipe
from runs.budget import usage_totals
from runs.models import Gate, Iteration, NodeRun, Run

CHECKS_MARK = "UPGRADE-CHECKS "
MADE: dict = globals().get("MADE", {})  # set by the line the test puts before this text


def clients() -> tuple[Client, Client]:
    """A browser logged in as a superuser made here, and an API client with its token."""
    user = get_user_model().objects.create_superuser(
        "upgrade-admin", "upgrade@example.com", "pw-upgrade-admin"
    )
    browser = Client(HTTP_HOST="localhost")
    browser.force_login(user)
    _, secret = ApiToken.issue(user, name="upgrade test")
    return browser, Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {secret}")


def badge(word: str) -> str:
    """How a run page shows a status word (templates/console/_badge.html)."""
    return f'class="badge badge-{word}">{word}</span>'


def seen_run(browser: Client, api: Client, pk: int, old: str) -> dict:
    """One run: its row now, its page, and its API answer."""
    run = Run.objects.get(pk=pk)
    page = browser.get(f"/runs/{pk}/")
    answer = api.get(f"/api/runs/{pk}")
    body = answer.json() if answer.status_code == 200 else {}
    return {
        "row": [run.status, run.phase],
        "page": page.status_code,
        "page_shows_old_word": badge(old) in page.content.decode(),
        "api": answer.status_code,
        "api_status": body.get("status"),
        "api_phase": body.get("phase"),
        "events": [
            [event.kind, (event.data or {}).get("status")]
            for event in run.events.filter(kind__startswith="run_").order_by("seq")
        ],
    }


def seen_fork_form(browser: Client) -> dict:
    """The fork form of the driven run, at its researcher's (a pipeline step's) iteration."""
    driven = MADE["driven"]
    page = browser.get(f"/runs/{driven['run']}/fork/", {"node": "researcher", "iteration": 1})
    html = page.content.decode()
    return {
        "status": page.status_code,
        "form": 'name="feedback"' in html,
        "refused": 'class="notice error" role="alert"' in html,
    }


def pinned_versions_load() -> dict:
    """Whether a worker can still load what runs of the release are pinned to ("" if it
    can, else why not): a decision at a gate, a resume or a fork after the upgrade loads
    it. The Python run's version (its source imports the release's modules) and the driven
    recipe that names the hook the release's docs show."""
    from loops.python.runner import RecipeLoadError, load_workflow
    from runs.executor.spec import SpecError, spec_of

    why = {}
    run = Run.objects.select_related("recipe", "recipe_version").get(pk=MADE["python"]["run"])
    try:
        load_workflow(run.recipe_version.pk, run.recipe_version.source, run.recipe.source_path)
        why["python"] = ""
    except RecipeLoadError as exc:
        why["python"] = str(exc)
    hooked = Recipe.objects.select_related("current_version").get(
        pk=MADE["recipes"]["driven_hooked"][0]
    )
    try:
        spec_of(hooked, hooked.current_version)
        why["driven_hooked"] = ""
    except SpecError as exc:
        why["driven_hooked"] = str(exc)
    return why


def seen_usage(api: Client) -> dict:
    """A loop_group's prompt steps after the upgrade: each step's call an iteration of its
    own with the usage its state kept, the group's iteration no longer a second count."""
    group = MADE["group"]
    totals = usage_totals([group["run"]])[group["run"]]
    steps = api.get(f"/api/runs/{group['run']}/steps").json()["items"]
    return {
        "totals": [totals["tokens_in"], totals["tokens_out"], str(totals["cost_usd"])],
        "calls": {
            node: list(
                Iteration.objects.filter(node_run_id=pk).values_list(
                    "number", "status", "prompt", "tokens_in", "tokens_out"
                )
            )
            for node, pk in group["steps"].items()
        },
        "states": [sorted(NodeRun.objects.get(pk=pk).state) for pk in group["steps"].values()],
        "group_iteration": list(
            Iteration.objects.filter(node_run_id=group["group"]).values_list(
                "tokens_in", "cost_usd"
            )
        ),
        "api_steps": {s["node"]: [s["tokens_in"], s["tokens_out"]] for s in steps},
    }


def seen_by_the_old_operator() -> dict:
    """Projects came after the release: every recipe and run is in the default project,
    and a person with the release's operator role sees and steers them as before."""
    from console.models import Project

    operator = get_user_model().objects.get(username=MADE["operator"])
    browser = Client(HTTP_HOST="localhost")
    browser.force_login(operator)
    workflow = MADE["workflow"]["run"]
    return {
        "projects": sorted(Project.objects.values_list("slug", flat=True)),
        "recipe_projects": sorted(set(Recipe.objects.values_list("project__slug", flat=True))),
        "run_projects": sorted(set(Run.objects.values_list("project__slug", flat=True))),
        "runs_page": browser.get("/runs/").status_code,
        "run_page": browser.get(f"/runs/{workflow}/").status_code,
        "may_operate": operator.has_perm("runs.operate_run", Run.objects.get(pk=workflow)),
    }


def look() -> dict:
    browser, api = clients()
    workflow = MADE["workflow"]
    row_ids = [*MADE["driven"]["rows"].values(), *MADE["python"]["rows"].values()]
    gate = Gate.objects.get(pk=workflow["gate"])
    return {
        "runs": {pk: seen_run(browser, api, int(pk), old) for pk, old in MADE["statuses"].items()},
        "admin_runs": browser.get("/admin/runs/run/").status_code,
        "admin_run": browser.get(
            f"/admin/runs/run/{MADE['step_machine']['merged']}/change/"
        ).status_code,
        "row_kinds": dict(NodeRun.objects.filter(pk__in=row_ids).values_list("pk", "kind")),
        "gate": [
            gate.status,
            gate.message in browser.get(f"/runs/{workflow['run']}/").content.decode(),
        ],
        "recipe_kinds": dict(Recipe.objects.values_list("pk", "kind")),
        "fork_form": seen_fork_form(browser),
        "pinned_versions_load": pinned_versions_load(),
        "usage": seen_usage(api),
        "old_operator": seen_by_the_old_operator(),
    }


print(CHECKS_MARK + json.dumps(look(), default=str))
