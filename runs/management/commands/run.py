"""manage.py run start|status|wait|respond|approve|reject|cancel|resume|fork|compare|chart|budget —
all with --json for scripts."""

import json
from pathlib import Path

from django.core.management.base import CommandError
from ninja.responses import NinjaJSONEncoder

from console.cli import JsonErrorsCommand
from recipes import editing
from recipes.models import Recipe
from recipes.sync import slug_for
from runs import cli_history, services, waiting
from runs.actor import Actor
from runs.decisions import recorded_words
from runs.models import Run
from runs.resuming import continue_point, resume_restarts
from runs.serializers import run_summary

# What only reads: `--user` may name a viewer for these (the others operate).
READS = {"status", "wait", "compare", "chart"}
# The actions on one run, named by its id.
RUN_ACTIONS = {
    "status": "Show a run: its nodes, progress and the gate it waits at",
    "wait": (
        "Wait until a run needs a person (a gate, a stop) or ends, then show it as `status` "
        "does; the exit status says which: "
        + ", ".join(f"{code} {state}" for state, code in waiting.EXIT_CODES.items())
        + " (the timeout passed)"
    ),
    "cancel": "Cancel a run (the agent is stopped)",
    "resume": (
        "Resume a failed or cancelled run: what did not finish runs again from its "
        "start, a loop from iteration 1 (`run fork` goes on from an iteration instead)"
    ),
    "respond": "Answer the gate a run waits at with one of its decisions (by id)",
    "approve": "Approve the gate a run waits at (or iterate, with --comment)",
    "reject": "Reject the gate a run waits at",
}


def _add_start(sub) -> None:
    start = sub.add_parser(
        "start",
        help="Start a run of a recipe (slug or YAML path)",
        description="Start a run. Prints its id, or with --wait follows it to the end "
        "or the first gate (exit 0 only when it completed).",
    )
    start.add_argument("recipe", help="a recipe's slug, or the path of a recipe YAML file")
    start.add_argument(
        "--message",
        "-m",
        default="",
        help="what the run is about (needed when the recipe reads it: $USER_MESSAGE)",
    )
    start.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a declared input (repeat for several)",
    )
    start.add_argument("--workdir", default="", help="an existing or new directory to work in")
    start.add_argument("--wait", action="store_true", help="wait until terminal or paused")
    start.add_argument("--timeout", type=float, default=3600, help="seconds to wait (with --wait)")
    start.add_argument(
        "--force",
        action="store_true",
        help="let a recipe file replace a recipe created or edited in the console",
    )
    cli_history.add_budget_arguments(start)


def _add_wait_options(wait) -> None:
    wait.add_argument(
        "--timeout",
        type=float,
        default=3600,
        metavar="SECONDS",
        help="stop waiting after this long (exit 5, the run still going); default 3600",
    )


def _add_decision_options(approve, reject) -> None:
    approve.add_argument(
        "--comment", default="", help="feedback: at a loop gate, asks for another iteration"
    )
    approve.add_argument(
        "--decision", default="", help="the choice, at an approval with declared decisions"
    )
    approve.add_argument(
        "--record-only",
        action="store_true",
        help="record the decision and leave the run paused; `run resume ID` goes on with it",
    )
    reject.add_argument("--reason", default="", help="why; kept on the run")


def _add_respond_options(respond) -> None:
    respond.add_argument("decision", help="the id of one of the gate's decisions (run status)")
    respond.add_argument("--text", default="", help="what and why (required by some decisions)")
    respond.add_argument(
        "--digest", default="", help="the digest you reviewed; refused if the gate changed since"
    )


