"""Convergence of each loop of a run: per iteration, a chosen number (the loop's score, any
numeric field of the structured output, the duration, the tokens or the cost), drawn as a
server-side SVG (no script needed to read it) and given as JSON by the API. A line needs two
iterations: a node called once (a pipeline's one-shot agent) has its one call's figures said
in words instead (`Series.one_iteration`). A scored loop charts its score by default, with
its stop rules (`NodeRun.state["stop"]`) drawn over it: the target line, the plateau window.

Built on Iteration rows only, so every loop kind has a chart: a loop's, not a prompt step's
one call (NodeRun.SINGLE_CALLS). One query for a whole run (1,000 iterations cost one
query), and one more for a run with a loop_group (what the calls in each group iteration's
body spent, which is that iteration's usage); one for the inbox's sparklines.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import F, Sum, Window
from django.db.models.functions import RowNumber

from runs.engine.stop_rules import rules_from, shown
from runs.models import Iteration, NodeRun

# The loop's own score (`Iteration.score`), a series of its own beside the output's fields.
SCORE = "score"
BUILTIN = {"duration": "duration (s)", "tokens": "tokens", "cost": "cost (USD)"}
FIELD_PREFIX = "field:"
SPARK_POINTS = 30
# The plot alone: its labels are the page's text beside it (runs/_chart.html), readable at
# any width, and it stretches to its card's width at a fixed height (static/css/console.css).
WIDTH, HEIGHT, PAD_LEFT, PAD_RIGHT, PAD_Y = 600, 160, 8, 8, 10
SPARK_W, SPARK_H = 120, 26


@dataclass
class Point:
    number: int
    status: str
    values: dict
    carried: bool
    iteration_id: int
    x: float = 0
    y: float | None = None

    @property
    def value(self):
        return self.values.get("_chosen")

    @property
    def duration_ms(self):
        seconds = self.values.get("duration")
        return None if seconds is None else seconds * 1000


@dataclass
class RuleMarks:
    """A scored loop's stop rules as the plot draws them, in its user units; the labels are
    page text over the plot (the target's placed by percent, `target_top`)."""

    target_label: str = ""
    target_y: float | None = None
    target_top: float = 0
    plateau_label: str = ""
    plateau_x: float | None = None
    plateau_width: float = 0
    plateau_first: int = 0
    plateau_last: int = 0


@dataclass
class Series:
    node_id: str
    node_run_id: int
    points: list[Point] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)
    metric: str = "duration"
    low: float = 0
    high: float = 0
    path: str = ""
    stop: dict | None = None  # the node's stop rules, stored form (runs.engine.stop_rules)
    marks: RuleMarks | None = None  # what of them the plot draws (`_mark_rules`)

    @property
    def scored(self) -> bool:
        """Some iteration has a score of the loop's own (a recipe's `score:`)."""
        return any(SCORE in p.values for p in self.points)

    @property
    def metric_is_a_field(self) -> bool:
        """The chosen metric is the score or one of the iteration's own fields, not
        duration, tokens or cost (which the figures table shows in columns of their own)."""
        return self.metric not in BUILTIN

    @property
    def metric_label(self) -> str:
        if self.metric == SCORE:
            return SCORE
        return BUILTIN.get(self.metric) or self.field_label(self.metric.removeprefix(FIELD_PREFIX))

    def field_label(self, name: str) -> str:
        # A scored loop's output may have a field called score too: two "score"s would
        # read as one.
        return f"{name} (output field)" if name == SCORE and self.scored else name

    @property
    def options(self) -> list[tuple[str, str]]:
        own = [(SCORE, SCORE)] if self.scored else []
        fields = [(FIELD_PREFIX + name, self.field_label(name)) for name in self.fields]
        return own + fields + list(BUILTIN.items())

    @property
    def first_number(self) -> int:
        return self.points[0].number if self.points else 0

    @property
    def last_number(self) -> int:
        return self.points[-1].number if self.points else 0

    @property
    def one_iteration(self) -> bool:
        """One iteration so far: no line to draw; the page says its figures in words."""
        return len(self.points) == 1

    @property
    def drawn(self) -> list[Point]:
        return [p for p in self.points if p.y is not None]

    @property
    def last(self):
        drawn = self.drawn
        return drawn[-1].value if drawn else None


def _numeric(value) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _values(row: dict) -> dict:
    tokens = None
    if row["tokens_in"] is not None or row["tokens_out"] is not None:
        tokens = (row["tokens_in"] or 0) + (row["tokens_out"] or 0)
    values = {
        "duration": round(row["duration_ms"] / 1000, 3) if row["duration_ms"] is not None else None,
        "tokens": tokens,
        "cost": float(row["cost_usd"]) if row["cost_usd"] is not None else None,
    }
    if row["score"] is not None:
        values[SCORE] = row["score"]
    structured = row["structured"]
    if isinstance(structured, dict):
        for key, value in structured.items():
            if _numeric(value):
                values[FIELD_PREFIX + str(key)] = float(value)
    return values


