"""Compare any two iterations, of one run or of two runs of one recipe: their output, the
prompt as sent and the structured payload, as unified and side-by-side diffs (recipes.diff,
the same code that compares recipe versions), and a scored loop's two scores. Read-only; a
fixed number of queries."""

from __future__ import annotations

import json
from dataclasses import dataclass

from recipes.diff import side_by_side, stats, unified
from runs.chart import show_scores
from runs.engine.stop_rules import shown
from runs.errors import Conflict, NotFound
from runs.models import Iteration, Run

INPUT_LIMIT = 200_000
PICKER_ITERATIONS = 300
PICKER_RUNS = 50
FIELDS = (("output", "Output"), ("prompt", "Prompt as sent"), ("structured", "Structured output"))


@dataclass
class FieldDiff:
    name: str
    label: str
    unified: list
    split: list
    stats: dict
    cut: bool
    empty: bool = False  # neither iteration has any (no structured output, say)

    @property
    def same(self) -> bool:
        return not self.unified


def structured_text(value) -> str:
    if value is None:
        return ""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _text(it: Iteration, name: str) -> str:
    return structured_text(it.structured) if name == "structured" else getattr(it, name) or ""


def label(it: Iteration) -> str:
    return f"run {it.run_id} · {it.node_id} #{it.number}"


def iteration(pk) -> Iteration:
    try:
        pk = int(pk)
    except (TypeError, ValueError):
        raise NotFound(f"No iteration {pk!r}.") from None
    found = (
        Iteration.objects.select_related("run__recipe").defer("raw_output").filter(pk=pk).first()
    )
    if found is None:
        raise NotFound(f"No iteration {pk}.")
    return found


def compare(a: Iteration, b: Iteration) -> list[FieldDiff]:
    if a.run.recipe_id != b.run.recipe_id:
        raise Conflict(
            "These iterations belong to runs of different recipes "
            f"({a.run.recipe.slug} and {b.run.recipe.slug}): compare iterations of one recipe."
        )
    diffs = []
    for name, title in FIELDS:
        old, new = _text(a, name), _text(b, name)
        cut = len(old) > INPUT_LIMIT or len(new) > INPUT_LIMIT
        old, new = old[:INPUT_LIMIT], new[:INPUT_LIMIT]
        rows = unified(old, new, label(a), label(b))
        diffs.append(
            FieldDiff(
                name, title, rows, side_by_side(old, new), stats(rows), cut, empty=not (old or new)
            )
        )
    return diffs


def score_words(a: Iteration, b: Iteration | None) -> dict:
    """What the compare view says of the two scores (each as `show_scores` gives it):
    whether either iteration has one, and the change from a to b when both do."""
    show_scores([a, b])
    both = b is not None and a.score is not None and b.score is not None
    change = None
    if both:
        gain = b.score - a.score
        change = ("+" if gain > 0 else "") + shown(gain)
    scored = a.score is not None or (b is not None and b.score is not None)
    return {"scored": scored, "score_change": change}


def _side(it: Iteration) -> dict:
    return {
        "id": it.pk,
        "run": it.run_id,
        "node": it.node_id,
        "number": it.number,
        "score": it.score,
        "score_detail": it.score_detail,
    }


def default_partner(it: Iteration) -> Iteration | None:
    """What an iteration is compared with when only it is named: the one before it of the
    same node (else the next one)."""
    same_node = Iteration.objects.filter(node_run_id=it.node_run_id, generation=it.generation)
    return (
        same_node.filter(number__lt=it.number).order_by("-number").first()
        or same_node.filter(number__gt=it.number).order_by("number").first()
    )


def choices(run: Run) -> list[Iteration]:
    """The iterations a picker offers for one run (newest last, bounded)."""
    rows = (
        Iteration.objects.filter(run=run)
        .only("pk", "run_id", "node_id", "number", "generation", "status")
        .order_by("-id")[:PICKER_ITERATIONS]
    )
    return list(reversed(rows))


def sibling_runs(run: Run) -> list[Run]:
    return list(
        Run.objects.filter(recipe_id=run.recipe_id)
        .only("pk", "status")
        .order_by("-id")[:PICKER_RUNS]
    )


def as_dict(a: Iteration, b: Iteration, diffs: list[FieldDiff]) -> dict:
    return {
        "a": _side(a),
        "b": _side(b),
        "fields": {
            d.name: {
                "same": d.same,
                "added": d.stats["added"],
                "removed": d.stats["removed"],
                "truncated": d.cut,
                "unified": "\n".join(
                    row.text
                    if row.kind in ("header", "hunk")
                    else {"add": "+", "remove": "-", "same": " "}[row.kind] + row.text
                    for row in d.unified
                ),
            }
            for d in diffs
        },
    }
