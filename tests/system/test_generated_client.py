"""A client generated from the live ``/openapi.json`` by software we did not write
(openapi-python-client) drives a whole vendor session against the real app over real HTTP,
and receives every error the document promises as a typed ``Problem``.

The generator runs once per module on the document the app serves; it must finish without a
warning, so no operation or schema was dropped (the recursive rule union once dropped
``POST /v1/admin/bank/item-sets``). The generated client is built with
``raise_on_unexpected_status=True``: a status the document does not list raises
``UnexpectedStatus`` instead of quietly returning ``None``.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from server.app import create_app
from server.errors import problem_type
from tests.clients.test_sdk_harness import sdk_settings, seeded, serving
from tests.support.api import World, test_settings
from tests.support.tools import tool_bin

GENERATOR = "openapi-python-client==0.29.1"
"""Pinned: the contract is checked against one known generator."""
PACKAGE = "proctor_generated"
AUTH_FAILURES_PER_MINUTE = 3
"""Low, so that the test can reach the 429 of too many refused tokens."""
GENERATOR_CONFIG = {
    # the bundle is JSON Lines; the generator knows no such type, so it is handed over as
    # bytes (``File``), the way a user of the generator configures it (docs/api.md)
    "content_type_overrides": {"application/x-ndjson": "application/octet-stream"},
}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The package openapi-python-client generates from the app's document (the generator
    is installed in a venv of its own on first use: ``tests.support.tools``)."""
    where = tmp_path_factory.mktemp("generated")
    document = create_app(test_settings("sqlite+aiosqlite:///unused.db")).openapi()
    (where / "openapi.json").write_text(json.dumps(document))
    (where / "config.json").write_text(json.dumps(GENERATOR_CONFIG))
    generator = tool_bin(GENERATOR, "openapi-python-client")
    bin_dir = generator.parent  # its own ruff formats what it writes
    done = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            str(where / "openapi.json"),
            "--output-path",
            str(where / PACKAGE),
            "--meta",
            "none",
            "--config",
            str(where / "config.json"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "warning" not in output.lower(), output
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(where))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def module(api: ModuleType, path: str) -> Any:
    """A module of the generated package: ``module(api, "api.sessions.sessions_next")``."""
    return importlib.import_module(f"{api.__name__}.{path}")


@pytest.fixture
async def world_db(fresh_db_url: str) -> tuple[str, World]:
    return await seeded(fresh_db_url)


@pytest.fixture
def url(world_db: tuple[str, World]) -> Iterator[str]:
    db_url, _ = world_db
    settings = sdk_settings(db_url, auth_failures_per_minute=AUTH_FAILURES_PER_MINUTE)
    with serving(settings) as served:
        yield served


def log_in(api: ModuleType, url: str, key: str) -> Any:
    """An ``AuthenticatedClient`` for a token of ``key``, got through the generated client."""
    anonymous = api.Client(base_url=url, raise_on_unexpected_status=True)
    body = module(api, "models").TokenRequest(api_key=key)
    token = module(api, "api.auth.auth_token").sync(client=anonymous, body=body)
    assert isinstance(token, module(api, "models").TokenResponse), token
    return api.AuthenticatedClient(
        base_url=url, token=token.access_token, raise_on_unexpected_status=True
    )


def assert_problem(api: ModuleType, result: Any, *, status: int, title: str) -> Any:
    """``result`` is the typed problem of ``status`` with ``title``'s type URI."""
    problem_cls = module(api, "models").Problem
    assert isinstance(result, problem_cls), result
    assert (result.status, result.title) == (status, title), result
    assert result.type_ == problem_type(title)
    return result


def test_the_generated_client_drives_a_whole_vendor_session(
    api: ModuleType, url: str, world_db: tuple[str, World]
) -> None:
    _, world = world_db
    models = module(api, "models")
    sessions = "api.sessions.sessions_"
    vendor = log_in(api, url, world.a.keys["vendor"])
    created = module(api, sessions + "create").sync(
        client=vendor, body=models.SessionCreate(model_id=uuid.UUID(str(world.a.model_id)))
    )
    assert isinstance(created, models.SessionOut), created
    answered = 0
    while isinstance(
        item := module(api, sessions + "next").sync(session_id=created.id, client=vendor),
        models.ItemOut,
    ):
        body = models.AnswerIn(position=item.position, item_id=item.item_id, answer="A")
        accepted = module(api, sessions + "answer").sync(
            session_id=created.id, client=vendor, body=body
        )
        assert isinstance(accepted, models.AnswerAccepted), accepted
        answered += 1
    assert item is None  # 204: every item delivered and answered, told apart from errors
    assert answered == created.n_items
    read = module(api, sessions + "get").sync(session_id=created.id, client=vendor)
    assert isinstance(read, models.SessionOut) and read.n_items == answered


