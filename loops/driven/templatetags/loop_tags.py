"""How a loop's values (text or any JSON) read on a page."""

from __future__ import annotations

import json

from django import template

register = template.Library()


@register.inclusion_tag("loops/_value.html")
def loop_value(value, open_json: bool = False):
    """Text as Markdown (sanitised, like every agent output); anything else as JSON."""
    return {"value": value, "is_text": isinstance(value, str), "open_json": open_json}


@register.filter
def pipeline_text(pipeline) -> str:
    return " → ".join(str(step) for step in pipeline or [])


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)
