"""`manage.py run fork|compare|chart|budget`: a run's history from the command line (the
subcommands' arguments and handlers; runs/management/commands/run.py dispatches here)."""

from __future__ import annotations

import json

from django.core.management.base import CommandError
from ninja.responses import NinjaJSONEncoder

from recipes.formats.budget import LIMITS
from runs import budget as run_budget
from runs import chart as charts
from runs import compare as comparing
from runs import services

HELPS = {
    "fork": "Fork a run after one of its iterations, with new feedback or a new prompt",
    "compare": "Compare two iterations (ids) of one run or two runs of one recipe",
    "chart": "Print each loop's numbers per iteration (the convergence chart as a table)",
    "budget": "Show a run's budget, change a limit, and resume after a budget stop",
}


def add_budget_arguments(parser, *, removable: bool = False) -> None:
    extra = "; an empty value removes the limit" if removable else ""
    for name in LIMITS:
        parser.add_argument(
            "--" + name.replace("_", "-"), dest=name, default=None, help=f"limit: {name}{extra}"
        )


def budget_from(options) -> dict:
    return {name: options[name] for name in LIMITS if options.get(name) is not None}


def add_arguments(sub) -> None:
    fork = sub.add_parser("fork", help=HELPS["fork"], description=HELPS["fork"] + ".")
    fork.add_argument("run_id", type=int, help="the run to fork")
    fork.add_argument("--node", required=True, help="the loop's node id (a Python agent's path)")
    fork.add_argument("--iteration", type=int, required=True, help="fork after this iteration")
    fork.add_argument("--feedback", default="", help="feedback for the next iteration")
    fork.add_argument("--prompt", default="", help="a new prompt from the next iteration on")
    compare = sub.add_parser("compare", help=HELPS["compare"], description=HELPS["compare"] + ".")
    compare.add_argument("a", type=int, help="an iteration id")
    compare.add_argument("b", type=int, help="another iteration id")
    chart = sub.add_parser("chart", help=HELPS["chart"], description=HELPS["chart"] + ".")
    chart.add_argument("run_id", type=int, help="the run's id")
    chart.add_argument("--node", default=None, help="only this loop")
    chart.add_argument("--metric", default=None, help="score, field:NAME, duration, tokens or cost")
    limits = sub.add_parser("budget", help=HELPS["budget"], description=HELPS["budget"] + ".")
    limits.add_argument("run_id", type=int, help="the run's id")
    add_budget_arguments(limits, removable=True)
    limits.add_argument("--resume", action="store_true", help="go on after a budget stop")


def dump(command, data) -> None:
    command.stdout.write(json.dumps(data, indent=2, cls=NinjaJSONEncoder))


def do_fork(command, options) -> None:
    run = command._run(options["run_id"])
    new = services.fork_run(
        run,
        command.actor,
        node=options["node"],
        iteration=options["iteration"],
        feedback=options["feedback"],
        prompt=options["prompt"],
    )
    if options["json"]:
        dump(command, {"id": new.pk, "status": new.status_word, "forked_from": run.pk})
    else:
        command.stdout.write(
            f"run {new.pk}: a fork of run {run.pk} after {options['node']} "
            f"iteration {options['iteration']}"
        )


def do_compare(command, options) -> None:
    try:
        a, b = comparing.iteration(options["a"]), comparing.iteration(options["b"])
    except services.NotFound as exc:
        raise CommandError(str(exc)) from None
    diffs = comparing.compare(a, b)
    data = comparing.as_dict(a, b, diffs)
    if options["json"]:
        dump(command, data)
        return
    for diff in diffs:
        command.stdout.write(
            f"== {diff.label}: "
            + ("the same" if diff.same else f"+{diff.stats['added']} -{diff.stats['removed']}")
        )
        if not diff.same:
            command.stdout.write(data["fields"][diff.name]["unified"])


def do_chart(command, options) -> None:
    run = command._run(options["run_id"])
    found = charts.run_chart(run, node=options["node"])
    if options["metric"]:
        found = charts.run_chart(
            run, node=options["node"], metrics={s.node_id: options["metric"] for s in found}
        )
    if options["json"]:
        dump(command, {"run": run.pk, "loops": [charts.as_dict(s) for s in found]})
        return
    if not found:
        command.stdout.write(f"run {run.pk} has no loop iterations yet")
    for series in found:
        command.stdout.write(f"{series.node_id} — {series.metric_label}")
        command.stdout.write(f"  {'#':>4}  {'value':>12}  {'seconds':>9}  {'tokens':>8}  cost")
        for p in series.points:
            cells = [
                p.value,
                p.values.get("duration"),
                p.values.get("tokens"),
                p.values.get("cost"),
            ]
            shown = ["—" if v is None else f"{v:g}" for v in cells]
            mark = " (carried over)" if p.carried else ""
            command.stdout.write(
                f"  {p.number:>4}  {shown[0]:>12}  {shown[1]:>9}  {shown[2]:>8}  {shown[3]}{mark}"
            )


def do_budget(command, options) -> None:
    run = command._run(options["run_id"])
    limits = budget_from(options)
    if limits or options["resume"]:
        run = services.set_budget(run, command.actor, limits, resume=options["resume"])
    run.refresh_from_db()
    states = run_budget.limits(run)
    if options["json"]:
        from runs.api_history import budget_out

        dump(command, budget_out(run))
        return
    command.stdout.write(f"run {run.pk}: {run.status_word}")
    if not states:
        command.stdout.write("  no budget")
    for state in states:
        flag = f" — {state.flag}" if state.flag else ""
        command.stdout.write(f"  {state.words} ({state.percent} %){flag}")
    if run.status == "budget_exceeded":
        command.stdout.write(
            f"\n{run.error}\nresume: manage.py run budget {run.pk} --{states[0].name.replace('_', '-')} N --resume"
            if states
            else ""
        )
