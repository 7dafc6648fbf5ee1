"""Schemathesis against the real app's OpenAPI schema, once per role, on both backends.

Every operation gets ``MAX_EXAMPLES`` generated cases per role and backend: 5, or 20 with
the thorough profile (``PROCTOR_TEST_PROFILE=thorough``, ``tests.support.profile``).

Every generated request goes to the running app in process (ASGI, lifespan included) with a
fresh bearer token of one role of organisation A (minted by the app's own codec with the
claims ``POST /v1/auth/token`` gave that role's key: ``Fuzz.headers``), and its response must

* not be a server error (``not_a_server_error``),
* carry a status and media type the document lists for the operation
  (``status_code_conformance``, ``content_type_conformance``): every error, as
  ``application/problem+json`` (``server.api.openapi``),
* conform to the documented response schema and headers (``response_schema_conformance``,
  ``response_headers_conformance``): a ``Problem`` body, ``Retry-After`` on 429 and 503,
  ``WWW-Authenticate`` on 401,
* contain no item's answer or explanation (``no_answer_leak``, below), except where an
  admin reviews items (``REVIEW_ROUTES``): there admins see answers by design, and where
  oversight reads a session's record (``RECORD_ROUTES``), whose answers are the model's.

Random UUIDs rarely name anything, so every other request that carries a session or model
id gets a real one of organisation A instead (sessions opened before fuzzing), and every
item a fuzzed ``next`` delivers is answered correctly right away, so that many items are
delivered and scanned. Each role runs on a fresh database.

The app runs with its lifespan in schemathesis' own ASGI event loop thread: entering
``schemathesis.python.asgi.get_client(app)`` starts it, and the fixture shuts it down when the
role's run ends; every case is sent through that client (``case.call_and_validate(session=)``).
The session lease is set to 1 ms because every request uses a new token (a token that drove
a session would otherwise hold it for a minute). The ``schema.parametrize()`` tests are built
from the app's OpenAPI document (``from_dict``): ``schemathesis.pytest.from_fixture`` would be
the natural fit, but schemathesis 4.32 writes ``request.node._nodeid``, which pytest 9.2 no
longer has.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import hypothesis
import pytest
import schemathesis
from fastapi import FastAPI
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import select

from bank.models import Item
from server.app import create_app
from server.auth.tokens import TokenClaims, TokenCodec
from server.database import create_engine
from tests.support.api import ROLES, World, login, open_session, seed_world, test_settings
from tests.support.database import make_database_url
from tests.support.profile import examples

MAX_EXAMPLES = examples(quick=5, thorough=20)
"""Generated cases per operation, role and backend (tests.support.profile)."""
MIN_SECRET_LENGTH = 8
DRIVE_SESSIONS = 3
DRIVE_ITEMS = 8
ABORT_SESSIONS = 2
BASE_URL = f"http://{asgi.HOST}"

REVIEW_ROUTES = ("/v1/admin/bank/items",)
"""Where an admin reviews items and so sees their answers (auditors still must not)."""
RECORD_ROUTES = ("/v1/audit/sessions/",)
"""Where oversight (admins, auditors) reads a session's record, the model's answers included:
a right answer repeats the reference answer, so the check would flag the model's words."""

# The secrets of the bank under test; read by ``no_answer_leak`` (empty outside this module's
# tests, so the globally registered check is a no-op elsewhere).
SECRETS: set[str] = set()


@schemathesis.check
def no_answer_leak(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: Any
) -> bool | None:
    """No item answer or explanation (of at least 8 characters) in a response."""
    if not SECRETS:
        return None
    hits = leaked(response.text, dict(response.headers))
    assert not hits, f"response leaks item answers/explanations: {sorted(hits)[:5]}"
    return True


def leaked(text: str, headers: dict[str, Any] | None = None) -> set[str]:
    """The secrets found in a body (raw and JSON-decoded) or header values."""
    haystacks = [text]
    with contextlib.suppress(ValueError):
        haystacks.append(json.dumps(json.loads(text), ensure_ascii=False))
    if headers:
        haystacks.append(json.dumps(headers, ensure_ascii=False, default=str))
    return {secret for secret in SECRETS for hay in haystacks if secret in hay}


