"""The ceiling: a call that waited for its provider longer than
LOOP_PROVIDER_WAIT_CEILING_SECONDS fails, saying what it waited for, whether it waited in
the queue (a loop's iteration) or in its worker (every other call)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.executor.agent import StepFailed, _with_transient_retries
from runs.executor.provider_queue import take_or_queue
from runs.providers import limits
from runs.providers.base import AgentRequest, ProviderError
from tests.limits.test_slots import Provider

pytestmark = pytest.mark.django_db


def test_an_iteration_that_waited_past_the_ceiling_fails_saying_for_what(
    make_recipe, operator, settings
):
    from runs import services
    from runs.actor import Actor
    from runs.models import Iteration, NodeRun

    settings.LOOP_PROVIDER_WAIT_CEILING_SECONDS = 60
    recipe = make_recipe("name: c\nprovider: demo\nnodes:\n  - id: a\n    bash: echo\n")
    run = services.start_run(recipe, Actor.operator(operator, "api"), start=False)
    row = NodeRun.objects.create(run=run, node_id="work", kind="loop", status="running")
    it = Iteration.objects.create(
        run=run,
        node_run=row,
        node_id="work",
        number=1,
        waiting_for="slotted",
        waiting_since=timezone.now() - timedelta(minutes=5),
    )
    provider = Provider(max_concurrent=1)
    holder = limits.take(provider, "iteration:someone-else")
    with pytest.raises(StepFailed, match=r"gave up waiting for provider slotted after 3\d\d s"):
        take_or_queue(it, provider)
    holder.give_back()


class AlwaysBusy:
    name = "crowded"
    structured_output = "none"

    def __init__(self):
        self.calls = 0

    def run(self, request, on_chunk):
        self.calls += 1
        raise ProviderError(
            "provider 'crowded': HTTP 429 Too Many Requests (rate_limit_error)",
            permanent=False,
            status=429,
            retry_after=0.2,
        )


def test_a_call_waiting_in_its_worker_gives_up_at_the_ceiling_with_the_providers_words(settings):
    settings.LOOP_PROVIDER_WAIT_CEILING_SECONDS = 1
    provider, said = AlwaysBusy(), []
    request = AgentRequest(prompt="hi", workdir=".")
    with pytest.raises(StepFailed) as failed:
        _with_transient_retries(provider, request, said.append)
    assert "gave up waiting for provider crowded" in str(failed.value)
    assert "HTTP 429 Too Many Requests (rate_limit_error)" in str(failed.value)
    assert provider.calls >= 2  # it waited (its Retry-After) and asked again
    assert any("is busy (HTTP 429); waiting" in line for line in said)
