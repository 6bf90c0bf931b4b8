"""Python recipes: a `.py` file that defines a module-level `workflow`.

Validating one reads its syntax tree and never runs it: the web process learns the name
(the docstring's first line), the description and whether `workflow` is defined. Only a
worker executes the source, the run's pinned version of it (loops.python.runner).

The spec it yields looks like a one-node workflow to the run kernel: node `workflow`, kind
`python`, which a worker claims and executes like any other node. The agents' own node
rows (`writer`, `analysis.market`, ...) are created as the workflow calls them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from recipes.loader import LoadResult, Problem
from runs.kinds import KernelNode

WORKFLOW_NAME = "workflow"
RECIPE_KIND = "python"  # Recipe.kind of Python recipes
NODE_ID = "workflow"
BUDGET_NAME = "budget"


def is_python_path(source_path: str) -> bool:
    return str(source_path or "").endswith(".py")


@dataclass
class PythonSpec:
    name: str
    description: str = ""
    source: str = ""
    inputs: dict = field(default_factory=dict)
    providers: dict = field(default_factory=dict)
    provider: str | None = None
    model: str | None = None
    kind: str = "python"
    budget: dict = field(default_factory=dict)

    @property
    def nodes(self) -> list[KernelNode]:
        return [KernelNode(id=NODE_ID, kind="python")]

    def layers(self) -> list[list[str]]:
        return [[NODE_ID]]

    def node(self, node_id: str) -> KernelNode:
        # Agent rows are named by the workflow at run time, not declared here.
        return KernelNode(id=node_id, kind="python" if node_id == NODE_ID else "agent")


def _assigns_workflow(tree: ast.Module) -> bool:
    for statement in tree.body:
        targets = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets = [statement.target]
        if any(isinstance(t, ast.Name) and t.id == WORKFLOW_NAME for t in targets):
            return True
    return False


def _gate_option_problems(tree: ast.Module) -> list[Problem]:
    """`GateOptions(timeout=..., on_timeout=...)` written as literals, checked by the rules
    a YAML recipe's gate_timeout / on_timeout obey, so a mistake shows with its line at
    sync instead of when a worker loads the file."""
    from runs.engine.deadlines import on_timeout_problem
    from runs.engine.durations import DurationError, parse_duration

    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name != "GateOptions":
            continue
        for keyword in node.keywords:
            if not isinstance(keyword.value, ast.Constant):
                continue
            value, where = keyword.value.value, keyword.value
            problem = None
            if keyword.arg == "on_timeout":
                problem = on_timeout_problem(value)
            elif keyword.arg == "timeout" and value is not None:
                try:
                    parse_duration(value)
                except DurationError as exc:
                    problem = f"GateOptions timeout {exc}"
            if problem:
                problems.append(
                    Problem(
                        f"GateOptions.{keyword.arg}", where.lineno, where.col_offset + 1, problem
                    )
                )
        problems += _escalation_problems(node)
    return problems


def _escalation_problems(call: ast.Call) -> list[Problem]:
    """`GateOptions(escalate_to=..., escalate_after=...)`, by the rules of a recipe's
    escalate_to / escalate_after. A value that is not a literal is checked when the loop
    is built; here it only counts as given."""
    from runs.engine.deadlines import escalation_problems

    given = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
    if "escalate_to" not in given and "escalate_after" not in given:
        return []

    def written(name: str, stand_in):
        if name not in given:
            return None
        try:
            return ast.literal_eval(given[name])
        except (ValueError, TypeError, SyntaxError):
            return stand_in

    found = escalation_problems(
        written("timeout", "1h"), written("escalate_to", "someone"), written("escalate_after", "1h")
    )
    return [
        Problem(
            f"GateOptions.{name}",
            given.get(name, call).lineno,
            given.get(name, call).col_offset + 1,
            problem.replace("gate_timeout", "timeout"),
        )
        for name, problem in found
    ]


def _agents_without_provider(tree: ast.Module) -> list[Problem]:
    """`Agent(...)` calls that name no provider (keyword, or third argument), for a console
    with no default provider: each would fail when the run reaches it."""
    problems = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name != "Agent":
            continue
        given = [k.value for k in call.keywords if k.arg == "provider"] or call.args[2:3]
        if any(not (isinstance(v, ast.Constant) and v.value is None) for v in given):
            continue
        # `model=llm` (an object, not a model name) is the agent's backend (Agent.__init__)
        model = [k.value for k in call.keywords if k.arg == "model"] or call.args[4:5]
        if any(not isinstance(v, ast.Constant) for v in model):
            continue
        problems.append(
            Problem(
                "Agent",
                call.lineno,
                call.col_offset + 1,
                "this agent names no provider and no default provider is set: add "
                'provider="NAME" (a provider of the console, e.g. provider="demo"), or set '
                "a default provider in the admin or LOOP_DEFAULT_PROVIDER",
            )
        )
    return problems


def parse_python(
    source: str, fallback_name: str = "", provider_fallback: bool | Callable[[], bool] = True
) -> LoadResult:
    """Check a Python recipe from its syntax tree (it is never run here). Besides the
    parser's errors, the compiler's are reported with their line (`await` outside a
    function: a recipe defines `workflow`; the console runs it). `provider_fallback`:
    whether a default provider answers agents that name none (asked only when one does)."""
    try:
        tree = ast.parse(source)
        compile(tree, "<recipe>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        message = f"Python syntax: {exc.msg}"
        if "await" in exc.msg:
            message += (
                " (a recipe defines a module-level `workflow` and the console runs it; a "
                "script awaits `workflow.run(...)` inside a function, e.g. `asyncio.run`)"
            )
        problem = Problem("", exc.lineno or 1, exc.offset or 1, message)
        return LoadResult(kind="python", spec=None, errors=[problem])
    except ValueError as exc:  # e.g. a NUL byte in the source
        return LoadResult(kind="python", spec=None, errors=[Problem("", 1, 1, str(exc))])
    if not _assigns_workflow(tree):
        problem = Problem(
            WORKFLOW_NAME,
            1,
            1,
            "a Python recipe defines a module-level `workflow` (for example "
            "`workflow = LoopWorkflow(...)`)",
        )
        return LoadResult(kind="python", spec=None, errors=[problem])
    budget, problems = _module_budget(tree)
    problems = [*_gate_option_problems(tree), *problems]
    unnamed = _agents_without_provider(tree)
    if unnamed and not (provider_fallback() if callable(provider_fallback) else provider_fallback):
        problems += unnamed
    if problems:
        return LoadResult(kind="python", spec=None, errors=problems)
    doc = (ast.get_docstring(tree) or "").strip()
    title, _, rest = doc.partition("\n")
    spec = PythonSpec(
        name=title.strip()[:200] or fallback_name,
        description=unwrap(rest.strip()),
        source=source,
        budget=budget,
    )
    return LoadResult(kind="python", spec=spec)


def unwrap(text: str) -> str:
    """A docstring's paragraphs without the line breaks it was wrapped at (the recipe list
    shows a description as running text); an indented block, such as a command to copy,
    is kept as it is."""
    blocks = re.split(r"\n[ \t]*\n", text)
    return "\n\n".join(
        block
        if any(line[:1] in (" ", "\t") for line in block.splitlines())
        else " ".join(line.strip() for line in block.splitlines())
        for block in blocks
    )


def _module_budget(tree: ast.Module) -> tuple[dict, list[Problem]]:
    """A module-level `budget = {"cost_usd": 2, ...}`: a literal, read without running the
    file, each wrong limit reported on its own line."""
    from recipes.formats.budget import BudgetInvalid, clean_budget

    for statement in tree.body:
        if not (
            isinstance(statement, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == BUDGET_NAME for t in statement.targets)
        ):
            continue
        node = statement.value
        try:
            raw = ast.literal_eval(node)
        except ValueError:
            message = "budget must be a literal dict, e.g. budget = {'cost_usd': 2.5}"
            return {}, [Problem(BUDGET_NAME, node.lineno, node.col_offset + 1, message)]
        try:
            return clean_budget(raw), []
        except BudgetInvalid as exc:
            lines = {}
            if isinstance(node, ast.Dict):
                for key in node.keys:
                    if isinstance(key, ast.Constant):
                        lines[key.value] = (key.lineno, key.col_offset + 1)
            return {}, [
                Problem(
                    f"{BUDGET_NAME}.{key}" if key != "budget" else BUDGET_NAME,
                    *lines.get(key, (node.lineno, node.col_offset + 1)),
                    f"budget {key}: {message}",
                )
                for key, message in exc.errors.items()
            ]
    return {}, []
