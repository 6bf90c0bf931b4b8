"""Outputs as the web process reads them: bounded for the API, whole only as a download.

The database keeps at most LOOP_MAX_OUTPUT_BYTES of each output (runs/outputs.py); an API
answer carries at most ANSWER_BYTES (512 KB, or the cap if smaller) of outputs and prompts
in all, whatever its number of rows: when its texts together are longer, each output keeps
its end and each prompt its start, the longest cut first (a text within its fair share is
never cut), and says `output_truncated` / `prompt_truncated`. The database sends only
those ends (`Right`), so the web process never holds a whole long output. The full output
is a download, streamed from the file (or from the database in slices for a row that has
no file), never read into memory at once.
"""

from __future__ import annotations

import asyncio

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import connection
from django.db.models import F, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Left, Length, NullIf, Right, Substr
from django.http import StreamingHttpResponse
from django.urls import reverse

from runs.models import Iteration, NodeRun
from runs.outputs import max_bytes, path_of, tail

DOWNLOAD_SLICE = 1 << 20  # characters read per query for a row without a file
# The most text (outputs and prompts together) one API answer carries, whatever the cap:
# the web process holds an answer two or three times over while it encodes it, and its
# database connections keep buffers as large as the largest row they fetched. Measured in
# docs/performance.md ("Long outputs and the web process's memory").
ANSWER_BYTES = 512 * 1024


def answer_bytes() -> int:
    return min(max_bytes(), ANSWER_BYTES)


def level(lengths: list[int], budget: int) -> int:
    """The most characters of one text an answer carries so that all of them together
    stay within `budget`: the short ones whole, the long ones cut to one length."""
    left, waiting = budget, len(lengths)
    for length in sorted(lengths):
        if length * waiting > left:
            return left // waiting
        left -= length
        waiting -= 1
    return max(lengths, default=0)


# The texts an answer bounds, per model: name -> (the text, which end is kept). An
# output keeps its end (what a test run failed on, what an agent concluded); a prompt its
# start (the instructions; its end is often the previous output it quotes). A step's prompt
# lives in its state (a prompt node's prompt, a bash or script node's script).
TEXTS = {
    Iteration: {"output": (F("output"), Right), "prompt": (F("prompt"), Left)},
    NodeRun: {
        "output": (F("output"), Right),
        "stderr": (F("stderr"), Right),  # a step's stderr, like its output: its end
        "prompt": (
            Coalesce(NullIf(KT("state__prompt"), Value("")), KT("state__script"), Value("")),
            Left,
        ),
    },
}


def bounded(rows, *names: str):
    """`rows` (a queryset of Iteration or NodeRun) with the texts `names` (default: the
    output) bounded together for one answer: the heavy fields deferred, `<name>_part` what
    each row carries of each text and `<name>_chars` its length. Two queries: the lengths,
    then the rows."""
    names = names or ("output",)
    texts = TEXTS[rows.model]
    rows = rows.defer(*HEAVY[rows.model])
    lengths = {f"{name}_chars": Length(texts[name][0]) for name in names}
    found = rows.annotate(**lengths).values_list(*lengths)
    most = max(1, level([n or 0 for row in found for n in row], answer_bytes()))
    cuts = {f"{name}_part": texts[name][1](texts[name][0], most) for name in names}
    return rows.annotate(**lengths, **cuts)


def bounded_page(rows, size: int, *names: str) -> tuple[list, bool]:
    """`take_page` for rows with outputs: the first `size` rows of the keyset-ordered
    `rows`, their texts bounded together (`bounded`), and whether more follow."""
    ids = list(rows.values_list("pk", flat=True)[: size + 1])
    return list(bounded(rows.filter(pk__in=ids[:size]), *names)), len(ids) > size


# What an answer never loads whole (a step's state holds its prompt and its raw output).
HEAVY = {
    Iteration: ("output", "raw_output", "prompt"),
    NodeRun: ("output", "stderr", "state"),
}


