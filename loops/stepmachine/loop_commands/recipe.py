"""`manage.py loop recipe ls | show ID_OR_PATH | validate ID_OR_PATH`: step-machine recipes.

Recipes come from, first match by `id:` winning: the `.planeai/loops/` of the repository the
command runs in and of each of LOOP_REPOSITORIES, the project folders of LOOP_RECIPE_DIRS,
the user's folders (LOOP_PLANEAI_USER_DIR, LOOP_USER_RECIPE_DIR), the bundled ones. `ls`
scans them as they are now (and says which the console has not loaded yet); `loop create`
loads the file it names."""

from pathlib import Path

from django.core.management import CommandError

from loops.stepmachine.spec import RECIPE_KIND
from recipes.models import Recipe
from recipes.validation import problems_dict, validate_source
from runs.loop_commands.common import add_common, emit

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
    """What is there: every step-machine recipe file found now (validated as it is on
    disk), then those only the console has; each says whether the console has it as is."""
    from recipes.sync import discover, read_source

    stored = {r.slug: r for r in Recipe.objects.filter(kind=RECIPE_KIND)}
    rows = []
    for slug, item in sorted(discover().items()):
        try:
            source = read_source(item.path)
        except (OSError, UnicodeDecodeError):
            continue
        result = validate_source(source, str(item.path))
        if result.kind != RECIPE_KIND:
            continue
        recipe = stored.pop(slug, None)
        rows.append(
            {
                "id": slug,
                "name": getattr(result.spec, "name", "") or (recipe.name if recipe else slug),
                "origin": item.origin,
                "valid": result.ok,
                "path": str(item.path),
                "shadows": item.shadows,
                "synced": _synced(recipe, source),
            }
        )
    for slug, recipe in sorted(stored.items()):
        rows.append(
            {
                "id": slug,
                "name": recipe.name,
                "origin": recipe.origin,
                "valid": recipe.valid,
                "path": recipe.source_path,
                "shadows": [],
                "synced": "console only" if not recipe.source_path else "file gone",
            }
        )
    text = "\n".join(
        f"{r['id']:<28} {r['name'][:32]:<32} {r['origin']:<8} {'valid' if r['valid'] else 'INVALID'}"
        + ("" if r["synced"] == "synced" else f"  [{r['synced']}]")
        + (f"  (shadows {', '.join(r['shadows'])})" if r["shadows"] else "")
        for r in rows
    )
    emit(command, options, rows, text or "no step-machine recipes")


def _synced(recipe: Recipe | None, source: str) -> str:
    """How the console's copy stands against the file (`loop create` loads the file)."""
    if recipe is None:
        return "not synced"
    if recipe.source == source:
        return "synced"
    return "kept: edited in the console" if recipe.edited_locally else "changed since sync"


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
