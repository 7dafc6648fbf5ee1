"""The request guard and the request bodies: hostile text, depth and size, unknown fields.

Unit tests of the pure checks (``body_problems``, ``url_problem``), then the app: every
request body in the OpenAPI document forbids unknown fields, and a few hostile requests
end to end (the fuzz test of every route and field is ``test_hostile_input.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from server.api.guard import body_problems, text_problem, url_problem
from server.app import create_app
from tests.support.api import World, login, running_api, test_settings

DEPTH = 32


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"answer": "a\\u0000b"}', "body.answer: contains a NUL"),
        (b'{"answer": "\\ud800"}', "body.answer: is not valid UTF-8 text"),
        (b'{"answer": "\\udfff x"}', "body.answer: is not valid UTF-8 text"),
        (b'{"answer": "\\ud800\\u0041"}', "body.answer: is not valid UTF-8 text"),
        (b'{"options": ["ok", "\\u0000"]}', "body.options[1]: contains a NUL"),
        (b'{"usage": {"x\\u0000": 1}}', "body.usage: a field name contains a NUL"),
        (b'{"answer": "\xff"}', "body.answer: is not valid UTF-8 text"),
        (b'{"answer": "\xed\xa0\x80"}', "body.answer: is not valid UTF-8 text"),
        (b'{"a": 1, "b": [\xff]}', "body: not valid UTF-8 (byte 15)"),
        (b"[" * 10_000 + b"]" * 10_000, f"body{'[0]' * DEPTH}: JSON nested deeper than"),
        (
            b'{"x": "[{", "u": {"k": [1, ' + b"[" * 5000 + b"]" * 5000 + b"]}}",
            "body.u.k[1]" + "[0]" * (DEPTH - 3) + ": JSON nested deeper than",
        ),
        (b"[" * (DEPTH + 1) + b"]" * (DEPTH + 1), f"nested deeper than {DEPTH} levels"),
    ],
)
def test_hostile_bodies_are_named(body: bytes, where: str) -> None:
    problems = body_problems(body, max_depth=DEPTH)
    assert problems and where in problems[0], problems


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b'{"answer": "\\ud83d\\ude00 <script>alert(1)</script>"}',  # a valid pair, markup
        b"[" * DEPTH + b"]" * DEPTH,
        b"not json at all",  # the route's own validation answers it
        b'{"n": 1' + b"0" * 5000 + b"}",  # past the int digit limit: the route says 422
    ],
)
def test_acceptable_or_not_json_bodies_pass(body: bytes) -> None:
    assert body_problems(body, max_depth=DEPTH) == []


def test_text_problem() -> None:
    assert text_problem("plain ✓ 中文 \U0001f600") is None
    assert text_problem("\x00") is not None
    assert text_problem("\udc80") is not None


def test_url_problems() -> None:
    assert url_problem({"path": "/v1/x", "query_string": b"judge=a%00b"}) is not None
    assert url_problem({"path": "/v1/\x00", "query_string": b""}) is not None
    assert url_problem({"path": "/v1/x", "query_string": b"judge=%ff%fe"}) is None


def _request_schemas(document: dict[str, Any]) -> list[str]:
    names = []
    for path in document["paths"].values():
        for operation in path.values():
            content = operation.get("requestBody", {}).get("content", {})
            for media in content.values():
                names.append(media["schema"]["$ref"].rsplit("/", 1)[-1])
    return names


def _closed(name: str, schemas: dict[str, Any], seen: set[str]) -> list[str]:
    """Schemas reachable from ``name`` that do not forbid unknown fields."""
    if name in seen:
        return []
    seen.add(name)
    schema = schemas[name]
    is_object = schema.get("type") == "object"
    open_ = [name] if is_object and schema.get("additionalProperties") is not False else []
    for ref in _refs(schema):
        open_ += _closed(ref, schemas, seen)
    return open_


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"].rsplit("/", 1)[-1]] if "$ref" in node else []
        return own + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def test_every_request_body_forbids_unknown_fields() -> None:
    document = create_app(test_settings("sqlite+aiosqlite:///:memory:")).openapi()
    bodies = _request_schemas(document)
    assert {"AnchorIn", "AnswerIn", "SessionCreate", "TokenRequest"} <= set(bodies)
    schemas = document["components"]["schemas"]
    seen: set[str] = set()
    assert [n for body in bodies for n in _closed(body, schemas, seen)] == []


async def test_hostile_requests_end_to_end(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    settings = test_settings(db_url, max_body_bytes=4096)
    async with running_api(settings) as (_, client):
        admin = await login(client, world.a.keys["admin"])
        headers = {**admin, "content-type": "application/json"}
        anchor = "/v1/admin/leaderboard/anchor"
        unknown = await client.put(anchor, json={"model_id": None, "x": 1}, headers=admin)
        assert unknown.status_code == 422 and "x" in unknown.json()["detail"]
        assert (await client.get("/v1/leaderboard/anchors", headers=admin)).json() == []
        family = {"name": "m", "api_snapshot": "v1", "family": "\ud800"}
        surrogate = await client.post(
            "/v1/models", content=json.dumps(family).encode(), headers=headers
        )
        assert surrogate.status_code == 422, surrogate.text
        assert "body.family: is not valid UTF-8 text" in surrogate.json()["detail"]
        big = await client.post("/v1/models", content=b" " * 5000, headers=headers)
        assert big.status_code == 413 and big.headers["content-type"] == "application/problem+json"
        nul = await client.get("/v1/leaderboard", params={"judge": "a\x00"}, headers=admin)
        assert nul.status_code == 400, nul.text
