"""`manage.py loop create --recipe ID [--goal TEXT] [--input k=v]... [--start] [--dry-run]`."""

from pathlib import Path

from django.core.management import CommandError
from django.db import transaction

from loops.stepmachine.spec import RECIPE_KIND
from recipes.inputs import InputsInvalid, clean_inputs
from recipes.models import Recipe
from runs import services
from runs.executor.spec import SpecError, spec_of
from runs.loop_commands.common import actor, add_common, emit

from ..queries import status_of
from ..recipe_files import recipe_file
from ._common import status_text

NAME = "create"
HELP = "Create a step-machine run: resolve its inputs, optionally start it"


def add_arguments(parser):
    parser.add_argument("--recipe", required=True, metavar="ID", help="the recipe's id")
    parser.add_argument("--goal", default="", help="what the run is about (inputs.goal)")
    parser.add_argument(
        "--input", action="append", default=[], metavar="KEY=VALUE", help="an input (repeat)"
    )
    parser.add_argument(
        "--repository",
        default="",
        help="the git repository to work in (default: the first "
        "of LOOP_REPOSITORIES, else the repository the command runs in)",
    )
    parser.add_argument("--start", action="store_true", help="start it now (else: loop tick ID)")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the resolved recipe and inputs; run nothing"
    )
    add_common(parser)


def handle(command, options):
    if not options["dry_run"]:
        return _create(command, options)
    with transaction.atomic():
        _create(command, options)
        transaction.set_rollback(True)  # a dry run loads no file into the catalogue either


def _create(command, options):
    repository = _repository(options["repository"])
    recipe = _recipe(options["recipe"], repository)
    if recipe.current_version is None or not recipe.valid:
        raise CommandError(f"Recipe '{recipe.slug}' has errors: loop recipe validate {recipe.slug}")
    try:
        spec = spec_of(recipe, recipe.current_version)
    except SpecError as exc:
        raise CommandError(str(exc)) from None
    inputs = {}
    for item in options["input"]:
        key, sep, value = item.partition("=")
        if not sep:
            raise CommandError(f"--input expects KEY=VALUE, got {item!r}")
        inputs[key.strip()] = value
    if options["goal"] and "goal" in spec.inputs:
        inputs.setdefault("goal", options["goal"])
    if options["dry_run"]:
        try:
            cleaned = clean_inputs(spec.inputs, inputs)
        except InputsInvalid as exc:
            raise CommandError(_inputs_error(exc.errors)) from None
        data = {
            "recipe": spec.resolved(),
            "inputs": cleaned,
            "goal": options["goal"],
            "repository": repository,
            "created": False,
        }
        text = _dry_run_text(data)
        emit(command, options, data, text)
        return
    try:
        run = services.start_run(
            recipe,
            actor=actor(options),
            message=options["goal"],
            inputs=inputs,
            workdir=repository,
            start=options["start"],
        )
    except services.InputError as exc:
        raise CommandError(_inputs_error(exc.errors)) from None
    except services.ServiceError as exc:
        raise CommandError(str(exc)) from None
    data = status_of(run)
    hint = "" if options["start"] else f"\ncreated, not started: manage.py loop tick {run.pk}"
    emit(command, options, data, status_text(data) + hint)


def _recipe(recipe_id: str, repository: str) -> Recipe:
    """The recipe as `loop recipe validate` checks it (loops.stepmachine.recipe_files), its
    file loaded now: the run's repository's own `.planeai/loops/` first."""
    found = recipe_file(recipe_id, (repository,) if repository else ())
    if found is not None and found.text is None:
        raise CommandError(f"Recipe '{recipe_id}': cannot read {found.path}: {found.unreadable}")
    recipe = found.load() if found is not None else None
    if recipe is None or recipe.kind != RECIPE_KIND:
        raise CommandError(f"No step-machine recipe with id '{recipe_id}' (loop recipe ls)")
    return Recipe.objects.select_related("current_version").get(pk=recipe.pk)


def _repository(value: str) -> str:
    from ..git import is_repository

    if value:
        path = Path(value).expanduser().resolve()
        if not path.is_dir():
            raise CommandError(f"--repository {value}: no such folder")
        return str(path)
    from recipes.sources import current_repository

    from ..start import default_repository

    here = current_repository()  # the one the command runs in, from any of its folders
    return default_repository() or (str(here) if here and is_repository(here) else "")


def _inputs_error(errors: dict) -> str:
    return "invalid inputs: " + "; ".join(f"{k}: {v}" for k, v in errors.items())


def _dry_run_text(data: dict) -> str:
    import yaml

    return (
        "# resolved recipe (defaults filled in)\n"
        + yaml.safe_dump(data["recipe"], sort_keys=False, allow_unicode=True)
        + "# inputs\n"
        + yaml.safe_dump(data["inputs"] or {}, sort_keys=True, allow_unicode=True)
        + f"# repository: {data['repository'] or '(none)'}\n"
        + "# dry run: nothing was created"
    )
