"""What anonymous users and viewers are told about failures: that something is down or
invalid, never the server's exception class names or file paths."""

import pytest


@pytest.mark.django_db
def test_healthz_says_down_without_naming_the_exception(client, monkeypatch, caplog):
    from console.celery import app

    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("[Errno 111] cannot reach /srv/private/redis.sock")

    monkeypatch.setattr(app, "connection_for_write", refuse)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert {k: v for k, v in response.json().items() if k != "sandbox"} == {
        "status": "down",
        "database": "ok",
        "broker": "down",
    }
    body = response.content.decode()
    assert "ConnectionRefused" not in body and "/srv/private" not in body
    # The operator still finds out why, in the server's log.
    assert "ConnectionRefusedError" in caplog.text


RECIPE_WITH_MISSING_COMMAND = """\
name: uses-a-command
nodes:
  - id: plan
    command: no-such-command
"""


@pytest.mark.django_db
def test_validation_problems_name_folders_not_server_paths(viewer, settings, tmp_path):
    from pathlib import Path

    from console.models import ApiToken
    from recipes.sources import BUILTIN_DIR
    from tests.api.conftest import ApiClient

    project = tmp_path / "team-repo" / ".archon" / "workflows"
    project.mkdir(parents=True)
    settings.LOOP_RECIPE_DIRS = [str(project)]
    _, secret = ApiToken.issue(viewer, scope="read")
    response = ApiClient(secret).post(
        "/api/recipes/validate", {"source": RECIPE_WITH_MISSING_COMMAND}
    )
    assert response.status_code == 200 and response.body["valid"] is False
    message = " ".join(p["message"] for p in response.body["errors"])
    assert "no-such-command" in message
    for server_path in [tmp_path, BUILTIN_DIR, Path.home(), settings.LOOP_USER_RECIPE_DIR]:
        assert str(server_path) not in message
    # The repository's own commands folder and its defaults/, as the peer looks them up.
    assert "<project repo>/.archon/commands" in message
    assert "<bundled recipes>/commands" in message


def test_a_providers_non_json_answer_is_not_shown_to_viewers(caplog):
    import pytest

    from runs.providers.base import ProviderError
    from runs.providers.http import json_event

    with pytest.raises(ProviderError) as caught:
        json_event("p", "<html>internal 10.1.2.3 DATABASE_URL=postgres://x</html>")
    said = str(caught.value)
    assert "is not JSON" in said and "10.1.2.3" not in said and "postgres" not in said
    assert "10.1.2.3" in caplog.text  # the server's text is kept for the operators


def test_unexpected_errors_are_described_without_class_names_or_paths():
    from console.redact import plain_cause

    missing = FileNotFoundError(2, "No such file or directory", "/srv/secret/place")
    assert plain_cause(missing) == "no such file or directory"
    assert plain_cause(RecursionError("maximum recursion depth")) == "the input nests too deeply"
    assert plain_cause(KeyError("/etc/loop/secret_key")) == "an unexpected error in the engine"
