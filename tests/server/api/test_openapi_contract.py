"""Every JSON response of the API is documented by a named schema in ``/openapi.json``.

A route returning a bare ``dict`` shows up in the OpenAPI document as ``{}`` or a bare
``{"type": "object"}``: clients then learn nothing of its shape. These tests build the app
and walk the document, so a new untyped route fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from server.app import create_app
from tests.support.api import test_settings

JSON = "application/json"
Schema = dict[str, Any]


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory: Path = tmp_path_factory.mktemp("openapi")
    app = create_app(test_settings(f"sqlite+aiosqlite:///{directory / 'proctor.db'}"))
    return app.openapi()


def successes(document: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(method, path, status, response) of every 2xx response."""
    return [
        (method, path, status, response)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for status, response in operation["responses"].items()
        if status.startswith("2")
    ]


def is_bare(schema: Schema) -> bool:
    """``{}``, or an object without properties nor typed values."""
    if not schema:
        return True
    typed_values = isinstance(schema.get("additionalProperties"), dict)
    return schema.get("type") == "object" and "properties" not in schema and not typed_values


def names_components(schema: Schema) -> bool:
    """A reference to a named component, an array of them, or a union of them."""
    if "$ref" in schema:
        return str(schema["$ref"]).startswith("#/components/schemas/")
    if schema.get("type") == "array":
        return names_components(schema["items"])
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return all(names_components(part) for part in schema[union])
    return False


def bare_parts(schema: Schema, where: str, components: dict[str, Schema]) -> list[str]:
    """Where inside ``schema`` (through references, once each) a bare object is."""
    found: list[str] = []
    seen: set[str] = set()

    def walk(node: Schema, at: str) -> None:
        if "$ref" in node:
            name = str(node["$ref"]).rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                walk(components[name], name)
            return
        if is_bare(node):
            found.append(at)
        for key, child in node.get("properties", {}).items():
            walk(child, f"{at}.{key}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{at}[]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{at}{{}}")
        for union in ("anyOf", "oneOf", "allOf"):
            for i, part in enumerate(node.get(union, [])):
                walk(part, f"{at}|{i}")

    walk(schema, where)
    return found


def test_the_document_lists_the_routes(document: dict[str, Any]) -> None:
    assert len(successes(document)) >= 15
    assert "/v1/sessions/{session_id}/scoring" in document["paths"]


def test_every_success_response_has_a_schema_that_is_not_a_bare_object(
    document: dict[str, Any],
) -> None:
    untyped = []
    for method, path, status, response in successes(document):
        content = response.get("content")
        if status == "204":
            assert not content, f"{method} {path} 204 has a body"
            continue
        if not content:
            untyped.append(f"{method.upper()} {path} {status}: no content")
            continue
        for media, body in content.items():
            if is_bare(body.get("schema", {})):
                untyped.append(f"{method.upper()} {path} {status} {media}")
    assert untyped == []


def test_every_json_response_references_named_components(document: dict[str, Any]) -> None:
    unnamed = [
        f"{method.upper()} {path} {status}"
        for method, path, status, response in successes(document)
        if JSON in response.get("content", {})
        and not names_components(response["content"][JSON]["schema"])
    ]
    assert unnamed == []


def test_no_documented_response_has_a_bare_object_inside(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    bare = [
        part
        for method, path, status, response in successes(document)
        if JSON in response.get("content", {})
        for part in bare_parts(
            response["content"][JSON]["schema"], f"{method.upper()} {path} {status}", components
        )
    ]
    assert bare == []


def test_the_adaptive_summary_and_scoring_progress_are_typed(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    session = components["SessionOut"]["properties"]
    assert session["state"] == {"$ref": "#/components/schemas/SessionState"}
    adaptive = components["AdaptiveOut"]["properties"]
    assert adaptive["policy"] == {"$ref": "#/components/schemas/AdaptivePolicy"}
    assert adaptive["bound"] == {"$ref": "#/components/schemas/AdaptiveBound"}
    assert components["ScoringOut"]["properties"]["state"] == {
        "$ref": "#/components/schemas/SessionState"
    }
    assert components["WhoAmI"]["properties"]["role"] == {"$ref": "#/components/schemas/Role"}


def test_the_checker_catches_a_bare_object() -> None:
    assert is_bare({}) and is_bare({"type": "object"})
    assert not is_bare({"type": "object", "additionalProperties": {"type": "integer"}})
    assert not names_components({"type": "object"})
    assert names_components({"type": "array", "items": {"$ref": "#/components/schemas/X"}})
    components = {"X": {"type": "object", "properties": {"extra": {}}}}
    assert bare_parts({"$ref": "#/components/schemas/X"}, "r", components) == ["X.extra"]
