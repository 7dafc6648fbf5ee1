"""``AsyncProctorClient`` against the real app (lifespan, database, scoring worker) over
ASGI, on SQLite and PostgreSQL: a whole session, every error class the server can produce,
the retry rules and the token's life. Faults are injected between the client and the real
app (a lost response after the server acted, a proxy's 429/502/503), never in place of it."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from clients.sdk import (
    Accepted,
    AlreadyAnsweredError,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncProctorClient,
    AuthenticationError,
    ConflictError,
    DisciplineLeaderboard,
    EndpointSettings,
    Item,
    Leaderboard,
    ModelApi,
    ModelEndpoint,
    NotFoundError,
    NotPendingError,
    PermissionDeniedError,
    ProctorError,
    QuotaExhaustedError,
    RateLimitError,
    Role,
    ServiceUnavailableError,
    SessionClosedError,
    SessionInUseError,
    Usage,
    ValidationError,
)
from clients.sdk._version import __version__
from server.database import create_engine, unit_of_work
from server.sessions.models import Answer
from tests.clients.test_sdk_harness import (
    N_ITEMS,
    SETTLE_S,
    AsyncFaultyTransport,
    Recorder,
    model_of,
    problem_response,
    sdk_settings,
    seeded,
)
from tests.support.api import World, login, running_api
from tests.support.http_target import Target

BASE_URL = "http://proctor.test"
FINISHED = ("answered", "scored")


@pytest.fixture
async def world_db(fresh_db_url: str) -> tuple[str, World]:
    return await seeded(fresh_db_url)


@dataclass
class Api:
    """A running app and SDK clients on it, each behind its own recording transport."""

    app: FastAPI
    raw: httpx.AsyncClient
    world: World
    db_url: str
    clients: list[AsyncProctorClient] = field(default_factory=list)

    def client(
        self, role: str = "vendor", *, key: str | None = None, **options: Any
    ) -> tuple[AsyncProctorClient, Recorder]:
        transport = AsyncFaultyTransport(httpx.ASGITransport(app=self.app))
        client = AsyncProctorClient(
            BASE_URL, key or self.world.a.keys[role], transport=transport, **options
        )
        self.clients.append(client)
        return client, transport.recorder

    async def admin(self) -> dict[str, str]:
        return await login(self.raw, self.world.a.keys["admin"])


@asynccontextmanager
async def api(world_db: tuple[str, World], **overrides: Any) -> AsyncIterator[Api]:
    db_url, world = world_db
    async with running_api(sdk_settings(db_url, **overrides)) as (app, raw):
        handle = Api(app, raw, world, db_url)
        try:
            yield handle
        finally:
            for client in handle.clients:
                await client.aclose()
            await asyncio.sleep(SETTLE_S)


async def stored_usage(db_url: str, session_id: str) -> list[tuple[int, int | None, int | None]]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(
                select(Answer.position, Answer.prompt_tokens, Answer.completion_tokens)
                .where(Answer.session_id == uuid.UUID(session_id))
                .order_by(Answer.position)
            )
            return [tuple(row) for row in rows.tuples()]
    finally:
        await engine.dispose()


async def drive(client: AsyncProctorClient, session_id: str) -> list[Accepted]:
    """Answer every remaining item of the session."""
    accepted = []
    async for item in client.items(session_id):
        accepted.append(await client.submit_answer(session_id, item, "A"))
    return accepted


# --------------------------------------------------------------------------- a session


async def test_a_vendor_drives_a_session_from_registration_to_scores(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor")
        who = await client.whoami()
        assert (who.role, who.org_id, who.session_id) == (Role.VENDOR, str(a.world.a.id), None)
        model = await client.register_model(
            name="sdk-model",
            api_snapshot="2026-11-01",
            family="sdk",
            params_b=7,
            usd_per_mtok_in=0.5,
            usd_per_mtok_out=1.5,
        )
        assert (model.org_id, model.params_b, model.usd_per_mtok_in, model.usd_per_mtok_out) == (
            str(a.world.a.id),
            7,
            0.5,
            1.5,
        )
        assert await client.get_model(model.id) == model
        assert model in await client.list_models()

        session = await client.create_session(model_id=model.id)
        assert (session.state, session.n_items, session.allocated, session.done) == (
            "created",
            N_ITEMS,
            N_ITEMS,
            False,
        )
        assert session.created_at.tzinfo is not None and session.deadline_at > session.created_at
        positions = []
        async for item in client.items(session.id):
            positions.append(item.position)
            assert item.qtype and item.discipline and item.question
            accepted = await client.submit_answer(
                session.id,
                item,
                "A",
                reasoning="the first option fits",
                usage=Usage(100 + item.position, 10),
            )
            assert accepted == Accepted(
                session.id, item.position, item.item_id, accepted.submitted_at, False
            )
            assert accepted.submitted_at is not None
        assert positions == list(range(N_ITEMS))
        assert await client.next_item(session.id) is None

        done = await client.get_session(session.id)
        assert done.state in FINISHED and done.done  # (the worker may have scored it)
        assert (done.completed, done.pending, done.allocated) == (N_ITEMS, 0, 0)
        assert session.id in [s.id for s in await client.list_sessions()]
        assert await stored_usage(a.db_url, session.id) == [
            (p, 100 + p, 10) for p in range(N_ITEMS)
        ]
        progress = await client.wait_scored(session.id, timeout_s=60, poll_s=0.1)
        assert progress.complete and progress.state == "scored"
        assert (progress.answers, progress.waiting) == (N_ITEMS, 0)
        assert progress.judged == N_ITEMS
        board = await client.leaderboard()
        assert isinstance(board, Leaderboard) and board.baselines is None
        assert (board.judge, board.prompt_version) == (progress.judge, progress.prompt_version)
        rows = [row for row in board.models if row.model_id == model.id]
        # a model is ranked once it has a score (answers left for review have none)
        assert len(rows) == (1 if progress.scored else 0)
        by_discipline = await client.leaderboard(view="disciplines")
        assert isinstance(by_discipline, DisciplineLeaderboard) and by_discipline.scale == 10
        entries = {
            (block.discipline, entry.name, entry.score, entry.items)
            for block in by_discipline.disciplines
            for entry in block.models
            if entry.model_id == model.id
        }
        for row in rows:
            assert (row.name, row.family, row.sessions) == ("sdk-model", "sdk", 1)
            assert row.absolute is not None and len(row.absolute.session_values) == 1
            # staff-only fields are not sent to a vendor: the SDK reads them as None
            assert (row.organisation, row.latency, row.cost, row.contamination) == (None,) * 4
            assert row.disciplines  # the two views agree on the per-discipline scores
            assert entries == {
                (discipline, "sdk-model", score.score, score.items)
                for discipline, score in row.disciplines.items()
            }

    assert len(log.calls("POST", "/v1/auth/token")) == 1  # one token for the whole run
    assert not log.calls("POST", "/v1/auth/refresh")
    assert {e.user_agent for e in log.log} == {f"proctor-sdk/{__version__}"}


async def test_a_model_endpoint_is_set_read_checked_and_removed(
    world_db: tuple[str, World], target: Target
) -> None:
    key = "sk-sdk-endpoint-0b5e77aa1c"
    body = b'{"choices":[{"message":{"content":"OK"},"finish_reason":"stop"}]}'
    target.reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    async with api(world_db, egress_allow=["127.0.0.1"]) as a:
        vendor, log = a.client("vendor")
        model = model_of(a.world)
        wanted = EndpointSettings(
            base_url=f"http://127.0.0.1:{target.port}/v1/",
            model="served",
            stop=["###"],
            usd_per_mtok_out=4.0,
            secret_headers={"Authorization": f"Bearer {key}"},
        )
        assert key not in repr(wanted)
        endpoint = await vendor.set_endpoint(model, wanted)
        assert isinstance(endpoint, ModelEndpoint) and endpoint.api is ModelApi.CHAT
        assert (endpoint.base_url, endpoint.stop, endpoint.secret_headers) == (
            f"http://127.0.0.1:{target.port}/v1",
            ["###"],
            ["Authorization"],
        )
        assert (await vendor.get_model(model)).usd_per_mtok_out == 4.0
        assert await vendor.get_endpoint(model) == endpoint

        check = await vendor.check_endpoint(model)
        assert (check.ok, check.failure, check.reply) == (True, None, "OK")
        assert f"Bearer {key}" in target.requests[0].decode()  # sent to the model alone
        assert key not in repr(endpoint) + repr(check)
        assert [e.path for e in log.log if e.method == "POST"][-1].endswith("/endpoint/check")

        with pytest.raises(ValidationError) as invalid:
            await vendor.set_endpoint(model, EndpointSettings(base_url="file:///etc", model="m"))
        assert ["body", "base_url"] in [e["loc"] for e in invalid.value.errors]
        await vendor.delete_endpoint(model)
        with pytest.raises(NotFoundError):
            await vendor.get_endpoint(model)
        with pytest.raises(NotFoundError):
            await vendor.check_endpoint(model)
        assert target.connections == 1


async def test_items_refuses_to_spin_on_an_item_nobody_answers(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor")
        session = await client.create_session(model_id=model_of(a.world))
        with pytest.raises(RuntimeError, match="came back unanswered"):
            async for _ in client.items(session.id):
                pass
        assert len(log.calls("GET", "/next")) == 2


# --------------------------------------------------------------------------- errors


async def test_credentials_and_input_errors_map_to_their_classes(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db) as a:
        stranger, _ = a.client(key="pk_not_a_real_key")
        with pytest.raises(AuthenticationError) as bad_key:
            await stranger.whoami()
        assert (bad_key.value.status, bad_key.value.title) == (401, "Unauthorized")
        assert bad_key.value.type == "https://proctor.dev/problems/unauthorized"
        assert bad_key.value.response.status_code == 401

        vendor, _ = a.client("vendor")
        with pytest.raises(PermissionDeniedError) as sized:
            await vendor.create_session(model_id=model_of(a.world), n_items=2)
        assert type(sized.value) is PermissionDeniedError
        assert "n_items" in sized.value.detail
        with pytest.raises(PermissionDeniedError):
            await vendor.create_session(model_id=model_of(a.world), mode="replay")

        evaluator, _ = a.client("evaluator")
        with pytest.raises(ValidationError) as invalid:
            await evaluator.create_session(model_id=model_of(a.world), n_items=0)
        assert invalid.value.status == 422
        assert ["body", "n_items"] in [e["loc"] for e in invalid.value.errors]
        with pytest.raises(ValidationError):
            await evaluator.create_session(model_id="not-a-uuid")

        with pytest.raises(NotFoundError):
            await vendor.get_session(uuid.uuid4())
        with pytest.raises(NotFoundError):
            await vendor.next_item(uuid.uuid4())
        with pytest.raises(NotFoundError):  # another organisation's model
            assert a.world.b.model_id is not None
            await vendor.get_model(a.world.b.model_id)


async def test_session_errors_map_to_their_classes(world_db: tuple[str, World]) -> None:
    async with api(world_db, max_concurrent_sessions=2) as a:
        first, _ = a.client("vendor")
        second, _ = a.client("vendor")  # same key, its own token
        session = await first.create_session(model_id=model_of(a.world))
        item = await first.next_item(session.id)
        assert item is not None

        with pytest.raises(SessionInUseError) as in_use:
            await second.next_item(session.id)
        assert isinstance(in_use.value, PermissionDeniedError)
        assert in_use.value.title == "Session in use"
        with pytest.raises(SessionInUseError):
            await second.submit_answer(session.id, item, "B")

        with pytest.raises(NotPendingError):
            await first.submit_answer(session.id, replace_position(item, 1), "A")
        await first.submit_answer(session.id, item, "A")
        with pytest.raises(AlreadyAnsweredError) as twice:  # the caller's own second answer
            await first.submit_answer(session.id, item, "B")
        assert isinstance(twice.value, ConflictError) and twice.value.status == 409

        await first.create_session(model_id=model_of(a.world))
        with pytest.raises(QuotaExhaustedError) as quota:
            await first.create_session(model_id=model_of(a.world))
        assert "open sessions" in quota.value.detail

        admin = await a.admin()
        aborted = await a.raw.post(f"/v1/admin/sessions/{session.id}/abort", headers=admin)
        assert aborted.status_code == 200
        with pytest.raises(SessionClosedError):
            await first.next_item(session.id)
        assert (await first.get_session(session.id)).done


def replace_position(item: Item, position: int) -> Item:
    return dataclasses.replace(item, position=position)


async def test_rate_limits_raise_rate_limit_errors(world_db: tuple[str, World]) -> None:
    async with api(world_db, rate_limit_per_minute=5) as a:
        client, log = a.client("vendor", max_retries=0)
        with pytest.raises(RateLimitError) as limited:
            for _ in range(30):  # (a minute boundary may reset the window once)
                await client.whoami()
        assert limited.value.retry_after is not None and 0 < limited.value.retry_after <= 60
        assert len(log.calls("GET", "/v1/whoami")) >= 6

    async with api(world_db, max_sessions_per_period=1, session_period_s=3600) as a:
        client, log = a.client("evaluator")  # retries on, but an hour is not waited out
        await client.create_session(model_id=model_of(a.world), n_items=1)
        started = time.monotonic()
        with pytest.raises(RateLimitError) as quota:
            await client.create_session(model_id=model_of(a.world), n_items=1)
        assert time.monotonic() - started < 5
        assert quota.value.retry_after is not None and quota.value.retry_after > 3000
        assert [e.status for e in log.calls("POST", "/v1/sessions")] == [201, 429]


# --------------------------------------------------------------------------- retries


async def test_a_lost_answer_response_is_recognised_as_accepted_on_retry(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor")
        session = await client.create_session(model_id=model_of(a.world))
        accepted = []
        async for item in client.items(session.id):
            if item.position in (0, N_ITEMS - 1):  # the server commits, the client hears nothing
                log.add("POST", "/answers", "lose_response")
            accepted.append(await client.submit_answer(session.id, item, "A"))
        assert [x.already_answered for x in accepted] == [True] + [False] * (N_ITEMS - 2) + [True]
        assert accepted[0].submitted_at is None and accepted[0].position == 0
        statuses = [e.status for e in log.calls("POST", "/answers")]
        assert statuses == [201, 409] + [201] * (N_ITEMS - 2) + [201, 409]
        done = await client.get_session(session.id)
        assert (done.state in FINISHED, done.completed) == (True, N_ITEMS)
        assert [p for p, *_ in await stored_usage(a.db_url, session.id)] == list(range(N_ITEMS))


async def test_a_proxy_error_after_the_commit_is_recognised_too(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor")
        session = await client.create_session(model_id=model_of(a.world))
        log.add(
            "POST",
            "/answers",
            "respond_after",
            response=lambda: problem_response(502, "Bad gateway"),
        )
        item = await client.next_item(session.id)
        assert item is not None
        accepted = await client.submit_answer(session.id, item, "A")
        assert accepted.already_answered
        assert [e.status for e in log.calls("POST", "/answers")] == [201, 409]


async def test_a_503_before_the_server_is_retried_and_accepted_normally(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor")
        session = await client.create_session(model_id=model_of(a.world))
        item = await client.next_item(session.id)
        assert item is not None
        log.add(
            "POST",
            "/answers",
            "respond_instead",
            times=2,
            response=lambda: problem_response(503, "Service unavailable", retry_after="0"),
        )
        accepted = await client.submit_answer(session.id, item, "A")
        assert not accepted.already_answered and accepted.submitted_at is not None
        assert [(e.status, e.reached_server) for e in log.calls("POST", "/answers")] == [
            (503, False),
            (503, False),
            (201, True),
        ]


async def test_next_is_retried_after_a_lost_response_and_gives_the_same_item(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor")
        session = await client.create_session(model_id=model_of(a.world))
        log.add("GET", "/next", "lose_response")
        log.add("GET", "/next", "fail_before", error=httpx.ConnectError)
        item = await client.next_item(session.id)
        assert item == await client.next_item(session.id)
        assert item is not None and item.position == 0
        assert [e.status for e in log.calls("GET", "/next")] == [200, None, 200, 200]
        assert not (await client.submit_answer(session.id, item, "A")).already_answered


async def test_create_session_is_not_retried_once_the_request_may_have_arrived(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor")
        log.add("POST", "/v1/sessions", "lose_response")
        with pytest.raises(APIConnectionError) as lost:
            await client.create_session(model_id=model_of(a.world))
        assert not isinstance(lost.value, APITimeoutError)
        assert "POST /v1/sessions" in str(lost.value)
        assert [e.status for e in log.calls("POST", "/v1/sessions")] == [201]
        assert len(await client.list_sessions()) == 1  # it was created: look before reopening

        log.add("POST", "/v1/sessions", "fail_before", error=httpx.ConnectError)
        await client.create_session(model_id=model_of(a.world))
        assert [e.status for e in log.calls("POST", "/v1/sessions")] == [201, None, 201]
        assert len(await client.list_sessions()) == 2


async def test_retry_after_is_honoured_and_retries_run_out(world_db: tuple[str, World]) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor", max_retries=2)
        session = await client.create_session(model_id=model_of(a.world))
        log.add(
            "GET",
            "/next",
            "respond_instead",
            response=lambda: problem_response(429, "Too many requests", retry_after="0.6"),
        )
        started = time.monotonic()
        item = await client.next_item(session.id)
        assert item is not None and time.monotonic() - started >= 0.6
        assert [e.status for e in log.calls("GET", "/next")] == [429, 200]

        log.add(
            "GET",
            f"/sessions/{session.id}",
            "respond_instead",
            times=3,
            response=lambda: problem_response(503, "Service unavailable", retry_after="0"),
        )
        with pytest.raises(ServiceUnavailableError) as unavailable:
            await client.get_session(session.id)
        assert unavailable.value.retry_after == 0
        assert len(log.calls("GET", f"/sessions/{session.id}")) == 3  # 1 + max_retries

        log.add("GET", "/v1/whoami", "fail_before", error=httpx.ReadTimeout, times=3)
        with pytest.raises(APITimeoutError):
            await client.whoami()


# --------------------------------------------------------------------------- tokens


async def test_every_call_refreshes_when_the_margin_exceeds_the_ttl(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db, token_ttl_s=30) as a:
        client, log = a.client("vendor", refresh_margin_s=60)
        session = await client.create_session(model_id=model_of(a.world))
        accepted = await drive(client, session.id)  # no SessionInUseError: the lease follows
        assert len(accepted) == N_ITEMS
        assert (await client.get_session(session.id)).state in FINISHED
        first = log.tokens[0]
        revoked = await a.raw.get("/v1/whoami", headers={"Authorization": f"Bearer {first}"})
        assert revoked.status_code == 401

    api_calls = [e for e in log.log if not e.path.startswith("/v1/auth/")]
    assert len(log.calls("POST", "/v1/auth/token")) == 1
    assert len(log.calls("POST", "/v1/auth/refresh")) == len(api_calls) - 1
    assert all(e.status in (200, 201, 204) for e in log.log)
    used = [e.authorization for e in api_calls]
    assert len(set(used)) == len(used)  # a new token for every call


async def test_a_revoked_token_is_replaced_from_the_key(world_db: tuple[str, World]) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor")
        await client.whoami()
        await revoke(a, log.tokens[-1])
        assert (await client.whoami()).role == "vendor"
        assert [e.status for e in log.calls("GET", "/v1/whoami")] == [200, 401, 200]
        assert len(log.calls("POST", "/v1/auth/token")) == 2


async def test_a_refused_refresh_falls_back_to_the_key(world_db: tuple[str, World]) -> None:
    async with api(world_db, token_ttl_s=30) as a:
        client, log = a.client("vendor", refresh_margin_s=60)
        await client.whoami()
        await revoke(a, log.tokens[-1])
        assert (await client.whoami()).role == "vendor"
        assert [e.status for e in log.calls("POST", "/v1/auth/refresh")] == [401]
        assert [e.status for e in log.calls("POST", "/v1/auth/token")] == [200, 200]


async def revoke(a: Api, token: str) -> None:
    jti = jwt.decode(token, options={"verify_signature": False})["jti"]
    response = await a.raw.post(
        "/v1/admin/tokens/revoke", json={"jti": jti}, headers=await a.admin()
    )
    assert response.status_code == 200 and response.json()["revoked"]


async def test_concurrent_first_calls_share_one_token(world_db: tuple[str, World]) -> None:
    async with api(world_db) as a:
        client, log = a.client("vendor")
        results = await asyncio.gather(*(client.whoami() for _ in range(8)))
        assert {r["role"] for r in results} == {"vendor"}
        assert len(log.calls("POST", "/v1/auth/token")) == 1
        assert len(set(log.tokens)) == 1


async def test_neither_token_nor_key_shows_in_reprs_or_errors(
    world_db: tuple[str, World],
) -> None:
    async with api(world_db) as a:
        key = a.world.a.keys["vendor"]
        client, log = a.client("vendor", max_retries=0)
        errors: list[ProctorError] = []
        for call in (
            client.get_session(uuid.uuid4()),
            client.create_session(model_id=model_of(a.world), n_items=0),
        ):
            try:
                await call
            except ProctorError as error:
                errors.append(error)
        log.add("GET", "/v1/whoami", "fail_before", error=httpx.ConnectError)
        try:
            await client.whoami()
        except ProctorError as error:
            errors.append(error)
        assert [type(e) for e in errors] == [NotFoundError, ValidationError, APIConnectionError]
        token = log.tokens[0]
        assert len(token) > 20
        shown = [repr(client), str(client)] + [f"{e!s} {e!r} {e.args}" for e in errors]
        shown += [repr(e.response) for e in errors if isinstance(e, APIStatusError)]
        shown += [repr(e.response.request.headers) for e in errors if isinstance(e, APIStatusError)]
        for text in shown:
            assert token not in text and key not in text
