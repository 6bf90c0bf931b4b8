"""The one NinjaAPI of the project; each app contributes a Router, each loop kind its
`api_router` under its `api_prefix` (runs.kinds)."""

from functools import partial

from ninja import NinjaAPI
from ninja.openapi.views import openapi_json
from ninja.responses import Response

from console import api_errors
from console.auth import api_auth, docs_login_required
from recipes.api import router as recipes_router
from runs import kinds
from runs.api import inbox_router
from runs.api import router as runs_router
from runs.api_audit import router as audit_router
from runs.api_gates import router as gates_router
from runs.api_history import iterations_router
from runs.api_history import router as history_router
from runs.api_outputs import router as outputs_router
from runs.api_steps import router as steps_router
from triggers.api import router as triggers_router

DESCRIPTION = """Everything a person does in the console, a script can do here.

Authenticate with `Authorization: Bearer <token>` (create one with
`manage.py api_token create USER`, or in the admin) or the browser session (unsafe
methods then need the `X-CSRFToken` header). Errors are JSON `{"detail": ...}`.
"""

# What an operation needs, by the first part of its path and its method (each endpoint
# checks it with `require`; the document a caller reads lists only what they may use).
NEEDS = {
    "recipes": {
        "get": "recipes.view_recipe",
        "post": "recipes.add_recipe",
        "put": "recipes.change_recipe",
    },
    **{
        name: {
            "get": f"triggers.view_{name[:-1]}",
            "post": f"triggers.add_{name[:-1]}",
            "patch": f"triggers.change_{name[:-1]}",
            "delete": f"triggers.delete_{name[:-1]}",
        }
        for name in ("schedules", "webhooks")
    },
    "audit": {"get": "runs.view_gate"},
}
RUNS_NEED = {"get": "runs.view_run"}  # runs, the inbox, loops: a change operates
READS_BY_POST = {"recipes/validate": "recipes.view_recipe"}  # a POST that changes nothing
SCHEMA_REF = "#/components/schemas/"


def needed(method: str, where: str) -> str:
    """The permission an operation at `where` (its path under the API's root) needs."""
    if where in READS_BY_POST:
        return READS_BY_POST[where]
    first = where.split("/", 1)[0]
    return NEEDS.get(first, RUNS_NEED).get(method, "runs.operate_run")


def usable_by(schema: dict, user, root: str) -> dict:
    """The OpenAPI document as `user` (a token, with its scope and projects) may use it:
    the operations they may not call left out, and the schemas only those use."""
    paths = {}
    for path, operations in schema["paths"].items():
        where = path.removeprefix(root)
        kept = {m: op for m, op in operations.items() if user.has_perm(needed(m, where))}
        if kept:
            paths[path] = kept
    components = dict(schema.get("components", {}))
    schemas = components.get("schemas", {})
    used = _referenced(paths, schemas, set())
    components["schemas"] = {name: value for name, value in schemas.items() if name in used}
    return {**schema, "paths": paths, "components": components}


def _referenced(value, schemas: dict, found: set) -> set:
    """The component schemas `value` refers to, and those they refer to."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith(SCHEMA_REF):
            name = ref.removeprefix(SCHEMA_REF)
            if name in schemas and name not in found:
                found.add(name)
                _referenced(schemas[name], schemas, found)
        for inner in value.values():
            _referenced(inner, schemas, found)
    elif isinstance(value, list):
        for inner in value:
            _referenced(inner, schemas, found)
    return found


def openapi_document(request, api: NinjaAPI, **path_params):
    """/api/openapi.json for this caller (ninja's own view serves one document to all)."""
    schema = api.get_openapi_schema(path_params=path_params)
    return Response(usable_by(schema, request.user, api.get_root_path(path_params)))


def documented(view):
    """The docs' decorator: only for people who may use the API, and the schema they read
    narrowed to them."""
    if getattr(view, "func", None) is openapi_json:
        view = partial(openapi_document, **view.keywords)
    return docs_login_required(view)


api = NinjaAPI(
    title="Loop Console API",
    version="1",
    description=DESCRIPTION,
    urls_namespace="api",
    auth=api_auth(),
    docs_decorator=documented,
)
api_errors.install(api)
api.add_router("/recipes", recipes_router, tags=["recipes"])
api.add_router("/inbox", inbox_router, tags=["runs"])
api.add_router("/runs", runs_router, tags=["runs"])
api.add_router("/runs", gates_router, tags=["runs"])
api.add_router("/runs", steps_router, tags=["runs"])
api.add_router("/runs", history_router, tags=["runs"])
api.add_router("/runs", outputs_router, tags=["runs"])
api.add_router("/iterations", iterations_router, tags=["runs"])
api.add_router("", triggers_router, tags=["schedules and webhooks"])
api.add_router("/audit", audit_router, tags=["audit"])
for kind in kinds.all_kinds():
    if kind.api_router is not None:  # its tags are the router's own; None: it has no API
        api.add_router(kind.api_prefix, kind.api_router)
