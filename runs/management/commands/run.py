"""manage.py run start|status|approve|reject|cancel|resume — all with --json for scripts."""

import json
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from recipes import editing
from recipes.models import Recipe
from recipes.sync import slug_for
from runs import services
from runs.actor import Actor
from runs.models import Run
from runs.serializers import run_summary


class Command(BaseCommand):
    help = "Start and steer runs from the command line."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        start = sub.add_parser("start", help="Start a run of a recipe (slug or YAML path)")
        start.add_argument("recipe")
        start.add_argument("--message", "-m", default="")
        start.add_argument("--input", "-i", action="append", default=[], metavar="KEY=VALUE")
        start.add_argument("--workdir", default="")
        start.add_argument("--wait", action="store_true", help="wait until terminal or paused")
        start.add_argument("--timeout", type=float, default=3600)
        start.add_argument(
            "--force",
            action="store_true",
            help="let a recipe file replace a recipe created or edited in the console",
        )
        for name in ("status", "cancel", "resume", "approve", "reject"):
            p = sub.add_parser(name)
            p.add_argument("run_id", type=int)
        for p in sub.choices.values():
            p.add_argument("--json", action="store_true")
            p.add_argument("--user", default="", help="act as this user (audit log)")
        sub.choices["approve"].add_argument("--comment", default="")
        sub.choices["approve"].add_argument("--decision", default="")
        sub.choices["reject"].add_argument("--reason", default="")
        sub.choices["status"].add_argument("--wait", action="store_true")
        sub.choices["status"].add_argument("--timeout", type=float, default=3600)

    def handle(self, *args, **options):
        self.user = None
        if options.get("user"):
            self.user = get_user_model().objects.filter(username=options["user"]).first()
            if self.user is None:
                raise CommandError(f"No user '{options['user']}'")
        # Without --user the command line acts as itself (whoever can run manage.py).
        try:
            self.actor = Actor.operator(self.user, "cli") if self.user else Actor("cli")
            getattr(self, f"do_{options['action']}")(options)
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from exc

    def emit(self, options, run: Run):
        run.refresh_from_db()
        data = run_summary(run)
        if options.get("json"):
            self.stdout.write(json.dumps(data, indent=2, default=str))
            return
        self.stdout.write(f"run {run.pk}: {run.status}" + (f" — {run.error}" if run.error else ""))
        for node in data["nodes"]:
            progress = (
                f" ({node['iterations']}/{node['max_iterations']})"
                if node["max_iterations"]
                else ""
            )
            self.stdout.write(f"  {node['node']:<28} {node['status']}{progress}")
        gate = data["pending_gate"]
        if gate:
            self.stdout.write(f"\n{gate['message']}\n")
            self.stdout.write(f"approve: manage.py run approve {run.pk} [--comment TEXT]")

    def _run(self, run_id) -> Run:
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"No run {run_id}")
        return run

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
                )
            except editing.SourceInvalid as exc:
                raise CommandError("\n".join(str(p) for p in exc.result.errors)) from None
            recipe = loaded.recipe
            if loaded.action == "kept" and recipe.source != source:
                # Same rule as sync: the console's work is not overwritten by a file.
                raise CommandError(
                    f"Recipe '{recipe.slug}' was {loaded.reason}, so {path.name} did not "
                    f"replace it. Run the console's version with `run start {recipe.slug}`, "
                    "or replace it with the file with --force."
                )
            return recipe
        recipe = Recipe.objects.filter(slug=target).first()
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
        try:
            run = services.start_run(
                self._recipe(options["recipe"], force=options["force"]),
                message=options["message"],
                inputs=inputs,
                workdir=options["workdir"],
                user=self.user,
            )
        except services.InputError as exc:
            raise CommandError(
                "invalid inputs: " + "; ".join(f"{k}: {v}" for k, v in exc.errors.items())
            ) from exc
        if not options["wait"]:
            self.stdout.write(
                json.dumps({"id": run.pk, "status": run.status}) if options["json"] else str(run.pk)
            )
            return
        self._wait(run, options)

    def _wait(self, run: Run, options):
        deadline = time.monotonic() + options["timeout"]
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.is_terminal or run.status == Run.Status.PAUSED:
                break
            time.sleep(0.2)
        self.emit(options, run)
        if run.status != Run.Status.COMPLETED:
            raise SystemExit(1)

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
        self.emit(
            options,
            services.resume_run(self._run(options["run_id"]), self.actor),
        )

    def do_approve(self, options):
        run = self._run(options["run_id"])
        services.approve(
            services.gate_for_decision(run).pk,
            self.actor,
            comment=options["comment"],
            decision=options["decision"],
        )
        self.emit(options, run)

    def do_reject(self, options):
        run = self._run(options["run_id"])
        services.reject(services.gate_for_decision(run).pk, self.actor, reason=options["reason"])
        self.emit(options, run)
