"""The output cap: what one iteration or one node keeps of what its agent or step printed.

At most LOOP_MAX_OUTPUT_BYTES (UTF-8) of an output is kept in the database, and it is its
end (where a test run says what failed and an agent says it is done). An output that passes
it goes whole, as it arrives, to a file in the run's data folder
(`LOOP_DATA_DIR/runs/<run>/outputs/`), named by the row's `output_file` with its size in
`output_bytes`; the live stream says so once and stops (runs/executor/stream.py). Pages,
the API and later steps read only what the database keeps; the full output is a download
(runs/output_reads.py). The file stops at LOOP_OUTPUT_SPILL_MB (200 MB by default) with a
line saying so: a looping agent cannot fill the disk, and the file keeps the output's start,
which nothing else keeps (the database has its end).

`Capture` holds an output while it arrives: a bounded tail in memory and, past the cap, the
file. A worker never holds more of a streamed output than the cap plus one chunk.
"""

from __future__ import annotations

import hashlib
from collections import deque
from pathlib import Path

from django.conf import settings

from runs.sandbox import files

# Text is encoded, hashed and written in slices of this many characters, so a long final
# answer never has a second whole copy made of it as bytes.
SLICE = 1 << 20


# The caps when no console settings are loaded (a Python loop run as a plain script).
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_SPILL_MB = 200
MB = 1 << 20


def max_bytes() -> int:
    if not settings.configured:
        return DEFAULT_MAX_BYTES
    return settings.LOOP_MAX_OUTPUT_BYTES


def spill_bytes() -> int:
    """The most an output's file holds (LOOP_OUTPUT_SPILL_MB); 0: no cap."""
    if not settings.configured:
        return DEFAULT_SPILL_MB * MB
    return settings.LOOP_OUTPUT_SPILL_MB * MB


def size_words(count: int) -> str:
    """4194304 -> "4 MB", 1536 -> "1.5 KB": how pages, messages and the stream say a size."""
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{count} bytes"


def tail(text: str, limit: int | None = None) -> str:
    """The end of `text` within `limit` bytes of UTF-8 (the cap by default), never cutting
    a character in two."""
    limit = max_bytes() if limit is None else limit
    if len(text) * 4 <= limit:  # fits whatever it holds: no need to count
        return text
    end = text[-limit:]  # at most `limit` characters can fit; count their bytes
    data = end.encode("utf-8", "replace")
    if len(data) <= limit:
        return end
    return data[-limit:].decode("utf-8", "ignore")  # a cut character's bytes are dropped


def utf8_size(text: str) -> int:
    if text.isascii():
        return len(text)
    return sum(
        len(text[i : i + SLICE].encode("utf-8", "replace")) for i in range(0, len(text), SLICE)
    )


def folder(run_id: int) -> Path:
    return Path(settings.LOOP_DATA_DIR) / "runs" / str(run_id) / "outputs"


def path_of(stored: str) -> Path | None:
    """The file an `output_file` value names, if it is one of the data folder's output files
    (the value is only ever written by the workers; this is belt and braces)."""
    if not stored:
        return None
    root = (Path(settings.LOOP_DATA_DIR) / "runs").resolve()
    path = (Path(settings.LOOP_DATA_DIR) / stored).resolve()
    if not path.is_relative_to(root) or path.parent.name != "outputs" or not path.is_file():
        return None
    return path


