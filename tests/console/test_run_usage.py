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
    header = page.split('id="run-header"')[1].split("</section>")[0]
    assert "200 in / 50 out" in header and "$0.0200" in header
    assert "unknown" not in header


def test_cost_is_unknown_where_no_price_is_known(client, viewer, guided_run):
    run, row = guided_run
    add_iteration(run, row, 1, output="one", tokens_in=100, tokens_out=10)
    add_iteration(run, row, 2, output="two")
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "100→10 tokens · cost unknown" in page
    assert "tokens not reported · cost unknown" in page
    header = page.split('id="run-header"')[1].split("</section>")[0]
    assert "100 in / 10 out" in header
    assert '<dt>Cost</dt><dd class="run-cost"><span class="muted">unknown</span>' in header


def test_a_known_cost_with_some_unpriced_usage_says_so(client, viewer, guided_run):
    run, row = guided_run
    add_iteration(run, row, 1, output="a", tokens_in=5, tokens_out=5, cost_usd=Decimal("0.5"))
    add_iteration(run, row, 2, output="b", tokens_in=5, tokens_out=5)
    client.force_login(viewer)
    header = client.get(f"/runs/{run.pk}/").content.decode().split('id="run-header"')[1]
    assert '$0.5000 <span class="muted">+ unknown</span>' in header


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
