"""Build the variable context an iteration or step sees, from what the database holds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from django.conf import settings

from runs.engine.variables import (
    DECIDED,
    NodeOutput,
    VarContext,
    VariableError,
    input_env_name,
    render_value,
    substitute,
)
from runs.models import NodeRun
from runs.sandbox import Confinement, files, for_run, limits_of, step_network

from .spec import node_spec, scope_nodes


def run_dirs(run) -> tuple[Path, Path]:
    base = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk)
    workdir = Path(run.workdir) if run.workdir else base / "work"
    return workdir, base / "artifacts"


def step_sandbox(run, spec, node) -> Confinement:
    """Where a workflow's bash, `script:` or `until_bash` process runs: the run's working
    folder, with the node's (else the recipe's) network and limits."""
    workdir, _ = run_dirs(run)
    return for_run(
        run.pk,
        workdir,
        network=step_network(getattr(node, "network", None), getattr(spec, "network", None)),
        limits=limits_of(getattr(spec, "limits", None), getattr(node, "limits", None)),
    )


def _output(row: NodeRun, schema) -> NodeOutput:
    if row.status != NodeRun.Status.COMPLETED:
        return NodeOutput(text="", structured=None, schema=schema)
    decided = (row.state or {}).get(DECIDED)
    return NodeOutput(row.output, row.structured, schema, decided=decided)


class LazyOutputs(dict):
    """The run's top-level node outputs, read on the first reference: a prompt that names
    no `$node.output` (a plain loop's) costs no query."""

    def __init__(self, load):
        super().__init__()
        self._load = load

    def _loaded(self):
        if self._load is not None:
            load, self._load = self._load, None
            super().update(load())
        return self

    def get(self, key, default=None):
        return dict.get(self._loaded(), key, default)

    def __getitem__(self, key):
        return dict.__getitem__(self._loaded(), key)

    def __contains__(self, key):
        return dict.__contains__(self._loaded(), key)

    def __iter__(self):
        return dict.__iter__(self._loaded())

    def __len__(self):
        return dict.__len__(self._loaded())

    def items(self):
        return dict.items(self._loaded())

    def keys(self):
        return dict.keys(self._loaded())

    def values(self):
        return dict.values(self._loaded())

    def update(self, *args, **kwargs):
        dict.update(self._loaded(), *args, **kwargs)


def _scope_outputs(spec, run, group: NodeRun | None, iteration: int) -> dict[str, NodeOutput]:
    if group is None:

        def load():
            rows = NodeRun.objects.filter(run=run, iteration=0)
            return {r.node_id: _output(r, node_spec(spec, r.node_id).output_format) for r in rows}

        return LazyOutputs(load)
    prefix = group.node_id + "."
    rows = NodeRun.objects.filter(
        run=run, iteration=iteration, generation=group.generation, node_id__startswith=prefix
    )
    return {
        r.node_id.removeprefix(prefix): _output(r, node_spec(spec, r.node_id).output_format)
        for r in rows
    }


def run_context(run) -> VarContext:
    """The run's own variables (its message, inputs and folders), for an agent whose prompt
    was not made from a workflow's variables (a step machine's role, a Python agent): its
    environment (`step_env`) then carries the same values a workflow's agents get."""
    workdir, artifacts = run_dirs(run)
    return VarContext(
        user_message=run.message,
        artifacts_dir=str(artifacts),
        base_branch=_base_branch(workdir),
        docs_dir="docs/",
        workflow_id=str(run.pk),
        inputs=dict(run.inputs or {}),
    )


def build_context(
    run,
    spec,
    node: NodeRun,
    *,
    loop_user_input: str = "",
    loop_prev_output: str = "",
) -> VarContext:
    outputs = _scope_outputs(spec, run, None, 0)
    known = {n.id for n in spec.nodes}
    loop_prev = None
    if "." in node.node_id:
        group = NodeRun.objects.get(run=run, node_id=node.node_id.split(".", 1)[0], iteration=0)
        known |= {n.id for n in scope_nodes(spec, group.node_id)}
        outputs.update(_scope_outputs(spec, run, group, node.iteration))
        if node.iteration > 1:
            loop_prev = _scope_outputs(spec, run, group, node.iteration - 1)
        current = group.iterations.filter(
            generation=group.generation, number=node.iteration
        ).first()
        if current is not None and not loop_user_input:
            loop_user_input = current.feedback
    ctx = replace(
        run_context(run),
        node_outputs=outputs,
        known_nodes=frozenset(known),
        loop_user_input=loop_user_input,
        loop_prev_output=loop_prev_output,
        loop_prev=loop_prev,
    )
    bindings = _bindings_of(spec, node.node_id)
    if bindings:
        ctx.inputs = {**ctx.inputs, **_bound(run, bindings, ctx)}
    return ctx


def _bindings_of(spec, node_id: str) -> dict:
    try:
        return dict(getattr(node_spec(spec, node_id), "bindings", None) or {})
    except (KeyError, AttributeError):
        return {}


def _bound(run, bindings: dict, ctx: VarContext) -> dict:
    """A node's `$INPUTS` from its bindings (an included block's inputs, its own `with:`):
    templates are resolved against upstream outputs; values stay data."""
    values: dict = {}
    for name, value in bindings.items():
        if isinstance(value, dict) and "from" in value:
            values[name] = _directive(run, name, value, ctx)
        elif isinstance(value, str):
            values[name] = substitute(value, ctx)
        else:
            values[name] = value
    return values


def _directive(run, name: str, value: dict, ctx: VarContext):
    """`{from: $node.output, if_skipped: v}`: v when that node did not run; a failed (or
    skipped, without if_skipped) producer fails the node rather than give ''."""
    ref = value["from"]
    producer = ref.lstrip("$").split(".", 1)[0]
    status = (
        NodeRun.objects.filter(run=run, node_id=producer, iteration=0)
        .order_by("-generation")
        .values_list("status", flat=True)
        .first()
    )
    if status == NodeRun.Status.SKIPPED:
        if "if_skipped" in value:
            return value["if_skipped"]
        raise VariableError(
            f"with.{name}: {producer} was skipped and the binding has no if_skipped value"
        )
    if status in (NodeRun.Status.FAILED, NodeRun.Status.CANCELLED):
        raise VariableError(f"with.{name}: {producer} {status}, so {ref} has no value")
    return substitute(ref, ctx)


# A `.git` file or HEAD is a line: anything longer is not one.
GIT_POINTER_LIMIT = 4096


def _base_branch(workdir: Path) -> str:
    """The branch the working folder's HEAD names ("main" when it names none). The folder
    is the agents': `.git` and HEAD are read like any file there (runs/sandbox/files.py),
    so a FIFO or a link planted in their place is refused, never waited on or followed."""
    try:
        try:
            git = files.read_file(workdir, ".git", limit=GIT_POINTER_LIMIT).text()
        except files.Refused:  # a folder (an ordinary repository), or refused below
            folder, name = workdir, ".git/HEAD"
        else:  # a worktree: ".git" names the real git directory
            folder, name = workdir / git.split("gitdir:", 1)[1].strip(), "HEAD"
        ref = files.read_file(folder, name, limit=GIT_POINTER_LIMIT).text().strip()
    except (OSError, IndexError):
        return "main"
    return ref.rsplit("/", 1)[-1] if ref.startswith("ref:") else "main"


def step_env(run, ctx: VarContext) -> dict[str, str]:
    """Environment for bash steps, scripts and agents: the same values, never spliced into
    code; every input also as `INPUTS_<NAME>` (NUL cannot travel in the environment)."""
    env = {
        input_env_name(name): render_value(value).replace("\0", "")
        for name, value in ctx.inputs.items()
    }
    return {
        **env,
        "ARTIFACTS_DIR": ctx.artifacts_dir,
        "WORKFLOW_ID": ctx.workflow_id,
        "USER_MESSAGE": ctx.user_message,
        "ARGUMENTS": ctx.user_message,
        "BASE_BRANCH": ctx.base_branch,
        "DOCS_DIR": ctx.docs_dir,
    }
