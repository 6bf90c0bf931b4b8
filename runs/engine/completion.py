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

# Plain words, no emoji: a gate is read by people, on machines that may lack emoji fonts.
STATUS_NOT_MET = "The agent did not say it was done in this iteration"

# Opening and closing tags are found separately and paired by a forward scan: one regex
# spanning "open .*? close" rescans the rest of the output from every unclosed opening tag,
# which is quadratic in hostile output (thousands of "<promise>" with no closing tag).
_OPEN_TAG_RE = re.compile(r"<\s*promise\s*>", re.IGNORECASE)
_CLOSE_TAG_RE = re.compile(r"<\s*/\s*promise\s*>", re.IGNORECASE)
# Characters tolerated after a plain signal at the very end of the output.
_TRAILING_CHARS = " \t\n\r\f\v.,;:!?)]}'\"*_`~"
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


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
    if _signal_at_end(output, signal):
        return True
    return any(_line_is_signal(line, signal) for line in output.split("\n"))


def _signal_at_end(output: str, signal: str) -> bool:
    """The signal followed only by tolerated trailing characters, not glued to a word."""
    first_end = len(output.rstrip(_TRAILING_CHARS))

    def starts_word(start: int) -> bool:
        return (
            start >= 0
            and output.startswith(signal, start)
            and (start == 0 or output[start - 1] not in _WORD_CHARS)
        )

    # The signal ends where the trailing run starts, or inside the run when the signal
    # itself ends with tolerated characters (``DONE!``): a bounded number of places.
    last_end = min(len(output), first_end + len(signal))
    if any(starts_word(end - len(signal)) for end in range(first_end, last_end + 1)):
        return True
    if signal.strip(_TRAILING_CHARS):
        return False
    # A signal made only of tolerated characters may sit anywhere in the trailing run.
    found = output.find(signal, first_end + 1)
    return found >= 0 and starts_word(found)


def _line_is_signal(line: str, signal: str) -> bool:
    if line.endswith("\r"):
        line = line[:-1]
    return line.strip(" \t") == signal


def _tag_spans(output: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each ``<promise>…</promise>``: an opening tag paired with the
    first closing tag after it, scanning forward only (linear time)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        opening = _OPEN_TAG_RE.search(output, pos)
        if opening is None:
            break
        closing = _CLOSE_TAG_RE.search(output, opening.end())
        if closing is None:
            # No closing tag after this opening one means none after any later one either.
            break
        spans.append((opening.start(), closing.end()))
        pos = closing.end()
    return spans


def strip_signal_tags(output: str) -> str:
    """Remove every ``<promise>…</promise>`` and tidy what is left behind."""
    spans = _tag_spans(output)
    if not spans:
        return output.rstrip()
    # A line that held a tag loses its trailing blanks, and disappears if nothing is left.
    lines: list[str] = []
    current: list[str] = []
    tagged = False

    def finish_line() -> None:
        line = "".join(current)
        if tagged:
            line = line.rstrip()
            if not line.strip():
                return
        lines.append(line)

    pos = 0
    for start, end in [*spans, (len(output), len(output))]:
        first, *rest = output[pos:start].split("\n")
        current.append(first)
        for part in rest:
            finish_line()
            current, tagged = [part], False
        tagged = tagged or start < end
        pos = end
    finish_line()
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


def _channel_words(name: str, signal: str, field: str) -> str:
    if name == "until":
        return f"The agent said {signal}" if signal else "The agent said it was done"
    if name == "until_field":
        return (
            f"The agent's answer set {field} to true" if field else "The agent's answer said done"
        )
    if name == "until_bash":
        return "The check command passed"
    return f"{name} fired"


def status_line(fired: list[str], declared: list[str], *, signal: str = "", field: str = "") -> str:
    """One-line iteration outcome leading every gate message, in plain words."""
    fired = _ordered(fired)
    if fired:
        words = [_channel_words(name, signal, field) for name in fired]
        rest = [w[0].lower() + w[1:] for w in words[1:]]
        return " and ".join([words[0], *rest]) + "."
    expected = [_channel_words(name, signal, field) for name in _ordered(declared)]
    if not expected:
        return STATUS_NOT_MET + "."
    hint = " or ".join(w[0].lower() + w[1:] for w in expected)
    return f"{STATUS_NOT_MET} (it would end when {hint})."


def excerpt(output: str, chars: int = 2000) -> str:
    """The bounded tail of an iteration's output a gate shows (and the MCP server reports);
    ``(no output)`` for an empty one."""
    body = output.rstrip()
    if not body.strip():
        return "(no output)"
    if len(body) > chars:
        return "…" + body[-chars:] if chars > 0 else "…"
    return body


def gate_text(
    *,
    fired: list[str],
    declared: list[str],
    output: str,
    gate_message: str,
    excerpt_chars: int = 2000,
    signal: str = "",
    field: str = "",
) -> str:
    """Status line, a bounded tail excerpt of the output, then the gate message.

    An empty output is shown as ``(no output)``; an empty gate message is omitted.
    """
    parts = [
        status_line(fired, declared, signal=signal, field=field),
        excerpt(output, excerpt_chars),
    ]
    if gate_message:
        parts.append(gate_message)
    return "\n\n".join(parts)


def should_check_until_bash(fired_so_far: list[str]) -> bool:
    """``until_bash`` runs only when no other channel already ended the iteration."""
    return not fired_so_far
