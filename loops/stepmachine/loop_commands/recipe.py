"""`manage.py loop recipe ls | show ID_OR_PATH | validate ID_OR_PATH`: step-machine recipes.

A recipe by id is what `loop create` would run, read by the one rule of
loops.stepmachine.recipe_files: its file on disk now (the `.planeai/loops/` of the repository
the command runs in and of each of LOOP_REPOSITORIES, the project folders of
LOOP_RECIPE_DIRS, the user's folders, the bundled ones; first match by `id:` winning; else
the file the console loaded it from), the console's copy only where there is no file or the
console keeps its own edit. `ls` says for each where it is from and how the console's copy
stands against it."""

from pathlib import Path

from django.core.management import CommandError

from loops.stepmachine.recipe_files import (
    CONSOLE,
    REMEMBERED,
    RecipeFile,
    recipe_file,
    recipe_files,
)
from loops.stepmachine.spec import RECIPE_KIND
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


def _source(target: str) -> tuple[str, str, RecipeFile | None]:
    """A file named by its path as it is, else the recipe of that id."""
    path = Path(target)
    if path.is_file():
        return path.read_text(encoding="utf-8", errors="replace"), str(path), None
    found = recipe_file(target)
    if found is None:
        raise CommandError(f"No recipe with id '{target}' and no such file (try: loop recipe ls)")
    if found.text is None:
        raise CommandError(f"Recipe '{target}': cannot read {found.path}: {found.unreadable}")
    return found.text, found.path, found


def _ls(command, options):
    """Every step-machine recipe: where it is from, whether it is valid as it is now, and how
    the console's copy stands against its file."""
    rows = [_row(found) for found in recipe_files().values() if found.result.kind == RECIPE_KIND]
    emit(command, options, rows, "\n".join(map(_line, rows)) or "no step-machine recipes")


def _row(found: RecipeFile) -> dict:
    return {
        "id": found.id,
        "name": found.name or found.id,
        "origin": found.origin,
        "valid": found.result.ok,
        "path": found.path,
        "found": found.found,
        "shadows": found.shadows,
        "synced": found.state,
        **problems_dict(found.result),
    }


def _line(row: dict) -> str:
    notes = [] if row["synced"] == "synced" else [f"[{row['synced']}]"]
    if row["found"] == REMEMBERED:
        notes.append(f"(from {row['path']}: a repository not searched here)")
    if row["shadows"]:
        notes.append(f"(shadows {', '.join(row['shadows'])})")
    if row["errors"]:
        problem = row["errors"][0]
        where = f"line {problem['line']}: " if problem.get("line") else ""
        notes.append(f"error: {where}{problem['message']}")
    verdict = "valid" if row["valid"] else "INVALID"
    head = f"{row['id']:<28} {row['name'][:32]:<32} {row['origin']:<8} {verdict}"
    return "  ".join([head, *notes])


def _show(command, options):
    source, path, found = _source(options["target"])
    data = {
        "id": found.id if found else None,
        "origin": found.origin if found else "file",
        "path": path,
        "found": found.found if found else "file",
        "source": source,
    }
    emit(command, options, data, source.rstrip("\n"))


def _validate(command, options):
    source, path, found = _source(options["target"])
    result = found.result if found else validate_source(source, path)
    data = {"valid": result.ok, "kind": result.kind, **problems_dict(result)}
    lines = [f"note: {_copy_note(found)}"] if found and _copy_note(found) else []
    lines += [f"error: {p}" for p in result.errors] + [f"warning: {p}" for p in result.warnings]
    lines.append("valid" if result.ok else f"{len(result.errors)} error(s)")
    emit(command, options, data, "\n".join(lines))
    if not result.ok:
        raise SystemExit(1)


def _copy_note(found: RecipeFile) -> str:
    """When what is checked is not the file: the console's copy, and why."""
    if found.kept:
        return f"the console's copy is checked ({found.kept}; its file {found.path} differs)"
    if found.found == CONSOLE and found.path:
        return f"the console's copy is checked ({found.state}: {found.path})"
    return ""
