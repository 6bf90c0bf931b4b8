"""``kind: workflow`` recipes: a DAG of nodes, some of which iterate (loop nodes).

The pydantic models below are what the engine reads.  Structural and cross-field
rules live in :mod:`recipes.formats.workflow_rules`; this module runs those rules,
then type-checks the cleaned document with pydantic and maps every pydantic error
back to a field path and source line.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from recipes.loader import (
    MAX_SOURCE_BYTES,
    LineMap,
    LoadResult,
    Problem,
    child_path,
    short_repr,
    sort_problems,
)

__all__ = [
    "ApprovalSpec",
    "DecisionSpec",
    "InputOption",
    "InputSpec",
    "LoopGroupSpec",
    "LoopSpec",
    "NodeSpec",
    "ProviderSpec",
    "RetrySpec",
    "WorkflowSpec",
    "CommandError",
    "find_cycles",
    "parse_workflow",
    "resolve_command",
    "validation_problems",
]

NodeKind = Literal["bash", "prompt", "command", "loop", "loop_group", "approval", "cancel"]
TriggerRule = Literal["all_success", "one_success", "none_failed_min_one_success", "all_done"]
InputType = Literal["text", "textarea", "boolean", "select", "number", "branch", "task"]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


Text = Annotated[str, AfterValidator(_not_blank)]
PositiveInt = Annotated[int, Field(gt=0)]


class _Spec(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", protected_namespaces=())


class ProviderSpec(_Spec):
    kind: Text
    command: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _collect_options(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = {k: v for k, v in data.items() if k in cls.model_fields}
        extra = {k: v for k, v in data.items() if k not in cls.model_fields}
        if extra:
            options = known.get("options")
            if options is None or isinstance(options, dict):
                known["options"] = {**(options or {}), **extra}
        return known


class InputOption(_Spec):
    value: str
    label: str

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"value": data, "label": data}
        if isinstance(data, dict) and "label" not in data and isinstance(data.get("value"), str):
            return {**data, "label": data["value"]}
        return data


_DEFAULT_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,),
    "number": (int, float),
}


class InputSpec(_Spec):
    type: InputType = "text"
    label: str | None = None
    description: str | None = None
    required: bool = False
    options: list[InputOption] = Field(default_factory=list, validate_default=True)
    default: str | bool | int | float | None = None

    @field_validator("options")
    @classmethod
    def _select_needs_options(cls, value: list[InputOption], info: ValidationInfo) -> Any:
        if info.data.get("type") == "select" and not value:
            raise ValueError("a select input needs a non-empty list of options")
        return value

    @field_validator("default", mode="before")
    @classmethod
    def _default_matches_type(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return value
        kind = info.data.get("type", "text")
        if kind == "boolean":
            ok = isinstance(value, bool)
            expected = "true or false"
        elif kind == "number":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            expected = "a number"
        else:
            ok = isinstance(value, str)
            expected = "a string"
        if not ok:
            raise ValueError(
                f"default of a {kind} input must be {expected}, not {short_repr(value)}"
            )
        options = info.data.get("options")
        if kind == "select" and options and value not in {o.value for o in options}:
            allowed = ", ".join(repr(o.value) for o in options)
            raise ValueError(f"default {short_repr(value)} is not one of the options ({allowed})")
        return value


class RetrySpec(_Spec):
    max_attempts: int = Field(ge=1, le=10)
    delay_ms: int = Field(default=1000, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"max_attempts": data}
        return data


class DecisionSpec(_Spec):
    id: Text
    label: Text

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"id": data, "label": data}
        if isinstance(data, dict) and "label" not in data and isinstance(data.get("id"), str):
            return {**data, "label": data["id"]}
        return data


class ApprovalSpec(_Spec):
    message: Text
    decisions: list[DecisionSpec] = Field(default_factory=list)
    capture_response: bool = False

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"message": data}
        return data


class LoopSpec(_Spec):
    prompt: str
    command: Text | None = None
    until: Text | None = None
    until_bash: Text | None = None
    until_field: Text | None = None
    max_iterations: PositiveInt
    fresh_context: bool = False
    interactive: bool = False
    gate_message: Text | None = None
    signal_completes: bool = False


class LoopGroupSpec(_Spec):
    until: Text | None = None
    until_bash: Text | None = None
    max_iterations: PositiveInt
    fresh_context: bool = False
    interactive: bool = False
    gate_message: Text | None = None
    signal_completes: bool = False
    nodes: list[NodeSpec] = Field(min_length=1)

    def layers(self) -> list[list[str]]:
        return _layers(self.nodes)


class NodeSpec(_Spec):
    id: Text
    kind: NodeKind
    depends_on: list[str] = Field(default_factory=list)
    when: str | None = None
    trigger_rule: TriggerRule = "all_success"
    provider: Text | None = None
    model: Text | None = None
    output_format: dict[str, Any] | None = None
    idle_timeout: PositiveInt | None = None
    timeout: PositiveInt | None = None
    retry: RetrySpec | None = None
    always_run: bool = False
    bash: Text | None = None
    prompt: Text | None = None
    command: Text | None = None
    loop: LoopSpec | None = None
    loop_group: LoopGroupSpec | None = None
    approval: ApprovalSpec | None = None
    cancel: Text | None = None


class WorkflowSpec(_Spec):
    name: Text
    description: str = ""
    interactive: bool = False
    provider: Text | None = None
    model: Text | None = None
    providers: dict[str, ProviderSpec] = Field(default_factory=dict)
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    nodes: list[NodeSpec] = Field(min_length=1)

    def node(self, node_id: str) -> NodeSpec:
        """Top-level node by id; ``group.child`` reaches into loop_group bodies."""
        nodes = self.nodes
        found: NodeSpec | None = None
        for part in node_id.split("."):
            found = next((n for n in nodes if n.id == part), None)
            if found is None:
                raise KeyError(node_id)
            nodes = found.loop_group.nodes if found.loop_group is not None else []
        if found is None:
            raise KeyError(node_id)
        return found

    def layers(self) -> list[list[str]]:
        return _layers(self.nodes)


LoopGroupSpec.model_rebuild()


def _layers(nodes: Sequence[NodeSpec]) -> list[list[str]]:
    """Topological layers; inside a layer nodes keep their declaration order."""
    position = {node.id: i for i, node in enumerate(nodes)}
    indegree = {node.id: 0 for node in nodes}
    dependents: dict[str, list[str]] = {node.id: [] for node in nodes}
    for node in nodes:
        for dep in dict.fromkeys(node.depends_on):
            if dep in position:
                indegree[node.id] += 1
                dependents[dep].append(node.id)
    current = [node.id for node in nodes if indegree[node.id] == 0]
    layers: list[list[str]] = []
    placed = 0
    while current:
        layers.append(current)
        placed += len(current)
        ready: list[tuple[int, str]] = []
        for node_id in current:
            for child in dependents[node_id]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    heapq.heappush(ready, (position[child], child))
        current = [heapq.heappop(ready)[1] for _ in range(len(ready))]
    if placed != len(nodes):
        raise ValueError("the dependency graph has a cycle")
    return layers


def find_cycles(
    graph: dict[str, list[str]], order: Sequence[str], *, limit: int = 10
) -> list[list[str]]:
    """Distinct dependency cycles (at most ``limit``), each as a ring that starts at its
    first-declared node.

    ``graph`` maps a node id to the ids it depends on; every member of a returned ring
    depends on the next one, and the last on the first.  Iterative and bounded, so a
    hostile graph can neither exhaust the stack nor make the search quadratic.
    """
    position = {node_id: i for i, node_id in enumerate(order)}
    finished: set[str] = set()
    on_path: dict[str, int] = {}  # node -> index in ``trail``
    seen: set[frozenset[str]] = set()
    rings: list[list[str]] = []
    budget = limit * 10  # back edges we are willing to turn into rings
    for start in order:
        if start in finished:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        trail = [start]
        on_path[start] = 0
        while stack:
            node, next_index = stack[-1]
            deps = graph.get(node, [])
            if next_index >= len(deps):
                stack.pop()
                trail.pop()
                del on_path[node]
                finished.add(node)
                continue
            stack[-1] = (node, next_index + 1)
            dep = deps[next_index]
            if dep in on_path:
                if budget <= 0:
                    continue
                budget -= 1
                cycle = trail[on_path[dep] :]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    at = cycle.index(min(cycle, key=lambda n: position.get(n, 0)))
                    rings.append(cycle[at:] + cycle[:at])
                    if len(rings) >= limit:
                        return rings
            elif dep not in finished:
                on_path[dep] = len(trail)
                stack.append((dep, 0))
                trail.append(dep)
    return rings


class CommandError(ValueError):
    """A command name that is unsafe, missing, or whose file cannot be used."""


_UNSAFE_COMMAND = re.compile(r"[/\\\x00-\x1f]|\.\.|^\.")


def resolve_command(name: str, commands_dirs: Sequence[Path]) -> str:
    """Body of ``<dir>/<name>.md`` from the first directory that has the file.

    A file that exists but cannot be used fails closed: later directories are not
    consulted.  Raises :class:`CommandError` with a readable reason.
    """
    if len(name) > 200:
        raise CommandError(f"command name {short_repr(name)} is too long")
    if _UNSAFE_COMMAND.search(name):
        raise CommandError(
            f"unsafe command name {short_repr(name)}: names cannot contain '/', '\\' or '..' "
            "and cannot start with '.'"
        )
    if not commands_dirs:
        raise CommandError(
            f"command {short_repr(name)} not found: no commands directories are configured"
        )
    for directory in map(Path, commands_dirs):
        candidate = directory / f"{name}.md"
        try:
            if not candidate.exists():
                continue
            if not candidate.is_file():
                raise CommandError(f"command {short_repr(name)}: {candidate} is not a file")
            if not candidate.resolve().is_relative_to(directory.resolve()):
                raise CommandError(
                    f"command {short_repr(name)}: {candidate} points outside {directory}"
                )
            with candidate.open("rb") as handle:
                data = handle.read(MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            raise CommandError(
                f"command {short_repr(name)}: cannot read {candidate} ({exc.strerror or exc})"
            ) from None
        if len(data) > MAX_SOURCE_BYTES:
            raise CommandError(
                f"command {short_repr(name)}: {candidate} is larger than {MAX_SOURCE_BYTES} bytes"
            )
        try:
            body = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CommandError(
                f"command {short_repr(name)}: {candidate} is not valid UTF-8 text"
            ) from None
        if not body.strip():
            raise CommandError(f"command {short_repr(name)}: {candidate} is empty")
        return body
    searched = ", ".join(str(d) for d in commands_dirs)
    raise CommandError(f"command {short_repr(name)} not found: no {name}.md in {searched}")


# ------------------------------------------------------------------ error mapping

_INT_ERRORS = {"int_type", "int_parsing", "int_from_float"}
_POSITIVE_FIELDS = {"max_iterations", "idle_timeout", "timeout"}


def _loc_to_path(prefix: str, loc: tuple[Any, ...]) -> str:
    path = prefix
    for part in loc:
        path = child_path(path, part)
    return path


def _readable(error: dict[str, Any], field: str) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if field in _POSITIVE_FIELDS and (kind in _INT_ERRORS or kind.startswith("greater_than")):
        unit = " (milliseconds)" if field != "max_iterations" else ""
        return f"must be a positive integer{unit}, not {short_repr(value)}"
    if kind == "missing":
        return "is required"
    if kind == "string_type":
        if isinstance(value, bool | int | float):
            return f"must be a string, not {short_repr(value)} (quote it if you meant text)"
        return "must be a string"
    if kind in _INT_ERRORS:
        return f"must be an integer, not {short_repr(value)}"
    if kind in {"bool_type", "bool_parsing"}:
        return f"must be true or false, not {short_repr(value)}"
    if kind in {"float_type", "float_parsing"}:
        return f"must be a number, not {short_repr(value)}"
    if kind == "list_type":
        return "must be a list"
    if kind in {"dict_type", "model_type", "model_attributes_type"}:
        return "must be a mapping"
    if kind == "literal_error":
        label = f"{field} " if field else ""
        return f"unknown {label}{short_repr(value)}; expected one of {ctx.get('expected')}"
    if kind in {"too_short", "string_too_short"}:
        return "must not be empty"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}"
    if kind == "value_error":
        return str(ctx.get("error", error.get("msg", "invalid value")))
    return str(error.get("msg", "invalid value"))


def validation_problems(exc: ValidationError, lines: LineMap, prefix: str = "") -> list[Problem]:
    """Convert a pydantic error into positioned problems (one per error)."""
    problems: list[Problem] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error.get("loc", ()))
        path = _loc_to_path(prefix, loc)
        field = next((p for p in reversed(loc) if isinstance(p, str)), "")
        problems.append(lines.problem(path, _readable(error, field)[:500]))
    return problems


# ------------------------------------------------------------------------ entry


def parse_workflow(data: dict, lines: LineMap, *, commands_dirs: Sequence[Path] = ()) -> LoadResult:
    """Validate a decoded ``kind: workflow`` document. Never raises for bad input."""
    from recipes.formats.workflow_rules import RuleContext, check_workflow

    ctx = RuleContext(lines=lines, commands_dirs=tuple(Path(d) for d in commands_dirs))
    cleaned = check_workflow(data, ctx)
    errors = list(ctx.errors)
    spec: WorkflowSpec | None = None
    try:
        spec = WorkflowSpec.model_validate(cleaned)
    except ValidationError as exc:
        reported = {p.path for p in errors}
        for problem in validation_problems(exc, lines):
            # Rules already explained these paths; the node kind is derived, not authored.
            if problem.path in reported or ctx.is_derived(problem.path):
                continue
            reported.add(problem.path)
            errors.append(problem)
    if errors:
        spec = None
    return LoadResult(
        kind="workflow",
        spec=spec,
        errors=sort_problems(_unique(errors)),
        warnings=sort_problems(_unique(ctx.warnings)),
    )


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