@dataclass
class Fuzz:
    """What the fuzzing test needs: the app client, the role's key and real ids."""

    role: str
    backend: str
    world: World
    client: asgi.ASGIClient
    codec: TokenCodec
    drive_sessions: list[str]
    abort_sessions: list[str]
    claims: dict[str, TokenClaims] = field(default_factory=dict)
    cases: int = 0
    operations: set[str] = field(default_factory=set)
    delivered: set[str] = field(default_factory=set)
    by_status: dict[int, int] = field(default_factory=dict)
    _flip: Iterator[bool] = field(default_factory=lambda: itertools.cycle([True, False]))
    _sessions: Iterator[int] = field(default_factory=lambda: itertools.count())

    def exchange(self, role: str) -> TokenClaims:
        """``POST /v1/auth/token`` with ``role``'s key of organisation A: the claims of the
        token it returns, which ``headers`` mints again for every case."""
        key = self.world.a.keys[role]
        response = self.client.post("/v1/auth/token", json={"api_key": key})
        assert response.status_code == 200, response.text
        assert not leaked(response.text)
        claims = self.codec.verify(response.json()["access_token"])
        self.claims[role] = claims
        return claims

    def headers(self, role: str | None = None) -> dict[str, str]:
        """A fresh bearer token of ``role`` (default: this test's role) of organisation A,
        minted by the app's own codec as ``POST /v1/auth/token`` mints it for the key (new
        ``jti`` and times, same subject, organisation and role): the exchange is an HTTP
        request of its own, checked once per role and fuzzed as an operation, so repeating
        it before every case only doubled the requests."""
        role = role or self.role
        claims = self.claims.get(role) or self.exchange(role)
        token, _ = self.codec.issue(subject=claims.sub, org_id=claims.org, role=claims.role)
        return {"Authorization": f"Bearer {token}"}

    def use_real_ids(self, case: Any) -> None:
        """Every other positive case naming a session or model gets a real one of org A."""
        if case.meta is not None and case.meta.generation.mode is not GenerationMode.POSITIVE:
            return
        path_params = case.path_parameters or {}
        body = case.body if isinstance(case.body, dict) else {}
        if not ({"session_id", "model_id"} & (set(path_params) | set(body))):
            return
        if not next(self._flip):
            return
        pool = self.abort_sessions if case.path.endswith("/abort") else self.drive_sessions
        session = pool[next(self._sessions) % len(pool)]
        model = str(self.world.a.model_id)
        if "session_id" in path_params:
            case.path_parameters = {**path_params, "session_id": session}
        if "model_id" in path_params:
            case.path_parameters = {**path_params, "model_id": model}
        if body:
            replaced = dict(body)
            if isinstance(body.get("session_id"), str):
                replaced["session_id"] = session
            if isinstance(body.get("model_id"), str):
                replaced["model_id"] = model
            case.body = replaced

    def answer_delivered(self, session_id: str, response: schemathesis.Response) -> None:
        """Answer an item a fuzzed ``next`` delivered, so the next call delivers another."""
        item = response.json()
        assert set(item) <= {"position", "item_id", "question", "options", "qtype", "discipline"}
        self.delivered.add(item["item_id"])
        body = {"position": item["position"], "item_id": item["item_id"], "answer": "A"}
        posted = self.client.post(
            f"/v1/sessions/{session_id}/answers", json=body, headers=self.headers("evaluator")
        )
        assert posted.status_code in (201, 409), posted.text
        assert not leaked(posted.text)


