"""The audit of decisions: every answer at a gate (GateResponse: who, which decision, on
which digest, from where), filtered by date, recipe and project, as CSV or JSON Lines. The API
(`GET /api/audit/decisions`), `manage.py audit` and the admin read it here."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from runs.models import GateResponse

FIELDS = (
    "at",
    "run",
    "recipe",
    "gate",
    "node",
    "decision",
    "text",
    "by",
    "via",
    "digest",
    "closed_gate",
)
FORMATS = ("jsonl", "csv")
BATCH = 500


def decisions(
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    recipe: str = "",
    project: str = "",
):
    found = GateResponse.objects.select_related("gate", "run__recipe")  # in id order: `stream`
    if since is not None:
        found = found.filter(at__gte=since)
    if until is not None:
        found = found.filter(at__lt=until)
    if recipe:
        found = found.filter(run__recipe__slug=recipe)
    if project:
        found = found.filter(run__project__slug=project)
    return found


def row(answer: GateResponse) -> dict:
    return {
        **answer.as_dict(),
        "recipe": answer.run.recipe.slug,
        "node": answer.gate.node_id,
    }


def lines(answers, fmt: str) -> Iterator[str]:
    """The export, a line (or a CSV record) at a time: a long audit streams."""
    return stream(answers, fmt, fields=FIELDS, to_row=row)


def stream(found, fmt: str, *, fields: tuple[str, ...], to_row: Callable) -> Iterator[str]:
    """Any audit export (this one, the console's audit log): the rows of `found` in the
    order they were written, as JSON Lines or CSV."""
    rows = (to_row(item) for item in _batches(found))
    return _jsonl(rows, fields) if fmt == "jsonl" else _csv(rows, fields)


def _batches(found) -> Iterator:
    """In the order of their ids (the order they were written), a batch per query: no
    server-side cursor left open by a reader that stops half-way."""
    found = found.order_by("id")
    last = 0
    while batch := list(found.filter(id__gt=last)[:BATCH]):
        yield from batch
        last = batch[-1].pk


def _jsonl(rows: Iterable[dict], fields) -> Iterator[str]:
    for found in rows:
        yield json.dumps({name: found[name] for name in fields}, ensure_ascii=False) + "\n"


def _csv(rows: Iterable[dict], fields) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    for found in rows:
        # A text that opens like a formula is written as text: a spreadsheet never runs it.
        writer.writerow({name: _inert(_cell(found[name])) for name in fields})
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()


def _cell(value):
    """A structured value (a mapping, a list) as its JSON in one cell."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value


def _inert(value):
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
