"""``GET /metrics``: the figures after a scripted session, and who may scrape.

The app runs in process (``running_api``), so the counters are this test process's: each
test compares a scrape after its actions with one before. The database figures are read
at scrape time from the test's own fresh database, so they are compared absolutely.
"""

from __future__ import annotations

import time

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, Counter, generate_latest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from server.database import session_factory
from server.health.job import run_outcome
from server.health.service import RefreshOutcome
from server.observability.metrics import METRIC_NAMES, health_run, on_commit
from tests.support.api import World, running_api, test_settings
from tests.support.services import RedisServer
from tests.support.sessions import drive_session, wait_until_scored

from .scrape import METRICS_TOKEN, bearer, delta, families, parse, scrape, total, value

N_ITEMS = 6
NEXT_ROUTE = "/v1/sessions/{session_id}/next"
ANSWER_ROUTE = "/v1/sessions/{session_id}/answers"


def redis_url_for(backend: str, request: pytest.FixtureRequest) -> str | None:
    if backend != "postgres":
        return None
    redis: RedisServer = request.getfixturevalue("redis_server")
    return redis.url


async def test_scripted_session_shows_in_the_metrics(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, world = world_db
    redis_url = redis_url_for(backend, request)
    settings = test_settings(
        db_url, redis_url, metrics_token=METRICS_TOKEN, scoring_in_process=True
    )
    async with running_api(settings) as (_, client):
        before = await scrape(client)
        driven = await drive_session(client, db_url, world, n_items=N_ITEMS)
        await wait_until_scored(db_url, driven.id, within_s=60)
        after = await scrape(client)

    assert delta(before, after, "proctor_items_delivered_total") == N_ITEMS
    assert delta(before, after, "proctor_answers_total") == N_ITEMS
    assert delta(before, after, "proctor_verdicts_total") == N_ITEMS
    # every GET /next was answered 200 (N items) and then 204 once; counted by template
    assert delta(before, after, "proctor_http_requests_total", route=NEXT_ROUTE, status="200") == (
        N_ITEMS
    )
    assert delta(before, after, "proctor_http_requests_total", route=NEXT_ROUTE, status="204") == 1
    assert delta(
        before, after, "proctor_http_requests_total", route=ANSWER_ROUTE, status="201"
    ) == (N_ITEMS)
    # the histogram has its buckets, and counted the same requests
    count = "proctor_http_request_duration_seconds_count"
    assert delta(before, after, count, route=NEXT_ROUTE, method="GET") == N_ITEMS + 1
    buckets = [
        labels
        for (name, labels) in after
        if name == "proctor_http_request_duration_seconds_bucket"
        and ("route", NEXT_ROUTE) in labels
    ]
    assert len(buckets) >= 10 and any(("le", "+Inf") in b for b in buckets)
    # read from the database at scrape time
    assert value(after, "proctor_sessions", state="scored") == 1
    assert total(after, "proctor_sessions") == 1
    assert value(after, "proctor_scoring_queue_depth") == 0
    assert value(after, "proctor_scoring_oldest_job_age_seconds") == 0
    assert value(after, "proctor_db_up") == 1
    if redis_url is not None:
        assert value(after, "proctor_redis_up") == 1
    else:
        assert ("proctor_redis_up", frozenset()) not in after


async def test_queue_figures_while_jobs_wait(world_db: tuple[str, World]) -> None:
    """Without a worker the answers' jobs wait: depth and age show it."""
    db_url, world = world_db
    settings = test_settings(db_url, metrics_token=METRICS_TOKEN, scoring_in_process=False)
    async with running_api(settings) as (_, client):
        await drive_session(client, db_url, world, n_items=3)
        after = await scrape(client)
    assert value(after, "proctor_scoring_queue_depth") == 3
    assert value(after, "proctor_scoring_oldest_job_age_seconds") > 0
    assert value(after, "proctor_sessions", state="answered") == 1


async def test_every_family_is_in_the_contract(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    settings = test_settings(db_url, metrics_token=METRICS_TOKEN)
    async with running_api(settings) as (_, client):
        await drive_session(client, db_url, world, n_items=2)
        response = await client.get("/metrics", headers=bearer(METRICS_TOKEN))
    exported = {name for name in families(response.text) if name.startswith("proctor_")}
    assert exported <= METRIC_NAMES, exported - METRIC_NAMES
    for name in (
        "proctor_http_requests_total",
        "proctor_sessions",
        "proctor_items_delivered_total",
        "proctor_db_up",
        "proctor_review_queue_depth",
        "proctor_bank_flagged_items",
    ):
        assert name in exported


async def test_metrics_are_404_without_a_configured_token(world_db: tuple[str, World]) -> None:
    db_url, _ = world_db
    async with running_api(test_settings(db_url)) as (_, client):
        assert (await client.get("/metrics")).status_code == 404
        assert (await client.get("/metrics", headers=bearer(METRICS_TOKEN))).status_code == 404


async def test_metrics_need_the_token(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    settings = test_settings(db_url, metrics_token=METRICS_TOKEN)
    async with running_api(settings) as (_, client):
        assert (await client.get("/metrics")).status_code == 401
        assert (await client.get("/metrics", headers=bearer("wrong"))).status_code == 401
        wrong_scheme = {"Authorization": f"Basic {METRICS_TOKEN}"}
        assert (await client.get("/metrics", headers=wrong_scheme)).status_code == 401
        # an API key is no metrics token either
        api_key = bearer(world.a.keys["admin"])
        assert (await client.get("/metrics", headers=api_key)).status_code == 401
        assert (await client.get("/metrics", headers=bearer(METRICS_TOKEN))).status_code == 200
        schema = (await client.get("/openapi.json")).json()
    assert "/metrics" not in schema["paths"]
    assert {"/healthz", "/readyz"} <= set(schema["paths"])


async def test_unmatched_paths_are_one_label(world_db: tuple[str, World]) -> None:
    """A 404 without a route is counted as ``unmatched``, never under its raw path."""
    db_url, _ = world_db
    settings = test_settings(db_url, metrics_token=METRICS_TOKEN)
    async with running_api(settings) as (_, client):
        before = await scrape(client)
        for n in range(3):
            assert (await client.get(f"/no/such/path/{n}")).status_code == 404
        after = await scrape(client)
    assert delta(before, after, "proctor_http_requests_total", route="unmatched", status="404") == 3
    assert not any("/no/such" in str(labels) for (_, labels) in after)


async def test_counted_on_commit_only(db_engine: AsyncEngine) -> None:
    """A counter bumped with ``on_commit`` counts a committed transaction, never one rolled
    back (a failed answer is no answer)."""
    registry = CollectorRegistry()
    counter = Counter("proctor_test_on_commit", "test only", registry=registry)

    def counted() -> float | None:
        return registry.get_sample_value("proctor_test_on_commit_total")

    sessions = session_factory(db_engine)
    async with sessions() as db:
        async with db.begin():
            await db.execute(text("SELECT 1"))
            on_commit(db, counter.inc)
            on_commit(db, counter.inc)
        assert counted() == 2
        transaction = await db.begin()
        on_commit(db, counter.inc)
        await transaction.rollback()
        async with db.begin():  # a later commit does not count the rolled-back one
            await db.execute(text("SELECT 1"))
    assert counted() == 2


def test_health_runs_and_last_success() -> None:
    before = parse(generate_latest(REGISTRY).decode())
    started = time.time()
    health_run(run_outcome(None))
    assert parse(generate_latest(REGISTRY).decode())[
        ("proctor_health_last_success_timestamp_seconds", frozenset())
    ] == before.get(("proctor_health_last_success_timestamp_seconds", frozenset()), 0.0)
    health_run(run_outcome(RefreshOutcome(snapshot_id=None, new_verdicts=3, flagged=0)))
    after = parse(generate_latest(REGISTRY).decode())
    assert delta(before, after, "proctor_health_job_runs_total", outcome="failed") == 1
    assert delta(before, after, "proctor_health_job_runs_total", outcome="skipped") == 1
    assert after[("proctor_health_last_success_timestamp_seconds", frozenset())] >= started
