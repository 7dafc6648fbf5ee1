"""The OpenAPI document: every error an operation can answer, one problem schema, bearer auth.

FastAPI documents an operation's success and a 422 shape the server never sends. Here each
operation also gets every error status it can answer, each as ``application/problem+json``
with the one ``Problem`` schema, the problem ``type`` URIs that status can carry, and the
``Retry-After`` / ``WWW-Authenticate`` headers where they are sent. An operation's statuses
are derived from what it is built of (``operation_problems``) plus what its endpoint
declares with ``@answers(...)`` (the service errors only it raises); the Schemathesis run
checks that no response carries an undocumented status or media type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel, Field

from server.api.dependencies import authenticate, get_db
from server.api.problems import PROBLEM_JSON
from server.errors import (
    BadRequest,
    ContentTooLarge,
    Forbidden,
    InternalError,
    InvalidInput,
    NotFound,
    ProctorError,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    problem_type,
)

PROBLEM_REF = "#/components/schemas/Problem"
UNUSED_SCHEMAS = ("HTTPValidationError", "ValidationError")
"""FastAPI's default 422 shapes, which the server never sends."""
ERROR_HEADERS: dict[int, dict[str, Any]] = {
    Unauthorized.status: {
        "WWW-Authenticate": {
            "description": "`Bearer`: authenticate with a bearer token.",
            "schema": {"type": "string"},
        }
    },
    TooManyRequests.status: {
        "Retry-After": {
            "description": "Seconds to wait before retrying.",
            "schema": {"type": "integer", "minimum": 1},
        }
    },
    ServiceUnavailable.status: {
        "Retry-After": {
            "description": "Seconds to wait before retrying.",
            "schema": {"type": "integer", "minimum": 1},
        }
    },
}
"""The headers an error response carries, by status."""

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


class FieldProblem(BaseModel):
    """One refused field of a 422: where it is and what is wrong (never its value)."""

    loc: list[str]
    msg: str


class Problem(BaseModel):
    """An error, as RFC 9457 problem details (``application/problem+json``)."""

    type: str = Field(description="A URI naming the kind of problem; stable, match on it.")
    title: str = Field(description="The problem type's short, human-readable summary.")
    status: int = Field(description="The HTTP status code.")
    detail: str = Field(description="What went wrong with this request.")
    instance: str = Field(description="The request's path.")
    errors: list[FieldProblem] | None = Field(
        None, description="On a 422 from validation: each refused field."
    )


def answers(*kinds: type[ProctorError]) -> Callable[[Endpoint], Endpoint]:
    """Declare the service errors an endpoint raises beyond those its parts imply
    (``operation_problems``): ``@answers(NotFound, QuotaExhausted)`` under the route
    decorator."""

    def declare(endpoint: Endpoint) -> Endpoint:
        endpoint.__proctor_problems__ = kinds  # type: ignore[attr-defined]
        return endpoint

    return declare


def operation_problems(route: APIRoute) -> set[type[ProctorError]]:
    """The errors ``route`` can answer: every request line can be refused (400) and fail
    (500); a token-checked route answers 401, 403 and 429; one that opens the database,
    503 while it is away; one with parameters or a body, 422; one with a body, 413; one
    with a path parameter, 404; plus what its endpoint declares (``answers``)."""
    kinds: set[type[ProctorError]] = {BadRequest, InternalError}
    calls = set(_calls(route.dependant))
    if authenticate in calls:
        kinds |= {Unauthorized, Forbidden, TooManyRequests}
    if get_db in calls:
        kinds.add(ServiceUnavailable)
    dependant = route.dependant
    if dependant.path_params or dependant.query_params or route.body_field is not None:
        kinds.add(InvalidInput)
    if route.body_field is not None:
        kinds.add(ContentTooLarge)
    if dependant.path_params:
        kinds.add(NotFound)
    kinds.update(getattr(route.endpoint, "__proctor_problems__", ()))
    return kinds


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for sub in dependant.dependencies:
        if sub.call is not None:
            yield sub.call
        yield from _calls(sub)


def install_openapi(app: FastAPI, *, max_session_items: int) -> None:
    """Make ``app.openapi()`` (and ``/openapi.json``, ``/docs``) the documented contract,
    stating this server's ``max_session_items``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = contract(app, max_session_items=max_session_items)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def contract(app: FastAPI, *, max_session_items: int) -> dict[str, Any]:
    """FastAPI's document of ``app`` with every operation's errors (``operation_problems``)
    and the session size this server allows."""
    document = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
        separate_input_output_schemas=False,
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name in UNUSED_SCHEMAS:
        schemas.pop(name, None)
    schemas.update(_problem_schemas())
    _state_session_limit(schemas, max_session_items)
    for context in iter_route_contexts(app.routes):  # routers included, as get_openapi
        route = context.original_route
        if isinstance(route, APIRoute) and route.include_in_schema:
            for method in route.methods or ():
                operation = document["paths"][context.path_format][method.lower()]
                _document_errors(operation, operation_problems(route))
    return document


def _state_session_limit(schemas: dict[str, Any], max_items: int) -> None:
    """``SessionCreate.n_items``'s maximum is a setting (``max_session_items``), not a
    constant of the model: the document says this server's."""
    n_items = schemas["SessionCreate"]["properties"]["n_items"]
    for branch in n_items.get("anyOf", [n_items]):
        if branch.get("type") == "integer":
            branch["maximum"] = max_items


def _problem_schemas() -> dict[str, Any]:
    schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    definitions = schema.pop("$defs", {})
    return {**definitions, "Problem": schema}


def _document_errors(operation: dict[str, Any], kinds: set[type[ProctorError]]) -> None:
    responses = operation.setdefault("responses", {})
    for status, members in sorted(_by_status(kinds).items()):
        documented = responses.get(str(status), {})
        if "content" in documented and status != InvalidInput.status:
            continue  # an error body of its own (e.g. readiness' 503)
        response: dict[str, Any] = {
            "description": documented.get("description") or _description(members),
            "content": {PROBLEM_JSON: {"schema": {"$ref": PROBLEM_REF}}},
        }
        if status in ERROR_HEADERS:
            response["headers"] = ERROR_HEADERS[status]
        responses[str(status)] = response


def _by_status(kinds: set[type[ProctorError]]) -> dict[int, list[type[ProctorError]]]:
    grouped: dict[int, list[type[ProctorError]]] = {}
    for kind in kinds:
        grouped.setdefault(kind.status, []).append(kind)
    return grouped


def _description(members: list[type[ProctorError]]) -> str:
    """One line per problem type of a status: its ``type`` URI, title and meaning."""
    lines = []
    for kind in sorted(members, key=lambda k: k.title):
        meaning = (kind.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        lines.append(f"- `{problem_type(kind.title)}` ({kind.title}): {meaning}")
    return "\n".join(lines)
