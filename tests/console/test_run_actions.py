"""Cancel, resume and re-run from the run page."""

import pytest
from django.urls import reverse

from runs.models import Run
from tests.console.conftest import login

pytestmark = pytest.mark.django_db


def test_cancel_a_running_run(client, operator, guided_run):
    run, _ = guided_run
    response = login(client, operator).post(reverse("run_cancel", args=[run.pk]), follow=True)
    assert response.status_code == 200 and f"Run {run.pk} cancelled." in response.content.decode()
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_cancel_with_htmx_returns_the_header(client, operator, guided_run):
    run, _ = guided_run
    response = login(client, operator).post(
        reverse("run_cancel", args=[run.pk]), HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert body.startswith('<section id="run-header"') and "badge-cancelled" in body
    assert "Resume" in body and "Cancel run" not in body


def test_cancelling_a_finished_run_is_a_message(client, operator, guided_run):
    run, _ = guided_run
    Run.objects.filter(pk=run.pk).update(status="completed")
    response = login(client, operator).post(reverse("run_cancel", args=[run.pk]), follow=True)
    assert "already completed" in response.content.decode()


def test_resume_a_cancelled_run(client, operator, guided_run):
    run, _ = guided_run
    client = login(client, operator)
    client.post(reverse("run_cancel", args=[run.pk]))
    client.post(reverse("run_resume", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == "running"


def test_resume_of_a_running_run_is_a_message(client, operator, guided_run):
    run, _ = guided_run
    response = login(client, operator).post(reverse("run_resume", args=[run.pk]), follow=True)
    assert "Only a failed or cancelled run can be resumed" in response.content.decode()


def test_rerun_starts_a_new_run(client, operator, guided_run):
    run, _ = guided_run
    response = login(client, operator).post(reverse("run_rerun", args=[run.pk]))
    new = Run.objects.get(rerun_of=run)
    assert response.status_code == 302 and response.url == new.get_absolute_url()
    assert new.message == run.message and new.started_by == operator


def test_rerun_with_htmx_redirects_the_browser(client, operator, guided_run):
    run, _ = guided_run
    response = login(client, operator).post(
        reverse("run_rerun", args=[run.pk]), HTTP_HX_REQUEST="true"
    )
    assert response.headers["HX-Redirect"] == Run.objects.get(rerun_of=run).get_absolute_url()


@pytest.mark.parametrize("name", ["run_cancel", "run_resume", "run_rerun"])
def test_viewer_is_forbidden(client, viewer, guided_run, name):
    run, _ = guided_run
    assert login(client, viewer).post(reverse(name, args=[run.pk])).status_code == 403
    assert Run.objects.count() == 1


@pytest.mark.parametrize("name", ["run_cancel", "run_resume", "run_rerun"])
def test_get_is_405(client, operator, guided_run, name):
    run, _ = guided_run
    assert login(client, operator).get(reverse(name, args=[run.pk])).status_code == 405


@pytest.mark.parametrize("name", ["run_cancel", "run_resume", "run_rerun"])
def test_unknown_run_is_404(client, operator, name):
    assert login(client, operator).post(reverse(name, args=[999999])).status_code == 404
