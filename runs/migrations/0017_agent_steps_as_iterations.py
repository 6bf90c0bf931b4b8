"""Every agent call is an iteration (issue 35): a prompt or command step that called its
agent (a loop_group's body steps too) gets the iteration it would have today, holding the
prompt, the answer and the usage its row's state kept; the state keeps no usage any more.
A loop_group iteration no longer carries the sum of its body (its body's calls hold it),
so nothing is counted twice. Backwards, each step's newest call's usage goes back into its
state and the step iterations are removed (a group iteration's sum is not written again:
the run's totals count the steps)."""

from decimal import Decimal, InvalidOperation

from django.db import migrations

SINGLE_CALLS = ("prompt", "command")
USAGE = ("tokens_in", "tokens_out", "cost_usd")
ENDED = {"completed": "completed", "failed": "failed", "cancelled": "cancelled"}


def _count(value):
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _cost(value):
    try:
        return Decimal(str(value)) if value not in (None, "") else None
    except InvalidOperation:
        return None


def _duration_ms(row):
    if row.started_at and row.finished_at:
        return max(0, int((row.finished_at - row.started_at).total_seconds() * 1000))
    return None


def calls_to_iterations(apps, schema_editor):
    NodeRun = apps.get_model("runs", "NodeRun")
    Iteration = apps.get_model("runs", "Iteration")
    made: dict[int, int] = {}  # step row -> its new iteration, for a fork's carried copies
    steps = NodeRun.objects.filter(kind__in=SINGLE_CALLS, status__in=ENDED).order_by("id")
    for row in steps.iterator(chunk_size=500):
        state = dict(row.state or {})
        if "prompt" not in state and not any(state.get(name) is not None for name in USAGE):
            continue  # it never asked its agent (a failure before the call)
        if Iteration.objects.filter(node_run_id=row.pk).exists():
            continue
        answered = row.status == "completed"
        it = Iteration.objects.create(
            run_id=row.run_id,
            node_run_id=row.pk,
            node_id=row.node_id,
            generation=row.generation,
            number=max(row.iteration, 1),  # a loop_group's body step: the group's round
            status=ENDED[row.status],
            prompt=state.get("prompt") or "",
            raw_output=state.get("raw") or (row.output if answered else ""),
            output=row.output if answered else "",
            output_file=row.output_file if answered else "",
            output_bytes=row.output_bytes if answered else None,
            structured=row.structured if answered else None,
            error="" if answered else row.error,
            session_id=state.get("session_id") or "",
            tokens_in=_count(state.get("tokens_in")),
            tokens_out=_count(state.get("tokens_out")),
            cost_usd=_cost(state.get("cost_usd")),
            attempts=max(row.attempts, 1),
            queued_at=row.queued_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            duration_ms=_duration_ms(row),
            carried_from_id=made.get(row.carried_from_id),
        )
        made[row.pk] = it.pk
        for name in USAGE:
            state.pop(name, None)
        NodeRun.objects.filter(pk=row.pk).update(state=state, iteration_count=1)
    Iteration.objects.filter(node_run__kind="loop_group").update(
        tokens_in=None, tokens_out=None, cost_usd=None
    )


def iterations_to_calls(apps, schema_editor):
    NodeRun = apps.get_model("runs", "NodeRun")
    Iteration = apps.get_model("runs", "Iteration")
    calls = Iteration.objects.filter(node_run__kind__in=SINGLE_CALLS).order_by("id")
    for it in calls.iterator(chunk_size=500):
        row = NodeRun.objects.get(pk=it.node_run_id)
        state = dict(row.state or {})
        state.update(
            tokens_in=it.tokens_in,
            tokens_out=it.tokens_out,
            cost_usd=str(it.cost_usd) if it.cost_usd is not None else None,
        )
        NodeRun.objects.filter(pk=row.pk).update(state=state, iteration_count=0)
    calls.delete()


class Migration(migrations.Migration):
    dependencies = [("runs", "0016_run_phase")]

    operations = [migrations.RunPython(calls_to_iterations, iterations_to_calls)]
