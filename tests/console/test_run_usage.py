"""Token usage, cost and worktree diffs on the run page."""

from decimal import Decimal

import pytest
from django.db import transaction

from .conftest import add_iteration

pytestmark = pytest.mark.django_db


def test_usage_per_iteration_and_per_run(client, viewer, guided_run):
    run, row = guided_run
    add_iteration(
        run, row, 1, output="one", tokens_in=120, tokens_out=30, cost_usd=Decimal("0.0123")
    )
    add_iteration(
        run, row, 2, output="two", tokens_in=80, tokens_out=20, cost_usd=Decimal("0.0077")
    )
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "120→30 tokens" in page and "$0.0123" in page
    assert "200 in / 50 out tokens" in page and "$0.0200" in page


def test_no_usage_line_when_providers_report_none(client, viewer, guided_run):
    run, row = guided_run
    add_iteration(run, row, 1, output="one")
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "tokens" not in page and "Usage" not in page


def test_worktree_diff_is_shown_on_its_iteration(client, viewer, guided_run):
    run, row = guided_run
    add_iteration(run, row, 1, output="one")
    with transaction.atomic():
        run.append_event(
            "worktree_diff",
            "refine",
            iteration=1,
            commit="abc123def4567",
            stat="README.md | 2 +-",
            diff="-old <b>\n+new",
            truncated=False,
        )
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Changes in the worktree" in page and "README.md | 2 +-" in page
    assert "+new" in page and "&lt;b&gt;" in page  # escaped