@pytest.fixture(scope="module", params=ROLES)
def role(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
async def role_world(
    backend: str,
    role: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[str, World]]:
    """A fresh seeded database for one role's run, and the secrets of its bank.

    Every answer and explanation of at least 8 characters goes into ``SECRETS``."""
    db_url = await make_database_url(backend, request, tmp_path_factory.mktemp(f"fuzz-{role}"))
    world = await seed_world(db_url)
    engine = create_engine(db_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(select(Item.answer, Item.explanation))).all()
    finally:
        await engine.dispose()
    secrets = {text for row in rows for text in row if text and len(text) >= MIN_SECRET_LENGTH}
    assert secrets, "the seeded bank should have long answers/explanations to look for"
    SECRETS.clear()
    SECRETS.update(secrets)
    yield db_url, world
    SECRETS.clear()


@pytest.fixture(scope="module")
def fuzz(
    role_world: tuple[str, World], backend: str, role: str, request: pytest.FixtureRequest
) -> Iterator[Fuzz]:
    """The app running (lifespan included) on the role's database, with real sessions."""
    db_url, world = role_world
    redis_url = request.getfixturevalue("redis_server").url if backend == "postgres" else None
    app = create_app(test_settings(db_url, redis_url, lease_idle_s=0.001))
    try:
        with asgi.get_client(app) as client:  # starts the lifespan in schemathesis' loop
            state = Fuzz(role, backend, world, client, app.state.runtime.codec, [], [])
            evaluator = state.headers("evaluator")
            for pool, n, count in (
                (state.drive_sessions, DRIVE_ITEMS, DRIVE_SESSIONS),
                (state.abort_sessions, 1, ABORT_SESSIONS),
            ):
                for _ in range(count):
                    body = {"model_id": str(world.a.model_id), "n_items": n}
                    created = client.post("/v1/sessions", json=body, headers=evaluator)
                    assert created.status_code == 201, created.text
                    pool.append(created.json()["id"])
            yield state
            print(
                f"\nschemathesis [{backend}/{role}]: {state.cases} test cases executed "
                f"over {len(state.operations)} operations; "
                f"statuses {dict(sorted(state.by_status.items()))}; "
                f"{len(state.delivered)} items delivered by fuzzed calls"
            )
            assert state.cases > 0
    finally:
        asgi.shutdown_lifespans()


# The schema the app serves; its lifespan is not needed to build it. Calls go to the running
# app of the ``fuzz`` fixture through its client.
schema = schemathesis.openapi.from_dict(create_app(test_settings("sqlite+aiosqlite://")).openapi())


@schema.parametrize()
@hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck),
)
def test_api_conforms_and_never_leaks(case: Any, fuzz: Fuzz) -> None:
    fuzz.use_real_ids(case)
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
        response_headers_conformance,
    ]
    reviewing = fuzz.role == "admin" and case.path.startswith(REVIEW_ROUTES)
    reading_a_record = fuzz.role in ("admin", "auditor") and case.path.startswith(RECORD_ROUTES)
    if not (reviewing or reading_a_record):
        checks.append(no_answer_leak)
    response = case.call_and_validate(
        base_url=BASE_URL, session=fuzz.client, headers=fuzz.headers(), checks=checks
    )
    fuzz.cases += 1
    fuzz.operations.add(case.operation.label)
    fuzz.by_status[response.status_code] = fuzz.by_status.get(response.status_code, 0) + 1
    session_id = (case.path_parameters or {}).get("session_id")
    if case.path.endswith("/next") and response.status_code == 200 and session_id:
        fuzz.answer_delivered(session_id, response)


async def test_nul_in_text_is_rejected(api: tuple[httpx.AsyncClient, World, FastAPI]) -> None:
    client, world, _ = api
    admin = await login(client, world.a.keys["admin"])
    statuses: dict[str, int | str] = {}

    async def post(label: str, url: str, body: dict[str, Any]) -> None:
        try:
            statuses[label] = (await client.post(url, json=body, headers=admin)).status_code
        except Exception as error:  # the app's exception escapes the ASGI transport
            statuses[label] = f"500 ({type(error).__name__})"

    for name in ("name", "api_snapshot", "family", "org"):
        await post(
            f"models.{name}", "/v1/models", {"name": "m", "api_snapshot": "v", name: "a\x00b"}
        )
    sid = (await open_session(client, admin, world.a.model_id, n_items=2))["id"]
    item = (await client.get(f"/v1/sessions/{sid}/next", headers=admin)).json()
    pending = {"position": item["position"], "item_id": item["item_id"], "answer": "A"}
    for name in ("reasoning", "answer"):
        await post(f"answers.{name}", f"/v1/sessions/{sid}/answers", {**pending, name: "a\x00b"})
    assert statuses == dict.fromkeys(statuses, 422)