class Capture:
    """One output as it arrives (`add`), then as it is recorded (`keep`).

    `text` is its end within the cap; once the output passes the cap, `path` is the file
    holding all of it, written chunk by chunk. `name` names the file within the run's
    outputs folder (a row and its attempt: a retried attempt writes its own)."""

    def __init__(self, run_id: int, name: str, limit: int | None = None, spill: int | None = None):
        self.run_id = run_id
        self.name = name
        self.limit = max_bytes() if limit is None else limit
        self.spill = spill_bytes() if spill is None else spill
        self._reset()

    def _reset(self) -> None:
        self.chunks: deque[tuple[str, int]] = deque()  # (text, its UTF-8 size)
        self.kept = 0  # bytes in `chunks`
        self.total = 0  # bytes of the whole output
        self.digest = hashlib.blake2b(digest_size=16)
        self.file = None
        self.path: Path | None = None
        self.written = 0  # bytes in the file
        self.spill_cut = False  # the file reached `spill` and says so

    @property
    def truncated(self) -> bool:
        return self.path is not None

    @property
    def text(self) -> str:
        return "".join(chunk for chunk, _ in self.chunks)

    def fields(self) -> dict:
        """What a row records of its output besides the text."""
        if self.path is None:
            return {"output_file": "", "output_bytes": None}
        relative = self.path.relative_to(Path(settings.LOOP_DATA_DIR))
        return {"output_file": str(relative), "output_bytes": self.total}

    def add(self, chunk: str) -> None:
        if not chunk:
            return
        data = chunk.encode("utf-8", "replace")
        self.total += len(data)
        self.digest.update(data)
        if self.file is None and self.total > self.limit:
            self._open()  # the output so far: all of it is still in memory
        if self.file is not None:
            self._spill(data)
            self.file.flush()
        self.chunks.append((chunk, len(data)))
        self.kept += len(data)
        self._trim()

    def reset(self) -> None:
        """Start again (a step's retry): the earlier attempt's text and file are dropped."""
        self.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        self._reset()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def keep(self, text: str) -> str:
        """Record `text` as this output's final value (what the provider or step returned:
        usually exactly what streamed) and return what the database keeps of it. Past the
        cap the file must hold all of `text`: the streamed file when it is the same bytes,
        else `text` is written anew. Within the cap no file is kept."""
        self.close()
        size = utf8_size(text)
        if size <= self.limit:
            if self.path is not None:
                self.path.unlink(missing_ok=True)
            self._reset()
            self.chunks.append((text, size))
            self.kept = self.total = size
            return text
        if not (self.path is not None and size == self.total and self._same(text)):
            self._write(text, size)
        kept = tail(text, self.limit)
        self.chunks = deque([(kept, utf8_size(kept))])
        self.kept = self.chunks[0][1]
        return kept

    # --- inside ----------------------------------------------------------------------------

    def _open(self) -> None:
        self.file = self._create()
        for chunk, _ in self.chunks:
            self._spill(chunk.encode("utf-8", "replace"))

    def _create(self):
        """The output's file, empty (the run's data folder: out of every sandbox's reach)."""
        where = folder(self.run_id)
        where.mkdir(parents=True, exist_ok=True)
        self.path = where / f"{self.name}.txt"
        self.written, self.spill_cut = 0, False
        return files.create_file(where, self.path.name, mode=0o644)

    def _spill(self, data: bytes) -> None:
        """`data` on to the file, up to the spill cap; there, a line saying so, once."""
        if self.spill_cut:
            return
        room = self.spill - self.written if self.spill else len(data)
        if len(data) > room:
            # `data` is whole characters: only the one at the cut may be left in part.
            data = data[:room].decode("utf-8", "ignore").encode("utf-8")
            self.spill_cut = True
        self.file.write(data)
        self.written += len(data)
        if self.spill_cut:
            self.file.write(
                f"\n[output cut at {size_words(self.spill)} (LOOP_OUTPUT_SPILL_MB): this file "
                "keeps its start, the run its end]\n".encode()
            )

    def _trim(self) -> None:
        while len(self.chunks) > 1 and self.kept - self.chunks[0][1] >= self.limit:
            self.kept -= self.chunks.popleft()[1]
        if self.kept > self.limit:
            first, size = self.chunks.popleft()
            cut = tail(first, size - (self.kept - self.limit))
            cut_size = utf8_size(cut)
            self.chunks.appendleft((cut, cut_size))
            self.kept += cut_size - size

    def _same(self, text: str) -> bool:
        digest = hashlib.blake2b(digest_size=16)
        for i in range(0, len(text), SLICE):
            digest.update(text[i : i + SLICE].encode("utf-8", "replace"))
        return digest.digest() == self.digest.digest()

    def _write(self, text: str, size: int) -> None:
        with self._create() as self.file:
            for i in range(0, len(text), SLICE):
                if self.spill_cut:
                    break
                self._spill(text[i : i + SLICE].encode("utf-8", "replace"))
        self.file = None
        self.total = size


class StderrTail(Capture):
    """A step's stderr as it arrives: only its end within the cap is kept (no file: the
    whole of a step's output is its stdout; stderr is what a person reads for why)."""

    def __init__(self, limit: int | None = None):
        super().__init__(0, "stderr", limit)

    def _open(self) -> None:
        pass  # never spills to a file: `_trim` keeps the end


def keep_text(run_id: int, name: str, text: str) -> tuple[str, dict]:
    """A whole output recorded at once (one that did not stream: a fan-out's results): what
    the database keeps of it, and the row's `output_file` / `output_bytes`."""
    capture = Capture(run_id, name)
    kept = capture.keep(text)
    return kept, capture.fields()
