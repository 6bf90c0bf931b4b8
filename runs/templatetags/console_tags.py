"""Presentation helpers for the console's templates: Markdown, durations, badges.

Agent output is untrusted. Markdown is rendered with raw HTML switched off, then the
result goes through nh3 (an allow-list sanitiser), so a `<script>` or an `onerror=`
attribute in an agent's answer can never become markup on the page.
"""

from datetime import timedelta

import nh3
from django import template
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince, timeuntil
from markdown_it import MarkdownIt

register = template.Library()

# Images in agent output would make the browser fetch URLs the agent chose; leave them out.
ALLOWED_TAGS = nh3.ALLOWED_TAGS - {"img"}
# `breaks`: agents write line by line; a single newline should stay a line break.
_markdown = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table")
# Rendering cost grows with the text; a page never needs more than this of one output.
MARKDOWN_LIMIT = 200_000


def render_markdown(text: str) -> str:
    html = _markdown.render((text or "")[:MARKDOWN_LIMIT])
    return nh3.clean(html, tags=ALLOWED_TAGS, link_rel="noopener noreferrer nofollow")


@register.filter
def markdown(text):
    return mark_safe(render_markdown(text))  # noqa: S308 - sanitised by nh3 just above


@register.filter
def markdown_inline(text):
    """One line of Markdown (code spans, emphasis, links) without paragraphs: for cells."""
    html = _markdown.renderInline((text or "")[:MARKDOWN_LIMIT])
    cleaned = nh3.clean(html, tags=ALLOWED_TAGS, link_rel="noopener noreferrer nofollow")
    return mark_safe(cleaned)  # noqa: S308 - sanitised by nh3 just above


@register.filter(name="size_words")
def size_words_filter(value):
    """A size in bytes as people read it: 31457280 -> "30 MB"."""
    from runs.outputs import size_words

    return size_words(int(value or 0))


@register.simple_tag
def output_cap():
    """How much of an output a run keeps (LOOP_MAX_OUTPUT_BYTES), as people read it."""
    from runs.outputs import max_bytes, size_words

    return size_words(max_bytes())


@register.filter
def duration(value):
    """A short human duration from milliseconds (int) or a timedelta: 850 ms, 4.2 s, 3 min 5 s."""
    if value is None or value == "":
        return ""
    ms = value.total_seconds() * 1000 if isinstance(value, timedelta) else float(value)
    if ms < 1000:
        return f"{int(ms)} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


# Django's timesince says "0 minutes" for anything under one: these say it in words.
UNDER_A_MINUTE = timedelta(minutes=1)


@register.filter
def since(value):
    """How long since `value`, as `timesince` says it, or "under a minute"."""
    if not value:
        return ""
    if timezone.now() - value < UNDER_A_MINUTE:
        return "under a minute"
    return timesince(value)


@register.filter
def until(value):
    """How long until `value`, as `timeuntil` says it, or "under a minute"."""
    if not value:
        return ""
    if value - timezone.now() < UNDER_A_MINUTE:
        return "under a minute"
    return timeuntil(value)


@register.filter
def ago(value):
    """When `value` was: "just now", else "3 minutes ago"."""
    if not value:
        return ""
    wording = since(value)
    return "just now" if wording == "under a minute" else f"{wording} ago"


@register.inclusion_tag("console/_badge.html")
def badge(status):
    from runs.models import Run

    return {"status": status, "meaning": Run.meaning_of(status)}


@register.filter
def after_first_line(text):
    """A gate message without its status line (shown on its own above it)."""
    parts = (text or "").split("\n", 1)
    return parts[1].strip("\n") if len(parts) > 1 else ""


@register.filter
def describe_event(event):
    """The event as a sentence (runs.event_text)."""
    from runs.event_text import describe

    return describe(event)


@register.filter
def channel_words(channels):
    """How an iteration ended, in words: "the agent said it was done"."""
    from runs.event_text import CHANNEL_WORDS

    return "; ".join(CHANNEL_WORDS.get(name, name) for name in channels or [])


@register.simple_tag
def status_meaning(status):
    """What a status a run shows means, in words (Run.MEANINGS, or its kind's phases)."""
    from runs.models import Run

    return Run.meaning_of(status)


@register.simple_tag
def labelled_inputs(run):
    """The run's inputs as (label, value), labelled as its start form labels them (a
    declared input's `label`, else its name)."""
    from runs.executor.spec import SpecError, spec_for

    try:
        declared = dict(getattr(spec_for(run), "inputs", None) or {})
    except SpecError:
        declared = {}
    return [
        (getattr(declared.get(name), "label", None) or name, value)
        for name, value in (run.inputs or {}).items()
    ]


@register.simple_tag
def trace_of(run):
    """The run's OpenTelemetry trace id when runs are exported as traces, else None."""
    from runs import telemetry

    return telemetry.trace_of(run)
