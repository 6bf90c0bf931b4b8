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
    assert response.json() == {"status": "down", "database": "ok", "broker": "down"}
    body = response.content.decode()
    assert "ConnectionRefused" not in body and "/srv/private" not in body
    # The operator still finds out why, in the server's log.
    assert "ConnectionRefusedError" in caplog.text
