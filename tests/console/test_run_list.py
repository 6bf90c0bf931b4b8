"""The runs list: filters, search, keyset pages, no COUNT(*)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs import services
from runs.actor import Actor
from runs.models import Run
from tests.console.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def many_runs(bundled, operator):
    runs = []
    for n in range(60):
        recipe = bundled["counter-loop" if n % 2 else "guided-refine"]
        runs.append(
            services.start_run(
                recipe, actor=Actor.operator(operator, "console"), message=f"job number {n}"
            )
        )
    Run.objects.filter(pk=runs[0].pk).update(status="failed")
    return runs


def test_newest_first_and_keyset_pages(client, viewer, many_runs):
    client = login(client, viewer)
    first = client.get(reverse("run_list")).content.decode()
    assert first.index(f"Run {many_runs[-1].pk}<") < first.index(f"Run {many_runs[-2].pk}<")
    assert f"Run {many_runs[9].pk}<" not in first
    last_shown = many_runs[10].pk
    assert f"before={last_shown}" in first
    second = client.get(reverse("run_list") + f"?before={last_shown}").content.decode()
    assert f"Run {many_runs[9].pk}<" in second and f"Run {many_runs[10].pk}<" not in second
    assert "Older runs" not in second and "Newest" in second


def test_filters_and_search(client, viewer, many_runs):
    client = login(client, viewer)
    failed = client.get(reverse("run_list") + "?status=failed").content.decode()
    assert f"Run {many_runs[0].pk}<" in failed and f"Run {many_runs[2].pk}<" not in failed
    counter = client.get(reverse("run_list") + "?recipe=counter-loop").content.decode()
    assert f"Run {many_runs[1].pk}<" in counter and f"Run {many_runs[2].pk}<" not in counter
    found = client.get(reverse("run_list") + "?q=number 42").content.decode()
    assert f"Run {many_runs[42].pk}<" in found and f"Run {many_runs[41].pk}<" not in found


def test_a_filter_no_run_can_match_says_so(client, viewer, many_runs):
    client = login(client, viewer)
    page = client.get(reverse("run_list") + "?status=bogus").content.decode()
    assert "No run has the status “bogus”." in page
    assert "No runs match." in page and f"Run {many_runs[0].pk}<" not in page
    page = client.get(reverse("run_list") + "?recipe=nothing-like-it").content.decode()
    assert "There is no recipe “nothing-like-it”." in page and "No runs match." in page


def test_no_count_of_the_table(client, viewer, many_runs):
    client = login(client, viewer)
    client.get(reverse("run_list"))
    with CaptureQueriesContext(connection) as queries:
        client.get(reverse("run_list") + "?status=running&q=job")
    assert not any("COUNT(" in q["sql"].upper() for q in queries.captured_queries)
    assert len(queries.captured_queries) <= 8


def test_untrusted_message_is_escaped(client, viewer, bundled, operator):
    services.start_run(
        bundled["counter-loop"],
        actor=Actor.operator(operator, "console"),
        message="<script>x()</script>",
    )
    body = login(client, viewer).get(reverse("run_list")).content.decode()
    assert "<script>x()" not in body and "&lt;script&gt;x()" in body


def test_outsider_is_forbidden(client, outsider):
    assert login(client, outsider).get(reverse("run_list")).status_code == 403


def test_post_is_405(client, viewer):
    assert login(client, viewer).post(reverse("run_list")).status_code == 405
