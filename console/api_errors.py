"""One error shape for the whole API: `{"detail": ...}` with the status that fits."""

from __future__ import annotations

import logging

from django.db import DataError
from django.http import Http404
from ninja import Schema
from ninja.errors import AuthenticationError, ValidationError
from ninja.schema import DjangoGetter
from pydantic import model_validator

from console.auth import unauthenticated_words
from runs.errors import InputError, NotAllowed, ServiceError

log = logging.getLogger(__name__)


class JsonObject(Schema):
    """A request body: ninja's Schema reads attributes off anything, so a JSON list or
    string would quietly become an empty object; refuse it instead."""

    @model_validator(mode="before")
    @classmethod
    def must_be_an_object(cls, value):
        raw = value._obj if isinstance(value, DjangoGetter) else value
        if not isinstance(raw, dict | Schema):
            raise ValueError("the body must be a JSON object")
        return value


class ErrorOut(Schema):
    detail: str


class ProblemOut(Schema):
    path: str
    line: int | None
    column: int | None
    message: str


class InvalidSourceOut(Schema):
    detail: str
    errors: list[ProblemOut]
    warnings: list[ProblemOut]


class InvalidInputsOut(Schema):
    detail: str
    errors: dict[str, str]


class TooLarge(ServiceError):
    status = 413


class TooManyRequests(ServiceError):
    status = 429


def errors(*codes: int) -> dict:
    """Response declarations for the OpenAPI schema; 401 applies to every endpoint."""
    return dict.fromkeys({401, *codes}, ErrorOut)


SCOPE_NEEDED = {"runs.operate_run": "operate"}


def require(user, perm: str) -> None:
    if user.has_perm(perm):
        return
    token = getattr(user, "api_token", None)
    if token is not None and not token.allows(perm):
        needed = SCOPE_NEEDED.get(perm, "edit")
        raise NotAllowed(
            f"This API token's scope is '{token.scope}', which does not allow this;"
            f" it needs a token with scope '{needed}'."
        )
    raise NotAllowed("Your role does not allow this.")


def install(api) -> None:
    @api.exception_handler(InputError)
    def input_error(request, exc):
        return api.create_response(
            request, {"detail": str(exc), "errors": exc.errors}, status=exc.status
        )

    @api.exception_handler(ServiceError)
    def service_error(request, exc):
        return api.create_response(request, {"detail": str(exc)}, status=exc.status)

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request, exc):
        detail, challenge = unauthenticated_words(request.headers)
        response = api.create_response(request, {"detail": detail}, status=401)
        response["WWW-Authenticate"] = challenge
        return response

    @api.exception_handler(ValidationError)
    def invalid_request(request, exc):
        where = [
            ".".join(str(part) for part in e.get("loc", ())) + ": " + str(e.get("msg", "invalid"))
            for e in exc.errors[:5]
        ]
        return api.create_response(
            request,
            {"detail": "Invalid request: " + "; ".join(where), "errors": exc.errors},
            status=422,
        )

    @api.exception_handler(Http404)
    def not_found(request, exc):
        return api.create_response(request, {"detail": str(exc) or "Not found."}, status=404)

    @api.exception_handler(DataError)
    def refused_by_database(request, exc):
        # A value the schema allowed but the database cannot store (an out-of-range
        # number, say) is the caller's input problem, not a server fault.
        log.info("API input refused by the database: %s", exc)
        return api.create_response(
            request, {"detail": "A value is out of range or not storable."}, status=422
        )
