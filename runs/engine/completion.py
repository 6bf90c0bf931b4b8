"""Loop completion channels: prose signal, structured field, gate status text.

Channels are OR'd; the cheap ones (``until``, ``until_field``) are evaluated
first and ``until_bash`` only runs when neither fired.
"""

from __future__ import annotations

import re

__all__ = [
    "CHANNELS",
    "detect_signal",
    "gate_text",
    "should_check_until_bash",
    "status_line",
    "strip_signal_tags",
    "until_field_met",
]

CHANNELS = ("until", "until_field", "until_bash")

STATUS_MET_ONE = "✅ Completion condition met via "
STATUS_MET_MANY = "✅ Completion conditions met via "
STATUS_NOT_MET = "⚠️ No completion condition met in this iteration"

_TAG_RE = re.compile(r"<\s*promise\s*>.*?<\s*/\s*promise\s*>", re.IGNORECASE | re.DOTALL)
# Characters tolerated after a plain signal at the very end of the output.
_TRAILING = r"[\s.,;:!?)\]}'\"*_`~]*"
_WORD = r"A-Za-z0-9_"


def detect_signal(output: str, signal: str) -> bool:
    """True when ``output`` carries the completion ``signal``.

    * Tag form ``<promise>SIGNAL</promise>``: case-insensitive (tag and
      signal), whitespace around the signal and inside the tag tolerated.
    * Plain fallback, exact case: the signal at the very end of the output
      (trailing whitespace/punctuation tolerated) or alone on its own line.
      A mention inside a sentence does not count.
    """
    signal = (signal or "").strip()
    if not signal or not output:
        return False
    sig = re.escape(signal)
    tag = re.compile(rf"<\s*promise\s*>\s*{sig}\s*<\s*/\s*promise\s*>", re.IGNORECASE)
    if tag.search(output):
        return True
    at_end = re.compile(rf"(?<![{_WORD}]){sig}{_TRAILING}\Z")
    if at_end.search(output):
        return True
    own_line = re.compile(rf"^[ \t]*{sig}[ \t]*\r?$", re.MULTILINE)
    return own_line.search(output) is not None


def strip_signal_tags(output: str) -> str:
    """Remove every ``<promise>…</promise>`` and tidy what is left behind."""
    if not _TAG_RE.search(output):
        return output.rstrip()
    marker = "\ue000"
    while marker in output:
        marker += "\ue001"
    marked = _TAG_RE.sub(marker, output)
    lines: list[str] = []
    for line in marked.split("\n"):
        if marker in line:
            line = line.replace(marker, "").rstrip()
            if not line.strip():
                continue
        lines.append(line)
    text = "\n".join(lines)
    text = re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text)
    text = re.sub(r"\A(?:[ \t]*\n)+", "", text)
    return text.rstrip()


def until_field_met(payload: object, field: str) -> bool:
    """Strict identity: only a JSON ``true`` ends the loop (not "true", not 1)."""
    return isinstance(payload, dict) and payload.get(field) is True


def _ordered(channels: list[str]) -> list[str]:
    seen: list[str] = []
    for name in channels:
        if name not in seen:
            seen.append(name)
    rank = {name: i for i, name in enumerate(CHANNELS)}
    return sorted(seen, key=lambda n: (rank.get(n, len(CHANNELS)), seen.index(n)))


def status_line(fired: list[str], declared: list[str]) -> str:
    """One-line iteration outcome leading every gate message."""
    fired = _ordered(fired)
    if len(fired) == 1:
        return STATUS_MET_ONE + fired[0]
    if fired:
        return STATUS_MET_MANY + ", ".join(fired)
    names = ", ".join(_ordered(declared)) or "none"
    return f"{STATUS_NOT_MET} (declared: {names})"


def gate_text(
    *,
    fired: list[str],
    declared: list[str],
    output: str,
    gate_message: str,
    excerpt_chars: int = 2000,
) -> str:
    """Status line, a bounded tail excerpt of the output, then the gate message.

    An empty output is shown as ``(no output)``; an empty gate message is omitted.
    """
    body = output.rstrip()
    if not body.strip():
        excerpt = "(no output)"
    elif len(body) > excerpt_chars:
        excerpt = "…" + body[-excerpt_chars:] if excerpt_chars > 0 else "…"
    else:
        excerpt = body
    parts = [status_line(fired, declared), excerpt]
    if gate_message:
        parts.append(gate_message)
    return "\n\n".join(parts)


def should_check_until_bash(fired_so_far: list[str]) -> bool:
    """``until_bash`` runs only when no other channel already ended the iteration."""
    return not fired_so_far
