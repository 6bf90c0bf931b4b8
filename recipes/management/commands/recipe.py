"""manage.py recipe validate|ls|show|sync — all with --json for scripts."""

import functools
import json
from pathlib import Path

from django.core.management.base import CommandError

from console.cli import JsonErrorsCommand
from recipes.models import Recipe
from recipes.sync import sync
from recipes.validation import (
    default_provider_configured,
    problems_dict,
    repository_default,
    validate_source,
)


class Command(JsonErrorsCommand):
    help = "Validate, list, show and synchronise recipes."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        validate = sub.add_parser("validate", help="Validate a recipe file or a stored recipe")
        validate.add_argument("target", help="a path to a YAML file, or a recipe slug")
        validate.add_argument("--json", action="store_true")
        ls = sub.add_parser("ls", help="List recipes with kind, origin and validity")
        ls.add_argument("--json", action="store_true")
        show = sub.add_parser("show", help="Print a recipe's YAML")
        show.add_argument("slug")
        show.add_argument("--json", action="store_true")
        sync_parser = sub.add_parser("sync", help="Load bundled, user and project recipes")
        sync_parser.add_argument("--force", action="store_true", help="overwrite console edits")
        sync_parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        getattr(self, f"do_{options['action']}")(options)

    def emit(self, options, data, text):
        self.stdout.write(json.dumps(data, indent=2, default=str) if options.get("json") else text)

    def do_validate(self, options):
        target = options["target"]
        path = Path(target)
        project_id = None  # a file's: the default project's providers
        if path.is_file():
            source, source_path = path.read_text(encoding="utf-8", errors="replace"), str(path)
        else:
            recipe = Recipe.objects.filter(slug=target).first()
            if recipe is None:
                raise CommandError(f"No such file or recipe: {target}")
            source, source_path = recipe.source, recipe.source_path
            project_id = recipe.project_id
        result = validate_source(source, source_path, project_id=project_id)
        data = {"valid": result.ok, "kind": result.kind, **problems_dict(result)}
        lines = [f"error: {p}" for p in result.errors] + [f"warning: {p}" for p in result.warnings]
        lines.append("valid" if result.ok else f"{len(result.errors)} error(s)")
        self.emit(options, data, "\n".join(lines))
        if not result.ok:
            raise SystemExit(1)

    def do_ls(self, options):
        recipes = Recipe.objects.select_related("current_version")
        console_default = functools.cache(default_provider_configured)  # each project's own
        rows = [
            {
                "slug": r.slug,
                "name": r.name,
                "kind": r.kind,
                "origin": r.origin,
                "version": r.current_version.number if r.current_version else None,
                "valid": r.valid,
                "enabled": r.enabled,
                "source_path": r.source_path,
                "default_provider": repository_default(r, console_default),
            }
            for r in recipes
        ]
        text = "\n".join(
            f"{r['slug']:<28} {r['kind']:<9} {r['origin']:<8} v{r['version']}  "
            f"{'valid  ' if r['valid'] else 'INVALID'}  {_where(r)}"
            + (f"  [{r['default_provider']}]" if r["default_provider"] else "")
            for r in rows
        )
        self.emit(options, rows, text or "no recipes (run: manage.py recipe sync)")

    def do_show(self, options):
        recipe = Recipe.objects.filter(slug=options["slug"]).first()
        if recipe is None:
            raise CommandError(f"No recipe '{options['slug']}'")
        data = {
            "slug": recipe.slug,
            "origin": recipe.origin,
            "source_path": recipe.source_path,
            "version": recipe.current_version.number if recipe.current_version else None,
            "source": recipe.source,
        }
        self.emit(options, data, recipe.source)

    def do_sync(self, options):
        reports = sync(force=options["force"])
        rows = [r.__dict__ for r in reports]
        text = "\n".join(f"{r.slug:<28} {r.action:<20} {r.origin:<8} {r.detail}" for r in reports)
        self.emit(options, rows, text or "no recipe files found")


def _where(row: dict) -> str:
    """Where a recipe came from: its file, or the console (or a script) that made it."""
    if row["source_path"]:
        return row["source_path"]
    return {"console": "created in the console", "script": "recorded from a script"}.get(
        row["origin"], row["origin"]
    )