def api_output(row) -> dict:
    """A row's `output` for an API answer, `output_truncated`, and where the whole is."""
    text = tail(row.output_part or "", answer_bytes())  # within the bound in bytes, too
    return {
        "output": text,
        "output_truncated": row.output_truncated or (row.output_chars or 0) > len(text),
        "output_url": output_url(row),
    }


def api_stderr(row) -> dict:
    """A step's `stderr` (its end) for an API answer, and `stderr_truncated`; the database
    keeps only its end within the cap, which is all there is of it."""
    text = tail(row.stderr_part or "", answer_bytes())
    return {"stderr": text, "stderr_truncated": (row.stderr_chars or 0) > len(text)}


def api_prompt(row) -> dict:
    """A row's `prompt` (its start) for an API answer, and `prompt_truncated`."""
    text = row.prompt_part or ""
    text = text.encode("utf-8", "replace")[: answer_bytes()].decode("utf-8", "ignore")
    return {"prompt": text, "prompt_truncated": (row.prompt_chars or 0) > len(text)}


def output_url(row) -> str:
    """The full output's download (the API's; the console has its own)."""
    if isinstance(row, Iteration):
        return reverse("api:iteration_output", args=[row.run_id, row.pk])
    return reverse("api:step_output", args=[row.run_id, row.pk])


# --- the download ------------------------------------------------------------------------------


def download(request, row, filename: str) -> StreamingHttpResponse:
    """The whole output of an Iteration (what the agent printed) or a NodeRun, as a text
    file: from its output file when it passed the cap, else from the database. Under ASGI
    the body is an async iterator (Django would read a sync one whole into memory first)."""
    path = path_of(row.output_file)
    asgi = isinstance(request, ASGIRequest)
    if path is not None:
        body = _file_slices_async(path) if asgi else _file_slices(path)
    else:
        field = "raw_output" if isinstance(row, Iteration) else "output"
        slices = _database_slices(type(row), row.pk, field, release=asgi)
        body = _async(slices) if asgi else slices
    response = StreamingHttpResponse(body, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    if path is not None:
        response["Content-Length"] = str(path.stat().st_size)
    return response


def _file_slices(path):
    with open(path, "rb") as file:
        while data := file.read(DOWNLOAD_SLICE):
            yield data


async def _file_slices_async(path):
    file = await asyncio.to_thread(open, path, "rb")
    try:
        while data := await asyncio.to_thread(file.read, DOWNLOAD_SLICE):
            yield data
    finally:
        file.close()


async def _async(slices):
    """A sync iterator of database reads, each read on a worker thread."""
    done = object()
    while (part := await sync_to_async(next, thread_sensitive=False)(slices, done)) is not done:
        yield part


def _database_slices(model, pk: int, field: str, *, release: bool = False):
    """A row's text in slices of DOWNLOAD_SLICE characters, one query each (an output
    stored before the cap existed may be long). An Iteration without raw output (a
    loop_group's) is read from its `output`. `release`: close the thread's database
    connection after each read (the reads run on a pool's threads under ASGI)."""

    def read(query):
        try:
            return query()
        finally:
            if release and not connection.in_atomic_block:
                connection.close()

    rows = model.objects.filter(pk=pk)

    def length_of(name):
        return rows.annotate(n=Length(name)).values_list("n", flat=True).first() or 0

    length = read(lambda: length_of(field))
    if not length and model is Iteration:
        field = "output"
        length = read(lambda: length_of(field))
    for start in range(1, length + 1, DOWNLOAD_SLICE):
        part = read(
            lambda start=start: (
                rows.annotate(part=Substr(field, start, DOWNLOAD_SLICE))
                .values_list("part", flat=True)
                .first()
            )
        )
        yield (part or "").encode("utf-8")


def filename(row) -> str:
    if isinstance(row, Iteration):
        return f"run-{row.run_id}-{_safe(row.node_id)}-iteration-{row.number}-output.txt"
    return f"run-{row.run_id}-{_safe(row.node_id)}-output.txt"


def _safe(node_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in node_id)[:100]


__all__ = [
    "api_output",
    "api_prompt",
    "api_stderr",
    "bounded",
    "bounded_page",
    "download",
    "filename",
    "level",
    "output_url",
]
