"""``ProctorClient`` (blocking) against the real app served over real HTTP by uvicorn in a
thread, on SQLite and PostgreSQL: a whole session, lost responses, token renewal, errors,
threads sharing one client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from clients.sdk import (
    AlreadyAnsweredError,
    APIConnectionError,
    AuthenticationError,
    DisciplineLeaderboard,
    Leaderboard,
    PermissionDeniedError,
    ProctorClient,
    SessionInUseError,
    Usage,
)
from clients.sdk._version import __version__
from tests.clients.test_sdk_harness import (
    N_ITEMS,
    FaultyTransport,
    Recorder,
    model_of,
    problem_response,
    sdk_settings,
    seeded,
    serving,
)
from tests.support.api import World
from tests.support.ports import free_port

FINISHED = ("answered", "scored")


@pytest.fixture
async def world_db(fresh_db_url: str) -> tuple[str, World]:
    return await seeded(fresh_db_url)


@contextmanager
def clients(world_db: tuple[str, World], **overrides: Any) -> Iterator[Any]:
    """A served app; yields ``make(role="vendor", **options) -> (client, recorder)``."""
    db_url, world = world_db
    made: list[ProctorClient] = []
    with serving(sdk_settings(db_url, **overrides)) as url:

        def make(
            role: str = "vendor", *, key: str | None = None, **options: Any
        ) -> tuple[ProctorClient, Recorder]:
            transport = FaultyTransport()
            client = ProctorClient(url, key or world.a.keys[role], transport=transport, **options)
            made.append(client)
            return client, transport.recorder

        try:
            yield make
        finally:
            for client in made:
                client.close()


def test_a_session_driven_by_the_blocking_client(world_db: tuple[str, World]) -> None:
    with clients(world_db) as make:
        client, log = make()
        with client:
            session = client.create_session(model_id=model_of(world_db[1]))
            for item in client.items(session.id):
                accepted = client.submit_answer(
                    session.id, item, "B", usage=Usage(prompt_tokens=50, completion_tokens=5)
                )
                assert (accepted.position, accepted.already_answered) == (item.position, False)
            done = client.get_session(session.id)
            assert done.state in FINISHED and done.completed == N_ITEMS
            progress = client.wait_scored(session.id, timeout_s=60, poll_s=0.1)
            assert progress.complete and progress.answers == N_ITEMS
        assert [e.status for e in log.calls("POST", "/answers")] == [201] * N_ITEMS
        assert {e.user_agent for e in log.log} == {f"proctor-sdk/{__version__}"}


def test_the_leaderboard_is_typed_and_a_vendor_reads_the_public_fields_only(
    world_db: tuple[str, World],
) -> None:
    with clients(world_db) as make:
        vendor, _ = make()
        admin, _ = make("admin")
        session = vendor.create_session(model_id=model_of(world_db[1]))
        for item in vendor.items(session.id):
            vendor.submit_answer(session.id, item, "A")
        progress = vendor.wait_scored(session.id, timeout_s=60, poll_s=0.1)
        staff = admin.leaderboard(baselines=True)
        public = vendor.leaderboard()
        assert isinstance(staff, Leaderboard) and isinstance(public, Leaderboard)
        assert staff.baselines is not None and public.baselines is None
        # a model is ranked once it has a score (answers left for review have none)
        assert len(staff.models) == (1 if progress.scored else 0)
        assert [r.model_id for r in public.models] == [r.model_id for r in staff.models]
        for seen, full in zip(public.models, staff.models, strict=True):
            assert (seen.name, seen.position, seen.sessions) == (full.name, full.position, 1)
            assert (seen.organisation, seen.latency, seen.cost, seen.contamination) == (None,) * 4
            assert full.organisation and full.latency and full.cost and full.contamination
        with pytest.raises(PermissionDeniedError, match="baselines"):
            vendor.leaderboard(baselines=True)
        assert isinstance(vendor.leaderboard(view="disciplines"), DisciplineLeaderboard)


def test_lost_responses_over_real_http(world_db: tuple[str, World]) -> None:
    with clients(world_db) as make:
        client, log = make()
        log.add("POST", "/v1/sessions", "lose_response")
        with pytest.raises(APIConnectionError):
            client.create_session(model_id=model_of(world_db[1]))
        assert [e.status for e in log.calls("POST", "/v1/sessions")] == [201]
        (session,) = client.list_sessions()  # created although the response was lost

        log.add("GET", "/next", "lose_response")
        first = client.next_item(session.id)
        assert first is not None and first == client.next_item(session.id)
        log.add("POST", "/answers", "lose_response")
        assert client.submit_answer(session.id, first, "A").already_answered
        with pytest.raises(AlreadyAnsweredError):  # the caller answering again is an error
            client.submit_answer(session.id, first, "A")
        rest = [client.submit_answer(session.id, item, "A") for item in client.items(session.id)]
        assert [a.position for a in rest] == list(range(1, N_ITEMS))
        assert client.get_session(session.id).state in FINISHED


def test_the_lease_follows_refreshed_tokens(world_db: tuple[str, World]) -> None:
    with clients(world_db, token_ttl_s=30) as make:
        client, log = make(refresh_margin_s=60)
        other, _ = make()
        session = client.create_session(model_id=model_of(world_db[1]))
        for item in client.items(session.id):
            client.submit_answer(session.id, item, "A")
            with pytest.raises(SessionInUseError):  # the lease is the renewed token's
                other.next_item(session.id)
        assert client.get_session(session.id).state in FINISHED
        assert len(log.calls("POST", "/v1/auth/token")) == 1
        assert len(log.calls("POST", "/v1/auth/refresh")) >= 2 * N_ITEMS


def test_retry_after_and_bad_keys_over_real_http(world_db: tuple[str, World]) -> None:
    with clients(world_db) as make:
        client, log = make()
        log.add(
            "GET",
            "/v1/whoami",
            "respond_instead",
            response=lambda: problem_response(429, "Too many requests", retry_after="0.5"),
        )
        started = time.monotonic()
        assert client.whoami().role == "vendor"
        assert time.monotonic() - started >= 0.5
        stranger, _ = make(key="pk_wrong")
        with pytest.raises(AuthenticationError):
            stranger.list_sessions()


def test_threads_share_one_token(world_db: tuple[str, World]) -> None:
    with clients(world_db) as make:
        client, log = make()
        with ThreadPoolExecutor(8) as pool:
            roles = list(pool.map(lambda _: client.whoami().role, range(16)))
        assert set(roles) == {"vendor"}
        assert len(log.calls("POST", "/v1/auth/token")) == 1


def test_an_unreachable_server_is_a_connection_error() -> None:
    client = ProctorClient(f"http://127.0.0.1:{free_port()}", "pk_secret_key", max_retries=1)
    with client, pytest.raises(APIConnectionError) as refused:
        client.whoami()
    assert "POST /v1/auth/token" in str(refused.value) and "pk_secret_key" not in str(refused.value)
    assert "pk_secret_key" not in repr(client)