# The node's stop rules alone: its state also keeps what a step needs to resume (heavy).
STOP = "node_run__state__stop"
COLUMNS = (
    "id",
    "node_run_id",
    "node_id",
    "generation",
    "number",
    "status",
    "duration_ms",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "structured",
    "score",
    "carried_from_id",
    "node_run__kind",
    STOP,
)


def _group(rows) -> list[Series]:
    """Series per loop node, its newest attempt only (rows come ordered by id)."""
    newest: dict[str, int] = {}
    for row in rows:
        newest[row["node_id"]] = max(newest.get(row["node_id"], 0), row["generation"])
    by_node: dict[str, Series] = {}
    for row in rows:
        if row["generation"] != newest[row["node_id"]]:
            continue
        series = by_node.get(row["node_id"])
        if series is None:
            series = by_node[row["node_id"]] = Series(
                row["node_id"], row["node_run_id"], stop=_stored_rules(row[STOP])
            )
        if row["status"] in (Iteration.Status.PENDING, Iteration.Status.RUNNING):
            continue  # no figures yet
        values = _values(row)
        series.points.append(
            Point(row["number"], row["status"], values, bool(row["carried_from_id"]), row["id"])
        )
        for key in values:
            if key.startswith(FIELD_PREFIX) and key[len(FIELD_PREFIX) :] not in series.fields:
                series.fields.append(key[len(FIELD_PREFIX) :])
    for series in by_node.values():
        series.points.sort(key=lambda p: p.number)
    return list(by_node.values())


def _stored_rules(raw) -> dict | None:
    """The stop rules as stored, if they read as rules (a chart never fails on a state)."""
    if not isinstance(raw, dict) or not raw:
        return None
    try:
        rules_from(raw)
    except (TypeError, ValueError, AttributeError):
        return None
    return raw


def default_metric(series: Series) -> str:
    if series.scored:
        return SCORE
    if "score" in series.fields:
        return FIELD_PREFIX + "score"
    return FIELD_PREFIX + series.fields[0] if series.fields else "duration"


def _choose(series: Series, metric: str | None) -> None:
    known = {key for key, _ in series.options}
    series.metric = metric if metric in known else default_metric(series)
    for point in series.points:
        point.values["_chosen"] = point.values.get(series.metric)


def _layout(series: Series, width, height, pad_left, pad_right, pad_y, reach=()) -> None:
    """Each point's place in the plot; the scale also spans `reach` (a target line)."""
    drawn = [p for p in series.points if p.value is not None]
    if not drawn:
        return
    values = [p.value for p in drawn] + list(reach)
    low, high = min(0.0, min(values)), max(values)
    if high == low:
        high = low + 1
    series.low, series.high = low, high
    first, last = series.points[0].number, series.points[-1].number
    span = max(1, last - first)
    inner_w, inner_h = width - pad_left - pad_right, height - 2 * pad_y
    for p in series.points:
        p.x = round(pad_left + inner_w * (p.number - first) / span, 1)
        p.y = None
        if p.value is not None:
            p.y = round(pad_y + inner_h * (1 - (p.value - low) / (high - low)), 1)
    if len(drawn) > 1:  # one point is no line: nothing is drawn
        series.path = " ".join(f"{p.x},{p.y}" for p in drawn)


BOX = {"width": WIDTH, "height": HEIGHT, "bottom": HEIGHT - 1}


def run_chart(run, *, metrics: dict | None = None, node: str | None = None) -> list[Series]:
    """Every loop of the run (or `node`), each charting metrics[node] (or its default)."""
    rows = Iteration.objects.filter(run=run).exclude(node_run__kind__in=NodeRun.SINGLE_CALLS)
    if node:
        rows = rows.filter(node_id=node)
    found = _group(_with_body_usage(run, list(rows.order_by("id").values(*COLUMNS))))
    for series in found:
        _choose(series, (metrics or {}).get(series.node_id))
        rules = rules_from(series.stop) if series.metric == SCORE else None
        reach = [rules.target.at] if rules and rules.target else []
        _layout(series, WIDTH, HEIGHT, PAD_LEFT, PAD_RIGHT, PAD_Y, reach)
        if rules and series.path:
            series.marks = _mark_rules(series, rules)
    return found