def test_every_documented_error_arrives_as_a_typed_problem(
    api: ModuleType, url: str, world_db: tuple[str, World]
) -> None:
    _, world = world_db
    models = module(api, "models")
    vendor = log_in(api, url, world.a.keys["vendor"])
    create = module(api, "api.sessions.sessions_create")
    next_item = module(api, "api.sessions.sessions_next")
    answer = module(api, "api.sessions.sessions_answer")
    model_id = uuid.UUID(str(world.a.model_id))

    # 422: a field refused by validation, each field named (the old HTTPValidationError
    # shape made the generated parser raise ValueError here)
    refused = create.sync(client=vendor, body=models.SessionCreate(model_id=model_id, n_items=0))
    problem = assert_problem(api, refused, status=422, title="Invalid input")
    assert problem.errors and problem.errors[0].loc[-1] == "n_items"

    # 403: a vendor on an admin route; 404: no such session
    listed = module(api, "api.sessions.sessions_list_all").sync(client=vendor)
    assert_problem(api, listed, status=403, title="Forbidden")
    missing = module(api, "api.sessions.sessions_get").sync(session_id=uuid.uuid4(), client=vendor)
    assert_problem(api, missing, status=404, title="Not found")

    # 409: the first answer stands
    session = create.sync(client=vendor, body=models.SessionCreate(model_id=model_id))
    assert isinstance(session, models.SessionOut), session
    item = next_item.sync(session_id=session.id, client=vendor)
    assert isinstance(item, models.ItemOut), item
    body = models.AnswerIn(position=item.position, item_id=item.item_id, answer="A")
    assert isinstance(
        answer.sync(session_id=session.id, client=vendor, body=body), models.AnswerAccepted
    )
    again = answer.sync(session_id=session.id, client=vendor, body=body)
    assert_problem(api, again, status=409, title="Already answered")

    # 401 with WWW-Authenticate: a loop on ``next`` stops on a typed error, not as if done
    expired = api.AuthenticatedClient(
        base_url=url, token="not-a-token", raise_on_unexpected_status=True
    )
    refused_next = next_item.sync_detailed(session_id=session.id, client=expired)
    assert_problem(api, refused_next.parsed, status=401, title="Unauthorized")
    assert refused_next.headers["www-authenticate"] == "Bearer"

    # 429 with Retry-After: too many refused tokens from this address
    for _ in range(AUTH_FAILURES_PER_MINUTE):
        next_item.sync_detailed(session_id=session.id, client=expired)
    throttled = next_item.sync_detailed(session_id=session.id, client=expired)
    assert_problem(api, throttled.parsed, status=429, title="Too many requests")
    assert int(throttled.headers["retry-after"]) >= 1


def test_operations_the_generator_once_dropped_or_left_untyped(
    api: ModuleType, url: str, world_db: tuple[str, World]
) -> None:
    """The item-set route (dropped for its recursive rule type) and the bundle (its JSON
    Lines and its 404 undocumented) work from the generated client."""
    _, world = world_db
    models = module(api, "models")
    admin = log_in(api, url, world.a.keys["admin"])
    saved = module(api, "api.bank.bank_save_item_set").sync(
        client=admin, body=models.ItemSetIn(name="generated", item_ids=[uuid.uuid4()])
    )
    assert_problem(api, saved, status=422, title="Invalid input")  # no such item

    vendor = log_in(api, url, world.a.keys["vendor"])
    session = module(api, "api.sessions.sessions_create").sync(
        client=vendor, body=models.SessionCreate(model_id=uuid.UUID(str(world.a.model_id)))
    )
    assert isinstance(session, models.SessionOut), session
    auditor = log_in(api, url, world.a.keys["auditor"])
    bundle = module(api, "api.audit.audit_bundle")
    lines = bundle.sync(session_id=session.id, client=auditor)
    assert isinstance(lines, bytes), lines
    header = json.loads(lines.splitlines()[0])
    assert header["type"] == "header"
    assert_problem(
        api, bundle.sync(session_id=uuid.uuid4(), client=auditor), status=404, title="Not found"
    )


def test_operation_ids_and_schema_names_are_short_and_stable(api: ModuleType) -> None:
    """Every operation has a ``tag.verb`` id and every schema a clean name, so the generated
    modules read ``api/sessions/sessions_next.py`` and ``models/item_out.py``."""
    document = create_app(test_settings("sqlite+aiosqlite:///unused.db")).openapi()
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    for operation_id in ids:
        group, _, name = operation_id.partition(".")
        assert group.isidentifier() and name.isidentifier(), operation_id
    for name in document["components"]["schemas"]:
        assert name.isidentifier() and "V1" not in name, name
    assert "securitySchemes" in document["components"]
    # the session size the server allows is the setting's, not a constant of the model
    n_items = document["components"]["schemas"]["SessionCreate"]["properties"]["n_items"]
    maxima = [b["maximum"] for b in n_items["anyOf"] if b.get("type") == "integer"]
    assert maxima == [test_settings("sqlite+aiosqlite:///unused.db").max_session_items]
    bundle = document["paths"]["/v1/audit/sessions/{session_id}/bundle"]["get"]["responses"]
    assert "application/x-ndjson" in bundle["200"]["content"]
    assert "application/problem+json" in bundle["404"]["content"]
    generated = {p.stem for p in Path(api.__file__).parent.joinpath("models").glob("*.py")}
    assert not {name for name in generated if "_v1_" in name or name.endswith("_get_view")}
    assert {"problem", "field_problem", "item_out"} <= generated
