"""An iteration that waits for its provider goes back to the queue: it holds no worker
process and spends no attempt while it waits (runs/providers/limits.py keeps the slots).

`take_or_queue` before the claim: a slot, or the pending iteration is sent again later
(`LOOP_PROVIDER_POLL_SECONDS`, or the window it waits for, with jitter), saying what it
waits for; a released slot wakes the first waiters at once (`give_back`). `put_back` after
a busy answer mid-call (429, 503, 529): the claimed iteration is pending again, its attempt
given back. Past `LOOP_PROVIDER_WAIT_CEILING_SECONDS` of waiting it fails, with the
provider's words.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from runs import dispatch
from runs.providers import limits
from runs.providers.base import ProviderBusy

from .agent import StepFailed
from .state import lock_run

CALLER = "iteration:"


def caller(it) -> str:
    return f"{CALLER}{it.pk}"


def take_or_queue(it, provider) -> tuple[bool, limits.Slot | None]:
    """(True, its slot or None for an unlimited provider) to go on; (False, None) when the
    iteration was put back to wait. StepFailed past the ceiling."""
    try:
        return True, limits.take(provider, caller(it))
    except limits.AlreadyHeld:
        return False, None  # another delivery of this iteration makes the call
    except limits.Busy as busy:
        _check_ceiling(it, busy.provider, busy.words)
        _wait(it, busy.provider, busy.ahead, busy.wait_seconds)
        return False, None


def give_back(slot: limits.Slot | None, outcome=None) -> None:
    """Release the slot, count what the call used, and wake the first waiters."""
    if slot is None:
        return
    result = getattr(outcome, "result", None)
    tokens = (getattr(result, "tokens_in", 0) or 0) + (getattr(result, "tokens_out", 0) or 0)
    for member in slot.give_back(tokens):
        if member.startswith(CALLER) and member != slot.caller:
            dispatch.send_now("run_iteration", int(member.removeprefix(CALLER)))


def put_back(it, busy: ProviderBusy, stream) -> None:
    """A busy answer mid-call: the claimed iteration is pending again (its attempt given
    back, nothing it printed kept) and asks again after the provider's Retry-After, or a
    backoff. Past the ceiling it fails instead (StepFailed)."""
    _check_ceiling(it, busy.provider, str(busy))
    tries = it.provider_waits_in_a_row()
    wait = limits.backoff(tries + 1, busy.retry_after)
    with transaction.atomic():
        run = lock_run(it.run_id, with_recipe=False)
        if run.is_terminal or not it.give_back_attempt(busy.provider):
            return
        run.append_event(
            "provider_busy",
            it.node_id,
            iteration=it.number,
            provider=busy.provider,
            status=busy.status,
            wait_seconds=round(wait, 1),
        )
    stream.close()
    limits.count("waited_seconds", busy.provider, wait)
    dispatch.send_later("run_iteration", wait, it.pk)


def _wait(it, provider: str, ahead: int, seconds: float) -> None:
    """Record what the pending iteration waits for (logged when it starts waiting) and
    send it again in `seconds`."""
    if it.waiting_for_provider(provider, ahead):
        with transaction.atomic():
            run = lock_run(it.run_id, with_recipe=False)
            if not run.is_terminal:
                run.append_event(
                    "provider_wait",
                    it.node_id,
                    iteration=it.number,
                    provider=provider,
                    ahead=ahead,
                )
    limits.count("waited_seconds", provider, seconds)
    dispatch.send_later("run_iteration", seconds, it.pk)


def _check_ceiling(it, provider: str, words: str) -> None:
    since = it.waiting_since
    if since is None:
        return
    waited = (timezone.now() - since).total_seconds()
    if waited > limits.ceiling_seconds():
        raise StepFailed(limits.gave_up(provider, waited, words))
