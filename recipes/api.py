"""Recipes over HTTP: list, read, validate, create and change (editors)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from django.conf import settings
from django.db import transaction
from ninja import Field, Router, Schema, Status
from ninja import Path as PathParam
from pydantic import AfterValidator

from console.api_errors import (
    InvalidSourceOut,
    JsonObject,
    ProblemOut,
    TooLarge,
    TooManyRequests,
    errors,
    require,
)
from console.models import Project
from console.projects import default_among, projects_where
from console.throttle import spend
from recipes import editing
from recipes.models import Recipe
from recipes.validation import problems_dict, validate_source
from runs import services
from runs.actor import Actor


def no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL; refuse it as input rather than fail on storage.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, AfterValidator(no_nul)]
Slug = Annotated[str, PathParam(max_length=100, pattern=r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")]

router = Router()


def limit_validation(user, source: str) -> None:
    """Validating costs web CPU (about 2.5 s for a megabyte): people who cannot save a
    recipe (viewers, operators) get a smaller size and a rate limit."""
    if user.has_perm("recipes.change_recipe"):
        return
    most = settings.LOOP_VALIDATE_MAX_CHARS
    if len(source) > most:
        raise TooLarge(
            f"Without the editor role a recipe to validate may have at most {most:,}"
            f" characters; this one has {len(source):,}."
        )
    wait = spend(f"validate:user:{user.pk}", settings.LOOP_VALIDATE_PER_MINUTE, window=60)
    if wait:
        raise TooManyRequests(
            f"Too many validations: at most {settings.LOOP_VALIDATE_PER_MINUTE} a minute"
            f" without the editor role. Try again in {wait} s."
        )


class RecipeOut(Schema):
    slug: str
    name: str
    description: str
    kind: str
    origin: str
    enabled: bool
    valid: bool
    edited_locally: bool
    version: int | None
    updated_at: datetime


class VersionOut(Schema):
    number: int
    author: str | None
    note: str
    sha256: str
    created_at: datetime


class ProblemsOut(Schema):
    errors: list[ProblemOut]
    warnings: list[ProblemOut]


class RecipeDetailOut(RecipeOut):
    source: str
    source_path: str
    problems: ProblemsOut
    versions: list[VersionOut]


class ValidateIn(JsonObject):
    source: Text = Field(..., max_length=1_000_000)
    project: Text = Field(
        "",
        max_length=100,
        description="The project's slug, whose providers the recipe may name. Default: the "
        "default project",
    )


class ValidationOut(Schema):
    valid: bool
    kind: str
    errors: list[ProblemOut]
    warnings: list[ProblemOut]


class RecipeCreateIn(JsonObject):
    source: Text = Field(..., max_length=1_000_000)
    slug: Text = Field("", max_length=100, description="Defaults to the recipe's name.")
    project: Text = Field(
        "",
        max_length=100,
        description="The project's slug. Default: the default project, or the one project "
        "where you may add recipes",
    )
    enabled: bool = True
    note: Text = Field("", max_length=200)


class RecipeUpdateIn(JsonObject):
    source: Text = Field(..., max_length=1_000_000)
    enabled: bool | None = None
    note: Text = Field("", max_length=200)


def recipe_row(recipe: Recipe) -> dict:
    return {
        "slug": recipe.slug,
        "name": recipe.name,
        "description": recipe.description,
        "kind": recipe.kind,
        "origin": recipe.origin,
        "enabled": recipe.enabled,
        "valid": recipe.valid,
        "edited_locally": recipe.edited_locally,
        "version": recipe.current_version.number if recipe.current_version else None,
        "updated_at": recipe.updated_at,
    }


def recipe_detail(recipe: Recipe) -> dict:
    versions = recipe.versions.select_related("author").order_by("-number")
    problems = recipe.problems or {}
    return {
        **recipe_row(recipe),
        "source": recipe.source,
        "source_path": recipe.source_path,
        "problems": {
            "errors": problems.get("errors", []),
            "warnings": problems.get("warnings", []),
        },
        "versions": [
            {
                "number": v.number,
                "author": v.author.get_username() if v.author_id else None,
                "note": v.note,
                "sha256": v.sha256,
                "created_at": v.created_at,
            }
            for v in versions
        ],
    }


def recipe_for(user, slug: str, perm: str = "recipes.view_recipe") -> Recipe:
    """The recipe `slug`, when `user` may `perm` on it: one of a project they have nothing
    in answers as one that does not exist (404, the same words); one they may only see,
    403 (`Actor.check`)."""
    recipe = Recipe.objects.select_related("current_version", "project").filter(slug=slug).first()
    if recipe is None:
        raise services.NotFound(f"No recipe '{slug}'.")
    Actor("api", user).check(perm, recipe)
    return recipe


def project_to_create_in(user, slug: str) -> Project:
    """Where a new recipe goes: the project named (404 when the caller sees nothing of it,
    403 when they may not add recipes there), else the default project when they may add
    there, else the one project where they may."""
    allowed = projects_where(user, "recipes.add_recipe")
    if slug:
        found = allowed.filter(slug=slug).first()
        if found is not None:
            return found
        if projects_where(user, "recipes.view_recipe").filter(slug=slug).exists():
            raise services.NotAllowed("Your role in this project does not allow this.")
        raise services.NotFound(f"No project '{slug}'.")
    if (default := default_among(allowed)) is not None:
        return default
    choices = list(allowed[:2])
    if len(choices) == 1:
        return choices[0]
    raise services.InputError({"project": "Name the project to create the recipe in."})


def invalid(exc: editing.SourceInvalid) -> Status:
    return Status(422, {"detail": str(exc), **problems_dict(exc.result)})


@router.get("", response={200: list[RecipeOut], **errors(403)}, summary="List recipes")
def list_recipes(request):
    require(request.auth, "recipes.view_recipe")
    recipes = Recipe.objects.visible_to(request.auth).select_related("current_version")
    return [recipe_row(r) for r in recipes]


@router.post(
    "/validate",
    response={200: ValidationOut, **errors(400, 403, 404, 413, 422, 429)},
    summary="Validate a recipe's YAML without saving it",
)
def validate(request, payload: ValidateIn):
    require(request.auth, "recipes.view_recipe")
    limit_validation(request.auth, payload.source)
    project = None
    if payload.project:
        seen = projects_where(request.auth, "recipes.view_recipe")
        project = seen.filter(slug=payload.project).first()
        if project is None:
            raise services.NotFound(f"No project '{payload.project}'.")
    result = validate_source(payload.source, project_id=project.pk if project else None)
    return {"valid": result.ok, "kind": result.kind, **problems_dict(result)}


@router.get(
    "/{slug}",
    response={200: RecipeDetailOut, **errors(403, 404, 422)},
    summary="A recipe with its source and versions",
)
def get_recipe(request, slug: Slug):
    require(request.auth, "recipes.view_recipe")
    return recipe_detail(recipe_for(request.auth, slug))


@router.post(
    "",
    response={201: RecipeDetailOut, 422: InvalidSourceOut, **errors(400, 403, 409)},
    summary="Create a recipe (editors)",
)
def create_recipe(request, payload: RecipeCreateIn):
    require(request.auth, "recipes.add_recipe")
    project = project_to_create_in(request.auth, payload.project)
    try:
        with transaction.atomic():
            recipe, result = editing.create_recipe(
                payload.source,
                slug=payload.slug,
                user=request.auth,
                note=payload.note,
                enabled=payload.enabled,
                project=project,
            )
    except editing.SourceInvalid as exc:
        return invalid(exc)
    except editing.SlugInvalid as exc:
        return Status(422, {"detail": str(exc), "errors": [], "warnings": []})
    except editing.SlugTaken as exc:
        raise services.Conflict(str(exc)) from None
    except editing.ShellNotAllowed as exc:
        return Status(403, {"detail": str(exc)})
    return Status(201, recipe_detail(recipe))


@router.put(
    "/{slug}",
    response={200: RecipeDetailOut, 422: InvalidSourceOut, **errors(400, 403, 404)},
    summary="Change a recipe's source (editors); each change is a new version",
)
def update_recipe(request, slug: Slug, payload: RecipeUpdateIn):
    require(request.auth, "recipes.change_recipe")
    recipe = recipe_for(request.auth, slug, "recipes.change_recipe")
    try:
        with transaction.atomic():
            editing.save_source(
                recipe,
                payload.source,
                user=request.auth,
                note=payload.note or "changed via the API",
            )
    except editing.SourceInvalid as exc:
        return invalid(exc)
    except editing.ShellNotAllowed as exc:
        return Status(403, {"detail": str(exc)})
    if payload.enabled is not None and payload.enabled != recipe.enabled:
        recipe.enabled = payload.enabled
        recipe.save(update_fields=["enabled", "updated_at"])
    return recipe_detail(recipe)
