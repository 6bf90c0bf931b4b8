"""The one NinjaAPI of the project; each app contributes a Router, each loop kind its
`api_router` under its `api_prefix` (runs.kinds)."""

from ninja import NinjaAPI

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

api = NinjaAPI(
    title="Loop Console API",
    version="1",
    description=DESCRIPTION,
    urls_namespace="api",
    auth=api_auth(),
    docs_decorator=docs_login_required,
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
