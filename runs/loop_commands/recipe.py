"""`manage.py loop recipe ls | show ID_OR_PATH | validate ID_OR_PATH`: step-machine recipes.

Recipes come from, first match by `id:` winning: each repository's `.planeai/loops/`, the
project folders of LOOP_RECIPE_DIRS, the user's folder, the bundled ones (`manage.py recipe
sync` loads them; `ls` shows what it loaded and what each one shadows)."""

from pathlib import Path

from django.core.management import CommandError

from recipes.models import Recipe
from recipes.validation import problems_dict, validate_source

from ._common import add_common, emit

NAME = "recipe"
HELP = "List, show and validate step-machine recipes"


def add_arguments(parser):
    sub = parser.add_subparsers(dest="recipe_action", required=True, metavar="ACTION")
    add_common(sub.add_parser("ls", help="List step-machine recipes: id, name, origin"), user=False)
    show = sub.add_parser("show", help="Print a recipe's YAML (by id, or a file)")
    show.add_argument("target", metavar="ID_OR_PATH")
    add_common(show, user=False)
    validate = sub.add_parser(
        "validate", help="Check schema, step references, roles and templates (exit 1 on errors)"
    )
    validate.add_argument("target", metavar="ID_OR_PATH")
    add_common(validate, user=False)


def handle(command, options):
    {"ls": _ls, "show": _show, "validate": _validate}[options["recipe_action"]](command, options)


def _source(target: str) -> tuple[str, str, Recipe | None]:
    path = Path(target)
    if path.is_file():
        return path.read_text(encoding="utf-8", errors="replace"), str(path), None
    recipe = Recipe.objects.filter(slug=target).first()
    if recipe is None:
        raise CommandError(f"No recipe with id '{target}' and no such file (try: loop recipe ls)")
    return recipe.source, recipe.source_path, recipe


def _ls(command, options):
    from recipes.sync import discover

    found = discover()
    rows = []
    for recipe in Recipe.objects.filter(kind=Recipe.Kind.PLANEAI).order_by("slug"):
        item = found.get(recipe.slug)
        rows.append(
            {
                "id": recipe.slug,
                "name": recipe.name,
                "origin": recipe.origin,
                "valid": recipe.valid,
                "path": recipe.source_path,
                "shadows": item.shadows if item else [],
            }
        )
    text = "\n".join(
        f"{r['id']:<28} {r['name'][:32]:<32} {r['origin']:<8} {'valid' if r['valid'] else 'INVALID'}"
        + (f"  (shadows {', '.join(r['shadows'])})" if r["shadows"] else "")
        for r in rows
    )
    emit(command, options, rows, text or "no step-machine recipes (run: manage.py recipe sync)")


def _show(command, options):
    source, path, recipe = _source(options["target"])
    data = {
        "id": recipe.slug if recipe else None,
        "origin": recipe.origin if recipe else "file",
        "path": path,
        "source": source,
    }
    emit(command, options, data, source.rstrip("\n"))


def _validate(command, options):
    source, path, _ = _source(options["target"])
    result = validate_source(source, path)
    data = {"valid": result.ok, "kind": result.kind, **problems_dict(result)}
    lines = [f"error: {p}" for p in result.errors] + [f"warning: {p}" for p in result.warnings]
    lines.append("valid" if result.ok else f"{len(result.errors)} error(s)")
    emit(command, options, data, "\n".join(lines))
    if not result.ok:
        raise SystemExit(1)
