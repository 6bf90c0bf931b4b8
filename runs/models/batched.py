"""The plain loop's two writes, each one statement (PostgreSQL): the iteration hot path.

`claim_logged` = lock the run + `Iteration.start` (claim + `iteration_started`);
`finish_then_next` = lock the run + `Iteration.complete` (finish + `iteration_completed`)
+ the node's `start_iteration` (its row, the next Iteration, `iteration_queued`). The
events' payloads are built by the same functions as the separate steps' (agent_call.py).
Each is the
same transition as its separate steps, with the same fences (the run not finished, the
iteration still pending / still running as the attempt that claimed it, the node still
running), written as data-modifying CTEs so one round trip does it, and atomic on its own
(a single statement commits or not at all). The run's row is locked first, as every
transition does, so the lock order against a cancel is unchanged; its event counter is
bumped only when the fenced writes happened, so the log stays gapless.

Other databases take the separate steps inside a transaction (`Iteration` falls back;
`in_use` is the one switch). The statuses it writes and fences by are the models' own
(`_statuses`), and tests/kernel/test_batched_parity.py runs the same loops through both
paths and compares every row and event.
"""

from __future__ import annotations

import functools

from django.db import connection
from django.utils import timezone

from . import agent_call


def in_use() -> bool:
    """Does the iteration take this path? On PostgreSQL (the statements need its CTEs)."""
    return connection.vendor == "postgresql"


@functools.cache
def _terminal() -> tuple[str, ...]:
    """The run statuses that fence a write: `Run.TERMINAL`, the one definition (read once:
    this is the iteration's hot path)."""
    from .run import Run

    return tuple(sorted(status.value for status in Run.TERMINAL))


@functools.cache
def _statuses() -> dict[str, object]:
    """The statuses of the transitions written here, from their models: an iteration
    claimed from pending and finished while running (`Iteration.objects.claim`,
    `Iteration.finish`); its node moved to running from any unfinished status
    (`NodeRun.start_iteration`)."""
    from .iteration import Iteration
    from .node import NodeRun

    return {
        "pending": Iteration.Status.PENDING.value,
        "running": Iteration.Status.RUNNING.value,
        "node_running": NodeRun.Status.RUNNING.value,
        "node_unfinished": [status.value for status in NodeRun.UNFINISHED],
    }


