"""Schemathesis reads /api/openapi.json and throws generated requests at every operation
(as an editor, who may do everything): whatever it sends, the API must never answer 5xx."""

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from console.api import api
from console.models import ApiToken
from console.wsgi import application
from runs.actor import Actor

# The schema endpoint needs a login, so the schema is read from the API object itself.
schema = schemathesis.openapi.from_dict(api.get_openapi_schema())


@schema.hook
def map_query(ctx, query):
    """The long-poll answers at once: a generated timeout would block up to 60 s a case.
    Negative values are left alone, so the refusals are still fuzzed."""
    if ctx.operation.path == "/api/runs/{run_id}/wait" and isinstance(query, dict):
        timeout = query.get("timeout")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool):
            query["timeout"] = min(timeout, 0.01)
    return query


@pytest.fixture
def token_header(editor, bundled):
    from runs import services

    # Some real rows, so that generated ids and slugs sometimes find something.
    services.start_run(
        bundled["guided-refine"], actor=Actor.operator(editor, "console"), message="fuzz"
    )
    _, secret = ApiToken.issue(editor, name="fuzz")
    # Requests go straight into the WSGI app, inside the test's transaction: like Django's
    # own test client, keep the request signals from closing that connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield {"Authorization": f"Bearer {secret}"}
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors(case, token_header):
    response = case.call(app=application, headers=token_header)
    case.validate_response(response, checks=[not_a_server_error])