def _mark_rules(series: Series, rules) -> RuleMarks:
    """The target line (its height in the plot) and the plateau window (the last
    `plateau.iterations` scored iterations, from halfway after the one before them to the
    plot's right edge)."""
    marks = RuleMarks()
    if rules.target:
        at = rules.target.at
        y = PAD_Y + (HEIGHT - 2 * PAD_Y) * (1 - (at - series.low) / (series.high - series.low))
        marks.target_y = round(y, 1)
        marks.target_top = round(100 * y / HEIGHT, 1)
        marks.target_label = f"target {shown(at)}"
    if rules.plateau:
        drawn = series.drawn
        window = drawn[-max(1, rules.plateau.iterations) :]
        before = drawn[-len(window) - 1] if len(drawn) > len(window) else None
        left = (before.x + window[0].x) / 2 if before else 0
        marks.plateau_x, marks.plateau_width = round(left, 1), round(WIDTH - left, 1)
        marks.plateau_first, marks.plateau_last = window[0].number, window[-1].number
        marks.plateau_label = "plateau window"
    return marks


def _with_body_usage(run, rows: list[dict]) -> list[dict]:
    """A loop_group iteration's tokens and cost are its body's calls' (each a prompt step's
    iteration, on rows `group.step` of that group iteration): summed onto it here."""
    if not any(row["node_run__kind"] == NodeRun.Kind.LOOP_GROUP for row in rows):
        return rows
    calls = (
        Iteration.objects.filter(
            run=run, node_run__kind__in=NodeRun.SINGLE_CALLS, node_run__iteration__gt=0
        )
        .values("node_id", "node_run__generation", "node_run__iteration")
        .annotate(tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost=Sum("cost_usd"))
        .order_by()
    )
    body: dict[tuple, dict] = {}
    for call in calls:
        key = (call["node_id"].split(".", 1)[0], call["node_run__generation"])
        spent = body.setdefault((*key, call["node_run__iteration"]), {})
        for name in ("tokens_in", "tokens_out"):
            if call[name] is not None:
                spent[name] = spent.get(name, 0) + call[name]
        if call["cost"] is not None:
            spent["cost_usd"] = spent.get("cost_usd", 0) + call["cost"]
    for row in rows:
        spent = body.get((row["node_id"], row["generation"], row["number"]))
        if spent:
            row.update(spent)
    return rows


# Where a score came from (`Iteration.score_detail["source"]`), as an iteration's row says it.
SOURCE_WORDS = {
    "field": "from the output",
    "bash": "from a command",
    "judge": "by a judge",
    "python": "by the script",
    "output": "given in the answer",
    "handoff": "given in the handoff",
}


def show_scores(iterations):
    """Each iteration as its row and the compare view show its score: `score_shown` (as
    pages say a score, None when it has none), `score_source` (where it came from, in
    words), `score_reason` (a judge's reason, if any) and `score_missing` (why a scored
    loop's iteration has no score: its command failed, the judge gave no number)."""
    for it in iterations:
        if it is None:
            continue
        detail = it.score_detail if isinstance(it.score_detail, dict) else {}
        source = str(detail.get("source") or "")
        it.score_shown = None if it.score is None else shown(it.score)
        it.score_source = SOURCE_WORDS.get(source, source)
        it.score_reason = str(detail.get("reason") or "")
        it.score_missing = str(detail.get("error") or "") if it.score is None else ""
    return iterations


def metrics_from(query) -> dict:
    """The metric chosen per loop, from a page's query string (`metric-<node>=...`)."""
    return {k.removeprefix("metric-"): v for k, v in query.items() if k.startswith("metric-")}


def as_dict(series: Series) -> dict:
    return {
        "node": series.node_id,
        "metric": series.metric,
        "metrics": [key for key, _ in series.options],
        "stop_rules": series.stop,
        "points": [
            {
                "iteration": p.number,
                "status": p.status,
                "carried_over": p.carried,
                "value": p.value,
                "duration_s": p.values.get("duration"),
                "tokens": p.values.get("tokens"),
                "cost_usd": p.values.get("cost"),
                "score": p.values.get(SCORE),
                "fields": {
                    k.removeprefix(FIELD_PREFIX): v
                    for k, v in p.values.items()
                    if k.startswith(FIELD_PREFIX)
                },
            }
            for p in series.points
        ],
    }


def sparklines(loop_rows) -> dict[int, Series]:
    """The last SPARK_POINTS iterations of each of these loop rows (one query)."""
    rows = {row.pk: row for row in loop_rows}
    if not rows:
        return {}
    found = (
        Iteration.objects.filter(node_run_id__in=list(rows))
        .annotate(
            recent=Window(RowNumber(), partition_by=[F("node_run_id")], order_by=F("id").desc())
        )
        .filter(recent__lte=SPARK_POINTS)
        .order_by("id")
        .values(*COLUMNS)
    )
    per_row = defaultdict(list)
    for row in found:
        if row["generation"] == rows[row["node_run_id"]].generation:
            per_row[row["node_run_id"]].append(row)
    lines = {}
    for pk, its in per_row.items():
        (series,) = _group(its) or [None]
        if series is None or not series.points:
            continue
        _choose(series, None)
        _layout(series, SPARK_W, SPARK_H, 2, 2, 3)
        if series.path:
            lines[pk] = series
    return lines