def _columns(instance) -> tuple[list[str], list]:
    """Every column of an unsaved row and its database value (defaults included)."""
    fields = [f for f in instance._meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    return [quote(f.column) for f in fields], [
        f.get_db_prep_save(getattr(instance, f.attname), connection) for f in fields
    ]


def _json(value):
    from .events import RunEvent

    return RunEvent._meta.get_field("data").get_db_prep_value(value, connection)


def _node_structured(value):
    from .node import NodeRun

    return NodeRun._meta.get_field("structured").get_db_prep_save(value, connection)


def _tables():
    from .events import RunEvent
    from .iteration import Iteration
    from .node import NodeRun
    from .run import Run

    return (
        Run._meta.db_table,
        NodeRun._meta.db_table,
        Iteration._meta.db_table,
        RunEvent._meta.db_table,
    )


def _publish(run_id: int, rows) -> None:
    from django.db import transaction

    from runs import live

    events = [
        {"seq": seq, "kind": kind, "step": step, "data": data, "at": at.isoformat()}
        for seq, kind, step, data, at in rows
    ]
    transaction.on_commit(lambda: [live.publish_event(run_id, e) for e in events])


def claim_logged(it, prompt: str, session_id: str | None, lease_until) -> bool:
    runs, _, iterations, events = _tables()
    statuses = _statuses()
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH locked AS (SELECT id FROM {runs} WHERE id = %s AND status <> ALL(%s) "
            "FOR UPDATE), "
            f"claimed AS (UPDATE {iterations} SET status = %s, "
            "attempts = attempts + 1, started_at = %s, finished_at = NULL, "
            "lease_expires_at = %s, prompt = %s, session_id = %s, raw_output = '', "
            "output = '', error = '', output_file = '', output_bytes = NULL, "
            "waiting_for = '', waiting_ahead = NULL "
            "WHERE id = %s AND status = %s AND EXISTS (SELECT 1 FROM locked) "
            "RETURNING attempts), "
            f"bumped AS (UPDATE {runs} SET last_seq = last_seq + 1 WHERE id = %s "
            "AND EXISTS (SELECT 1 FROM claimed) RETURNING last_seq), "
            f"logged AS (INSERT INTO {events} (run_id, seq, kind, step, data, created_at) "
            "SELECT %s, bumped.last_seq, 'iteration_started', %s, "
            "%s::jsonb || jsonb_build_object('attempt', claimed.attempts), %s "
            "FROM bumped, claimed RETURNING seq, data) "
            "SELECT claimed.attempts, logged.seq, logged.data FROM claimed "
            "LEFT JOIN logged ON true",
            [
                it.run_id,
                list(_terminal()),  # an array parameter (psycopg adapts lists)
                statuses["running"],
                now,
                lease_until,
                prompt,
                session_id or "",
                it.pk,
                statuses["pending"],
                it.run_id,
                it.run_id,
                it.node_id,
                # The attempt is the one the claim returns: filled in by the statement.
                _json(agent_call.started_data(it.number, None)),
                now,
            ],
        )
        claimed = cursor.fetchone()
    if claimed is None:
        return False
    attempts, seq, data = claimed
    it.attempts, it.status, it.started_at = attempts, statuses["running"], now
    it.prompt, it.session_id, it.lease_expires_at = prompt, session_id or "", lease_until
    it.raw_output = it.output = it.error = it.output_file = ""
    it.output_bytes = it.finished_at = None
    if isinstance(data, str):
        import json

        data = json.loads(data)
    _publish(it.run_id, [(seq, "iteration_started", it.node_id, data, now)])
    return True


def finish_then_next(it, status: str, fields: dict, *, timed_out: bool):
    """Finish `it` with `fields`, write its answer (output, structured, the session) on
    its node and queue iteration `it.number + 1`; returns the new Iteration's id, or None
    (and nothing written) when the run finished or the attempt lost its claim."""
    now = timezone.now()
    fields = {**fields, "status": status, "finished_at": now, "lease_expires_at": None}
    fields.setdefault("duration_ms", it.elapsed_ms())
    number = it.number + 1
    completed_data = agent_call.completed_data(
        it.number,
        channels=fields["channels"],
        timed_out=timed_out,
        duration_ms=fields["duration_ms"],
    )
    queued_data = {"iteration": number, "feedback": False}
    ctes = [
        *_finish_ctes(it, fields),
        *_next_ctes(it, fields, number, now),
        *_log_ctes(it, completed_data, queued_data, now),
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH "
            + ", ".join(sql for sql, _ in ctes)
            + " SELECT (SELECT id FROM queued), (SELECT last_seq FROM bumped)",
            [param for _, params in ctes for param in params],
        )
        next_id, last_seq = cursor.fetchone()
    if next_id is None:
        return None
    for name, value in fields.items():
        setattr(it, name, value)
    _publish(
        it.run_id,
        [
            (last_seq - 1, "iteration_completed", it.node_id, completed_data, now),
            (last_seq, "iteration_queued", it.node_id, queued_data, now),
        ],
    )
    return next_id


# finish_then_next's statement, one CTE at a time: its text and its parameters side by
# side, so each placeholder is read next to its value.
Cte = tuple[str, list]


def _finish_ctes(it, fields: dict) -> list[Cte]:
    """Lock the run unless it finished, and the node unless it ended; then finish the
    iteration with `fields`, if its attempt still holds it (`finished`)."""
    from .iteration import Iteration

    runs, nodes, iterations, _ = _tables()
    statuses = _statuses()
    sets, params = [], []
    for name, value in fields.items():
        field = Iteration._meta.get_field(name)
        sets.append(f"{connection.ops.quote_name(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    return [
        (
            f"locked AS (SELECT id FROM {runs} WHERE id = %s AND status <> ALL(%s) FOR UPDATE)",
            [it.run_id, list(_terminal())],  # an array parameter (psycopg adapts lists)
        ),
        (
            f"node AS (SELECT id FROM {nodes} WHERE id = %s AND status = ANY(%s) FOR UPDATE)",
            [it.node_run_id, statuses["node_unfinished"]],
        ),
        (
            f"finished AS (UPDATE {iterations} SET {', '.join(sets)} "
            "WHERE id = %s AND status = %s AND attempts = %s "
            "AND EXISTS (SELECT 1 FROM locked) AND EXISTS (SELECT 1 FROM node) "
            "RETURNING id)",
            [*params, it.pk, statuses["running"], it.attempts],
        ),
    ]


def _next_ctes(it, fields: dict, number: int, now) -> list[Cte]:
    """Once `finished`: write the answer on the node, still running (`moved`), and insert
    iteration `number`, pending (`queued`)."""
    from .iteration import Iteration

    _, nodes, iterations, _ = _tables()
    session = fields.get("session_id") or None
    following = Iteration(
        run_id=it.run_id,
        node_run_id=it.node_run_id,
        node_id=it.node_id,
        generation=it.generation,
        number=number,
        queued_at=now,
    )
    columns, values = _columns(following)
    return [
        (
            f"moved AS (UPDATE {nodes} SET status = %s, output = %s, structured = %s, "
            "output_file = %s, output_bytes = %s, iteration_count = %s, "
            "state = CASE WHEN %s::text IS NULL THEN state "
            "ELSE state || jsonb_build_object('session_id', %s::text) END "
            "WHERE id = %s AND EXISTS (SELECT 1 FROM finished) RETURNING id)",
            [
                _statuses()["node_running"],
                fields["output"],
                _node_structured(fields["structured"]),
                fields.get("output_file", ""),
                fields.get("output_bytes"),
                number,
                session,
                session,
                it.node_run_id,
            ],
        ),
        (
            f"queued AS (INSERT INTO {iterations} ({', '.join(columns)}) "
            f"SELECT {', '.join(['%s'] * len(values))} FROM moved RETURNING id)",
            values,
        ),
    ]


def _log_ctes(it, completed_data: dict, queued_data: dict, now) -> list[Cte]:
    """Once `queued`: take the run's next two event numbers (`bumped`) and log the
    iteration completed and the next one queued (`logged`)."""
    runs, _, _, events = _tables()
    return [
        (
            f"bumped AS (UPDATE {runs} SET last_seq = last_seq + 2 WHERE id = %s "
            "AND EXISTS (SELECT 1 FROM queued) RETURNING last_seq)",
            [it.run_id],
        ),
        (
            f"logged AS (INSERT INTO {events} (run_id, seq, kind, step, data, created_at) "
            "SELECT %s, last_seq - 1, 'iteration_completed', %s, %s, %s FROM bumped "
            "UNION ALL SELECT %s, last_seq, 'iteration_queued', %s, %s, %s FROM bumped "
            "RETURNING seq)",
            [
                *(it.run_id, it.node_id, _json(completed_data), now),
                *(it.run_id, it.node_id, _json(queued_data), now),
            ],
        ),
    ]
