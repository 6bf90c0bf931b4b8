"""What a reviewer is shown at a gate, as one digest: the iteration's answer (or the gate's
message), the run's artifacts, and what the run's kind adds (a step machine: its branch
heads). Recorded when the gate opens; a decision that carries a digest is refused when
the gate shows other content now (`check`), naming what changed.

The artifacts folder is written by agents: it is walked without following a symlink, and
a file that is not a regular one (a FIFO, a device) is named, never opened."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from django.conf import settings

from runs import kinds
from runs.errors import StaleReview
from runs.sandbox import files

# Past this many files the rest of the folder counts as one part (its names only).
MAX_ARTIFACTS = 200
READ_CHUNK = 1 << 20


def _hash(*texts: str) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


def parts_of(run, gate) -> dict[str, str]:
    """Each part of what the gate shows, by the words that name it, with its hash."""
    if gate.iteration_id:
        it = gate.iteration
        structured = json.dumps(it.structured, sort_keys=True) if it.structured else ""
        parts = {"the iteration's answer": _hash(it.output or "", structured)}
    else:
        parts = {"the gate's message": _hash(gate.message)}
    parts.update(artifact_parts(Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "artifacts"))
    parts.update(kinds.of_run(run).review_parts(run, gate))
    return parts


def digest_of(parts: dict[str, str]) -> str:
    return _hash(json.dumps(parts, sort_keys=True))


def record(run, gate) -> None:
    """Keep the digest of what the gate shows as it opens."""
    gate.digest_parts = parts_of(run, gate)
    gate.digest = digest_of(gate.digest_parts)
    type(gate).objects.filter(pk=gate.pk).update(digest=gate.digest, digest_parts=gate.digest_parts)


def current_digest(gate) -> str:
    """The digest of what the gate shows now: what a page or a link hands the reviewer."""
    return digest_of(parts_of(gate.run, gate))


def check(run, gate, given: str) -> None:
    """StaleReview unless `given` is the digest of what the gate shows now. What changed is
    said against the gate's opening (a page loaded later and then outdated says so too)."""
    now = parts_of(run, gate)
    if digest_of(now) == given:
        return
    opened = gate.digest_parts or {}
    changed = [name for name in sorted(set(now) | set(opened)) if now.get(name) != opened.get(name)]
    raise StaleReview(changed)


def artifact_parts(folder: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    if not folder.is_dir() or folder.is_symlink():
        return found
    names = sorted(_regular_files(folder))
    for name in names[:MAX_ARTIFACTS]:
        found[f"the artifact {name}"] = _file_hash(folder, name)
    if len(names) > MAX_ARTIFACTS:
        found["the other artifacts"] = _hash(*names[MAX_ARTIFACTS:])
    return found


def _regular_files(folder: Path):
    """Relative names under `folder`: never down a symlink; a non-regular entry is
    yielded with a marker so that its appearing still changes the digest."""
    for top, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
        for name in names:
            yield os.path.relpath(os.path.join(top, name), folder)


def _file_hash(folder: Path, name: str) -> str:
    try:
        fd = files.open_file(folder, name)  # no symlink followed, no FIFO opened
    except OSError as exc:
        return _hash("not a regular file", files.describe(exc))
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as opened:
        while chunk := opened.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