class Command(JsonErrorsCommand):
    help = "Start and steer runs from the command line."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        _add_start(sub)
        for name, text in RUN_ACTIONS.items():
            p = sub.add_parser(name, help=text, description=text + ".")
            p.add_argument("run_id", type=int, help="the run's id")
        cli_history.add_arguments(sub)
        for p in sub.choices.values():  # every action, its own options after these
            p.add_argument("--json", action="store_true", help="print JSON, as the API does")
            p.add_argument(
                "--user",
                default="",
                help="act as this account, and see only its projects' runs (default: the "
                "account named like your OS user)",
            )
        _add_decision_options(sub.choices["approve"], sub.choices["reject"])
        _add_respond_options(sub.choices["respond"])
        _add_wait_options(sub.choices["wait"])
        sub.choices["status"].add_argument(
            "--wait", action="store_true", help="wait until terminal or paused"
        )
        sub.choices["status"].add_argument(
            "--timeout", type=float, default=3600, help="seconds to wait (with --wait)"
        )

    def handle(self, *args, **options):
        try:
            action = options["action"]
            self.actor = _actor(options.get("user") or "", reads=action in READS)
            self.user = self.actor.person
            if action == "compare":
                self._iterations_seen(options["a"], options["b"])
            if action in cli_history.HELPS:
                getattr(cli_history, f"do_{action}")(self, options)
            else:
                getattr(self, f"do_{action}")(options)
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from exc

    def emit(self, options, run: Run):
        run.refresh_from_db()
        data = run_summary(run)
        if options.get("json"):
            self.stdout.write(json.dumps(data, indent=2, cls=NinjaJSONEncoder))
            return
        shown = f"run {run.pk}: {run.status_word}"
        self.stdout.write(shown + (f" — {run.error}" if run.error else ""))
        for node in data["nodes"]:
            progress = (
                f" ({node['iterations']}/{node['max_iterations']})"
                if node["max_iterations"]
                else ""
            )
            self.stdout.write(f"  {node['node']:<28} {node['status']}{progress}")
        paused = run.status == Run.Status.PAUSED
        for recorded in services.recorded_decisions(run) if paused else []:  # --record-only
            self.stdout.write(
                f"\n{recorded_words(recorded)}: the run waits until it is resumed "
                f"to carry it out: manage.py run resume {run.pk}"
            )
        gate = data["pending_gate"]
        if gate:
            self.stdout.write(f"\n{gate['message']}\n")
            if gate.get("deadline_at"):
                then = gate["on_timeout_words"]  # Gate.on_timeout_words: one wording
                self.stdout.write(f"decide by {gate['deadline_at']}; then {then}")
            for offered in gate["offered_decisions"]:
                needs = " --text TEXT" if offered["text_required"] else ""
                self.stdout.write(
                    f"{offered['label']}: manage.py run respond {run.pk} {offered['id']}{needs}"
                )
            if gate["approvals_needed"] > 1:
                given = len(gate["approvals"])
                self.stdout.write(f"approvals: {given} of {gate['approvals_needed']}")

    def _runs(self):
        """The runs this command may read: those of its account's projects; all of them
        for the trusted command line acting as no account."""
        return Run.objects.all() if self.user is None else Run.objects.visible_to(self.user)

    def _run(self, run_id) -> Run:
        run = self._runs().filter(pk=run_id).first()
        if run is None:  # one of a project the account sees nothing of: the same words
            raise CommandError(f"No run {run_id}")
        return run

    def _iterations_seen(self, *iteration_ids) -> None:
        """`run compare`: iterations of runs the account may read, else as missing."""
        for pk in iteration_ids:
            if not self._runs().filter(iterations__pk=pk).exists():
                raise CommandError(f"No iteration {pk}.")

    def _recipe(self, target: str, force: bool = False) -> Recipe:
        path = Path(target)
        if path.is_file():
            source = path.read_text(encoding="utf-8")
            try:
                loaded = editing.load_file(
                    slug_for(path),
                    source,
                    origin=Recipe.Origin.PROJECT,
                    source_path=str(path.resolve()),
                    note="started from a file",
                    force=force,
                    require_valid=True,
                    user=self.user,
                )
            except editing.SourceInvalid as exc:
                raise CommandError("\n".join(str(p) for p in exc.result.errors)) from None
            except editing.ShellNotAllowed as exc:
                raise CommandError(f"{self.user.get_username()}: {exc}") from None
            recipe = loaded.recipe
            if loaded.action == "kept" and recipe.source != source:
                # Same rule as sync: the console's work is not overwritten by a file.
                raise CommandError(
                    f"Recipe '{recipe.slug}' was {loaded.reason}, so {path.name} did not "
                    f"replace it. Run the console's version with `run start {recipe.slug}`, "
                    "or replace it with the file with --force."
                )
            return recipe
        recipes = Recipe.objects if self.user is None else Recipe.objects.visible_to(self.user)
        recipe = recipes.filter(slug=target).first()
        if recipe is None:
            raise CommandError(f"No recipe '{target}' (and no such file)")
        return recipe

    def do_start(self, options):
        inputs = {}
        for item in options["input"]:
            key, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--input expects KEY=VALUE, got {item!r}")
            inputs[key.strip()] = value
        workdir = _workdir(options["workdir"])
        try:
            run = services.start_run(
                self._recipe(options["recipe"], force=options["force"]),
                message=options["message"],
                inputs=inputs,
                workdir=workdir,
                actor=self.actor,
                budget=cli_history.budget_from(options),
            )
        except services.InputError as exc:
            raise CommandError(_start_refusal(exc.errors)) from exc
        if not options["wait"]:
            self.stdout.write(
                json.dumps({"id": run.pk, "status": run.status_word})
                if options["json"]
                else str(run.pk)
            )
            return
        self._wait(run, options)

    def _wait(self, run: Run, options):
        """`start --wait`, `status --wait`: until the run ends or pauses (exit 0 only when it
        completed); `run wait` says more (`do_wait`)."""
        waiting.wait_until(
            run, options["timeout"], lambda now: now.is_terminal or now.status == Run.Status.PAUSED
        )
        self.emit(options, run)
        if run.status != Run.Status.COMPLETED:
            raise SystemExit(1)

    def do_wait(self, options):
        """Until the run needs a person or ends (runs/waiting.py); the exit status says
        which (`waiting.EXIT_CODES`)."""
        run = self._run(options["run_id"])
        if options["timeout"] < 0:
            raise CommandError("--timeout: give 0 or more seconds")
        result = waiting.wait_for_person(run, options["timeout"])
        self.emit(options, result.run)
        if not options["json"]:  # with --json, the exit status says it
            self.stdout.write(f"\n{result.state}: {result.reason}")
        if result.exit_code:
            raise SystemExit(result.exit_code)

    def do_status(self, options):
        run = self._run(options["run_id"])
        if options["wait"]:
            self._wait(run, options)
        else:
            self.emit(options, run)

    def do_cancel(self, options):
        self.emit(
            options,
            services.cancel_run(self._run(options["run_id"]), self.actor),
        )

    def do_resume(self, options):
        run = self._run(options["run_id"])
        restarts, keep = resume_restarts(run), continue_point(run)
        run = services.resume_run(run, self.actor)
        # Said on stderr, as the console's confirmation says it: finished work runs again.
        for loop in restarts:
            self.stderr.write(
                f"note: {loop['node_id']} starts over at iteration 1: its {loop['finished']} "
                "finished iteration(s) run again (and are paid for again)"
            )
        if restarts and keep:
            self.stderr.write(
                f"to keep what finished, cancel this and run: manage.py run fork {run.pk} "
                f"--node {keep.node_run.node_id} --iteration {keep.number}"
            )
        self.emit(options, run)

    def do_approve(self, options):
        run = self._run(options["run_id"])
        services.approve(
            services.gate_for_decision(run).pk,
            self.actor,
            comment=options["comment"],
            decision=options["decision"],
            record_only=options["record_only"],
        )
        self.emit(options, run)

    def do_respond(self, options):
        run = self._run(options["run_id"])
        services.respond(
            services.gate_for_decision(run).pk,
            self.actor,
            options["decision"],
            text=options["text"],
            digest=options["digest"],
        )
        self.emit(options, run)

    def do_reject(self, options):
        run = self._run(options["run_id"])
        services.reject(services.gate_for_decision(run).pk, self.actor, reason=options["reason"])
        self.emit(options, run)


def _actor(username: str, *, reads: bool) -> Actor:
    """Who the command acts as (`Actor.command_line`); for a command that only reads,
    `--user` may name a viewer."""
    if not (username and reads):
        return Actor.command_line(username)
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise services.NotAllowed(f"No user '{username}'")
    if not user.has_perm("runs.view_run"):
        raise services.NotAllowed(f"{username} has no role: give them the viewer role or more")
    return Actor("cli", user)


def _start_refusal(errors: dict) -> str:
    """The service's refusal of a start, naming the options it is about: the message's
    words as the console's, then the inputs (and limits) that are wrong."""
    errors = dict(errors)
    lines = [f"--message: {errors.pop('message')}"] if "message" in errors else []
    if errors:
        lines.append("invalid inputs: " + "; ".join(f"{k}: {v}" for k, v in errors.items()))
    return "\n".join(lines)


def _workdir(value: str) -> str:
    """An existing directory, or one that can be made: refused clearly otherwise."""
    if not value:
        return ""
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise CommandError(f"--workdir {value}: this is a file; give a directory")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise CommandError(f"--workdir {value}: {parent} is a file, not a directory")
    return str(path.resolve())
