"""Error pages in the console's layout: a missing role is named, with who can grant it;
404 and 500 keep the navigation. Refusals log a line, not a traceback."""

import logging

import pytest
from django.test import Client
from django.urls import reverse

from console import views
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_a_user_without_a_role_is_told_which_role_and_who_grants_it(django_user_model):
    nobody = make_user(django_user_model, "nobody")
    client = Client()
    client.force_login(nobody)
    response = client.get(reverse("run_list"))
    assert response.status_code == 403
    page = response.content.decode()
    assert "needs the <strong>viewer</strong> role" in page
    assert "<strong>nobody</strong> does not have it" in page
    assert "An administrator of this console can grant it" in page
    assert 'class="topbar"' in page and "Log out" in page and reverse("logout") in page
    # Every role is named, and no button leads back to a page this account cannot open.
    assert "<strong>recipe author with shell</strong>" in page
    assert "Go to the inbox" not in page and "Log in with another account" in page


def test_a_viewer_starting_a_run_is_told_operator(client, viewer, bundled):
    client.force_login(viewer)
    response = client.get(reverse("recipe_start", args=["counter-loop"]))
    assert response.status_code == 403
    page = response.content.decode()
    assert "needs the <strong>operator</strong> role" in page
    assert "Go to the inbox" in page  # which a viewer can open


def test_404_is_in_the_console_layout(client, viewer):
    client.force_login(viewer)
    response = client.get("/runs/999999/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "Nothing here" in page and 'class="topbar"' in page and "Log out" in page


def test_500_is_in_the_console_layout(rf, viewer):
    request = rf.get("/")
    request.user = viewer
    response = views.server_error(request)
    assert response.status_code == 500
    page = response.content.decode()
    assert "Something went wrong on our side" in page and 'class="topbar"' in page


def test_an_ordinary_403_logs_one_line_without_a_traceback(django_user_model, caplog):
    nobody = make_user(django_user_model, "nobody2")
    client = Client()
    client.force_login(nobody)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client.get(reverse("run_list")).status_code == 403
    records = [r for r in caplog.records if r.name == "django.request"]
    assert records
    handler = next(
        h
        for h in logging.getLogger().handlers
        if any(type(f).__name__ == "NoTracebackForClientErrors" for f in h.filters)
    )
    for record in records:
        assert handler.filter(record)
        text = handler.format(record)
        assert "Forbidden" in text and "Traceback" not in text


def test_a_quiet_sweep_logs_nothing_at_info(caplog):
    from runs.tasks import sweep

    with caplog.at_level(logging.INFO):
        sweep()
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []
    for name in ("celery.app.trace", "celery.worker.strategy", "celery.beat"):
        assert logging.getLogger(name).getEffectiveLevel() >= logging.WARNING
