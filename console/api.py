"""The one NinjaAPI of the project; each app contributes a Router."""

from ninja import NinjaAPI

from console import api_errors
from console.auth import api_auth, docs_login_required
from loops.api import router as loops_router
from recipes.api import router as recipes_router
from runs.api import router as runs_router
from runs.api_gates import router as gates_router
from runs.api_history import iterations_router
from runs.api_history import router as history_router
from runs.api_outputs import router as outputs_router
from runs.api_stepmachine import router as step_machine_router
from runs.api_steps import router as steps_router

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
api.add_router("/runs", runs_router, tags=["runs"])
api.add_router("/runs", gates_router, tags=["runs"])
api.add_router("/runs", steps_router, tags=["runs"])
api.add_router("/runs", history_router, tags=["runs"])
api.add_router("/runs", outputs_router, tags=["runs"])
api.add_router("/iterations", iterations_router, tags=["runs"])
api.add_router("/loops", loops_router, tags=["loops"])
api.add_router("/runs", step_machine_router, tags=["step machines"])
