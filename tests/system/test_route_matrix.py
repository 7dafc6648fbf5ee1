"""Every route of the app against an independently written access table.

The table ``INTENDED`` below is written by hand from the product rules, not derived from
``ROLE_PERMISSIONS``: a route added without an entry fails ``test_every_route_is_in_the_table``,
and a route whose guard disagrees with the table fails ``test_route_role_matrix``, which
calls every route with a token of every role of organisation A (and with none).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from server.database import unit_of_work
from server.health.service import refresh_health
from server.review.models import ReviewTask
from tests.support.api import ROLES, World, login, open_session
from tests.support.review import reviewer_key

PUBLIC = "public"
SCRAPE = "scrape token"
"""Only Prometheus's bearer token (PROCTOR_METRICS_TOKEN), never an API token of any role:
401 with one, 404 while no scrape token is configured."""
REVIEWER = "reviewer"
CALLERS = (*ROLES, REVIEWER)
"""Every role the matrix calls with: the organisation roles, admin, auditor and reviewer."""
EVERYONE = frozenset(CALLERS)
ALL = frozenset(ROLES)
"""Every role but reviewers, who reach only their own token and the review queue."""
WRITERS = frozenset({"admin", "evaluator", "vendor"})
ADMIN = frozenset({"admin"})
OVERSIGHT = frozenset({"admin", "auditor"})
ANSWER_REVIEWERS = frozenset({"admin", "evaluator", REVIEWER})
"""Roles that work the human review queue."""

DOC_ROUTES = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
UNDOCUMENTED = DOC_ROUTES | {"/metrics"}
"""Routes outside the OpenAPI schema (the metrics are Prometheus's text format)."""

INTENDED: dict[tuple[str, str], frozenset[str] | str] = {
    # the interactive documentation and schema are intentionally public
    **{(method, path): PUBLIC for path in DOC_ROUTES for method in ("GET", "HEAD")},
    # exchanging an API key for a token needs no token
    ("POST", "/v1/auth/token"): PUBLIC,
    # the probes say only ok or which check fails; the metrics need the scrape token
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): SCRAPE,
    ("GET", "/v1/whoami"): EVERYONE,
    ("POST", "/v1/auth/refresh"): EVERYONE,
    ("POST", "/v1/admin/tokens/revoke"): ADMIN,
    ("POST", "/v1/models"): WRITERS,
    ("GET", "/v1/models"): ALL,
    ("GET", "/v1/models/{model_id}"): ALL,
    # a model's endpoint: set, removed and checked by whoever writes models; read by whoever
    # sees the model (its secret headers' names only)
    ("PUT", "/v1/models/{model_id}/endpoint"): WRITERS,
    ("GET", "/v1/models/{model_id}/endpoint"): ALL,
    ("DELETE", "/v1/models/{model_id}/endpoint"): WRITERS,
    ("POST", "/v1/models/{model_id}/endpoint/check"): WRITERS,
    # runs the server drives: started, paused, resumed and cancelled by whoever opens
    # sessions; read by whoever reads them
    ("POST", "/v1/runs"): WRITERS,
    ("GET", "/v1/runs"): ALL,
    ("GET", "/v1/runs/{run_id}"): ALL,
    ("POST", "/v1/runs/{run_id}/pause"): WRITERS,
    ("POST", "/v1/runs/{run_id}/resume"): WRITERS,
    ("POST", "/v1/runs/{run_id}/cancel"): WRITERS,
    ("POST", "/v1/sessions"): WRITERS,
    ("GET", "/v1/sessions"): ALL,
    ("GET", "/v1/sessions/{session_id}"): ALL,
    ("GET", "/v1/sessions/{session_id}/next"): WRITERS,
    ("POST", "/v1/sessions/{session_id}/answers"): WRITERS,
    ("GET", "/v1/sessions/{session_id}/scoring"): ALL,
    # the sample commitment: whoever reads the session (opened only once it is scored)
    ("GET", "/v1/sessions/{session_id}/commitment"): ALL,
    ("GET", "/v1/admin/sessions"): OVERSIGHT,
    # a session's own organisation may abort it (a broken run frees its quota); admins any
    ("POST", "/v1/sessions/{session_id}/abort"): WRITERS,
    ("POST", "/v1/admin/sessions/{session_id}/abort"): ADMIN,
    ("GET", "/v1/admin/audit"): OVERSIGHT,
    # the signed checkpoints of the chained logs: auditors and admins; the public key that
    # verifies them: anyone signed in
    ("GET", "/v1/audit/checkpoints"): OVERSIGHT,
    ("GET", "/v1/audit/signing-key"): OVERSIGHT,
    # re-deriving a session's sample from its seed: auditors and admins
    ("GET", "/v1/audit/sessions/{session_id}/sample"): OVERSIGHT,
    # a session's signed bundle (its record, never the reference answers): oversight
    ("GET", "/v1/audit/sessions/{session_id}/bundle"): OVERSIGHT,
    # the leaderboard is for every role (vendors see only the public fields); only
    # admins move the anchor of relative scores
    ("GET", "/v1/leaderboard"): ALL,
    ("GET", "/v1/leaderboard/anchors"): ALL,
    ("PUT", "/v1/admin/leaderboard/anchor"): ADMIN,
    # item review: admins and auditors read the queue and histories, only admins review
    ("GET", "/v1/admin/bank/items"): OVERSIGHT,
    ("GET", "/v1/admin/bank/items/{item_id}/history"): OVERSIGHT,
    ("POST", "/v1/admin/bank/items/{item_id}/review"): ADMIN,
    # named item sets: admins save them, oversight lists them (never their members)
    ("POST", "/v1/admin/bank/item-sets"): ADMIN,
    ("GET", "/v1/admin/bank/item-sets"): OVERSIGHT,
    # bank health: snapshots are read by admins and auditors; nothing computes on a request
    ("GET", "/v1/admin/bank/health"): OVERSIGHT,
    ("GET", "/v1/admin/bank/health/history"): OVERSIGHT,
    # human review: admins and evaluators (their own organisation's) work the queue; the
    # agreement report is for oversight; vendors reach nothing of it
    ("GET", "/v1/review/tasks"): ANSWER_REVIEWERS,
    ("GET", "/v1/review/tasks/{task_id}"): ANSWER_REVIEWERS,
    ("POST", "/v1/review/tasks/{task_id}/score"): ANSWER_REVIEWERS,
    ("POST", "/v1/review/tasks/{task_id}/skip"): ANSWER_REVIEWERS,
    ("GET", "/v1/review/agreement"): OVERSIGHT,
    # judges and calibration sets: oversight reads the gate and the sets, admins freeze sets
    ("GET", "/v1/admin/judges"): OVERSIGHT,
    ("GET", "/v1/admin/judges/panel-agreement"): OVERSIGHT,
    ("GET", "/v1/admin/calibration-sets"): OVERSIGHT,
    ("POST", "/v1/admin/calibration-sets"): ADMIN,
    ("GET", "/v1/admin/calibration-sets/{set_id}/runs"): OVERSIGHT,
}


def flatten(routes: list[Any]) -> Iterator[Any]:
    """Every leaf route, descending into FastAPI's included-router wrappers."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from flatten(list(inner.routes))
        else:
            yield route


def app_routes(app: FastAPI) -> set[tuple[str, str]]:
    """The API's routes (the console's, under /console, have a matrix of their own:
    tests/server/console/test_console_access.py)."""
    return {
        (method, route.path)
        for route in flatten(list(app.routes))
        for method in route.methods
        if not route.path.startswith("/console")
    }


def test_every_route_is_in_the_table() -> None:
    from server.app import create_app
    from tests.support.api import test_settings

    app = create_app(test_settings("sqlite+aiosqlite:///unused.db"))
    routes = app_routes(app)
    missing = sorted(routes - INTENDED.keys())
    stale = sorted(INTENDED.keys() - routes)
    assert not missing, f"routes without an entry in INTENDED: {missing}"
    assert not stale, f"INTENDED names routes the app does not have: {stale}"


def test_openapi_lists_exactly_the_api_routes() -> None:
    from server.app import create_app
    from tests.support.api import test_settings

    app = create_app(test_settings("sqlite+aiosqlite:///unused.db"))
    schema = app.openapi()
    documented = {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method.upper() in {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
    }
    api = {(m, p) for (m, p) in app_routes(app) if p not in UNDOCUMENTED}
    assert api - documented == set(), "routes missing from the OpenAPI schema"
    assert documented - api == set(), "the OpenAPI schema lists routes the app lacks"
    for (method, path), allowed in INTENDED.items():
        if allowed not in (PUBLIC, SCRAPE):
            assert method.lower() in schema["paths"][path], (method, path)


@dataclass
class Call:
    url: str
    json: Any = None
    headers: dict[str, str] | None = None
    """Instead of the caller's shared token (for routes that use the token up)."""


@dataclass
class Matrix:
    client: httpx.AsyncClient
    world: World
    headers: dict[str, dict[str, str]]
    shared_session: str
    opened: list[str]
    app: FastAPI | None = None
    keys: dict[str, str] = field(default_factory=dict)
    """Organisation A's API key of every caller role (its reviewer's included)."""

    async def fresh_session(self) -> str:
        """A new 3-item session of org A opened by an evaluator (closed after use)."""
        sid = str(
            (await open_session(self.client, self.headers["evaluator"], self.world.a.model_id, 3))[
                "id"
            ]
        )
        self.opened.append(sid)
        return sid

    async def close_opened(self) -> None:
        """Abort what the matrix opened, so its items go back to org A's pool."""
        while self.opened:
            sid = self.opened.pop()
            await self.client.post(f"/v1/admin/sessions/{sid}/abort", headers=self.headers["admin"])


Prepare = Callable[[Matrix, str | None], Awaitable[Call]]


def _health(url: str) -> Prepare:
    """``url`` once a health snapshot exists (the job's step, forced, on the app's
    database: the route only reads snapshots)."""

    async def prepare(m: Matrix, role: str | None) -> Call:
        assert m.app is not None
        runtime = m.app.state.runtime
        await refresh_health(
            runtime.engine,
            judges=runtime.judging,
            population="all",
            min_new_verdicts=0,
            flag=False,
        )
        return Call(url)

    return prepare


async def _static(url: str, json: Any = None) -> Call:
    return Call(url, json)


def static(url: str, json: Any = None) -> Prepare:
    return lambda m, role: _static(url, json)


async def _token(m: Matrix, role: str | None) -> Call:
    return Call("/v1/auth/token", {"api_key": m.keys[role or "vendor"]})


async def _refresh(m: Matrix, role: str | None) -> Call:
    # a refresh revokes the token it is called with: use a fresh one, not the shared one
    fresh = await login(m.client, m.keys[role]) if role is not None else None
    return Call("/v1/auth/refresh", headers=fresh)


async def _model(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/models/{m.world.a.model_id}")


async def _register(m: Matrix, role: str | None) -> Call:
    return Call("/v1/models", {"name": f"matrix-{uuid.uuid4().hex[:8]}", "api_snapshot": "v1"})


MATRIX_ENDPOINT = {"base_url": "http://127.0.0.1:9/v1", "model": "matrix"}
"""An endpoint nothing listens on (the discard port), refused by the default egress guard."""


async def _endpoint_set(m: Matrix) -> str:
    """Organisation A's model's endpoint URL, the endpoint set (as an admin) first."""
    url = f"/v1/models/{m.world.a.model_id}/endpoint"
    put = await m.client.put(url, json=MATRIX_ENDPOINT, headers=m.headers["admin"])
    assert put.status_code == 200, put.text
    return url


async def _put_endpoint(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/models/{m.world.a.model_id}/endpoint", MATRIX_ENDPOINT)


async def _endpoint(m: Matrix, role: str | None) -> Call:
    return Call(await _endpoint_set(m))


async def _check_endpoint(m: Matrix, role: str | None) -> Call:
    return Call(await _endpoint_set(m) + "/check")


async def _start_run(m: Matrix, role: str | None) -> Call:
    await _endpoint_set(m)
    return Call("/v1/runs", {"model_id": str(m.world.a.model_id)})


async def _run_path(m: Matrix) -> str:
    """A fresh run of organisation A's model (started as an admin); its URL."""
    await _endpoint_set(m)
    body = {"model_id": str(m.world.a.model_id)}
    started = await m.client.post("/v1/runs", json=body, headers=m.headers["admin"])
    assert started.status_code == 201, started.text
    return f"/v1/runs/{started.json()['id']}"


async def _run(m: Matrix, role: str | None) -> Call:
    return Call(await _run_path(m))


async def _pause_run(m: Matrix, role: str | None) -> Call:
    return Call(await _run_path(m) + "/pause")


async def _resume_run(m: Matrix, role: str | None) -> Call:
    path = await _run_path(m)
    paused = await m.client.post(path + "/pause", headers=m.headers["admin"])
    assert paused.status_code == 200, paused.text
    return Call(path + "/resume")


async def _cancel_run(m: Matrix, role: str | None) -> Call:
    return Call(await _run_path(m) + "/cancel")


async def _create(m: Matrix, role: str | None) -> Call:
    # no n_items: vendors may not choose it, and the table says vendors may create
    return Call("/v1/sessions", {"model_id": str(m.world.a.model_id)})


async def _read(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/sessions/{m.shared_session}")


async def _scoring(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/sessions/{m.shared_session}/scoring")


async def _commitment(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/sessions/{m.shared_session}/commitment")


async def _audit_sample(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/audit/sessions/{m.shared_session}/sample")


async def _bundle(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/audit/sessions/{m.shared_session}/bundle")


async def _next(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/sessions/{await m.fresh_session()}/next")


async def _answer(m: Matrix, role: str | None) -> Call:
    sid = await m.fresh_session()
    body = {"position": 0, "item_id": str(uuid.uuid4()), "answer": "A"}
    if role is not None and role in WRITERS:
        # the caller takes the item itself (the lease is per token), then answers it
        got = await m.client.get(f"/v1/sessions/{sid}/next", headers=m.headers[role])
        assert got.status_code == 200, got.text
        body = {"position": 0, "item_id": got.json()["item_id"], "answer": "A"}
    return Call(f"/v1/sessions/{sid}/answers", body)


async def _abort(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/admin/sessions/{await m.fresh_session()}/abort")


async def _abort_own(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/sessions/{await m.fresh_session()}/abort")


async def _active_item(m: Matrix) -> str:
    """An active item of the bank (read as an admin)."""
    got = await m.client.get(
        "/v1/admin/bank/items", params={"status": "active", "limit": 1}, headers=m.headers["admin"]
    )
    assert got.status_code == 200, got.text
    return str(got.json()[0]["id"])


async def _item_history(m: Matrix, role: str | None) -> Call:
    return Call(f"/v1/admin/bank/items/{await _active_item(m)}/history")


async def _review(m: Matrix, role: str | None) -> Call:
    # a fresh active item each time: retiring it is a move every active item allows
    item = await _active_item(m)
    return Call(f"/v1/admin/bank/items/{item}/review", {"action": "retire", "note": "matrix"})


async def _save_item_set(m: Matrix, role: str | None) -> Call:
    # a new name each time: a second set of one name is refused (409)
    name = f"matrix-{uuid.uuid4().hex[:8]}"
    return Call("/v1/admin/bank/item-sets", {"name": name, "item_ids": [await _active_item(m)]})


async def _review_task(m: Matrix) -> int:
    """A new open review task of an answer of organisation A, written as scoring opens one
    (a fresh task each time: a score closes it)."""
    sid = await m.fresh_session()
    evaluator = m.headers["evaluator"]
    got = await m.client.get(f"/v1/sessions/{sid}/next", headers=evaluator)
    assert got.status_code == 200, got.text
    body = {"position": 0, "item_id": got.json()["item_id"], "answer": "A"}
    posted = await m.client.post(f"/v1/sessions/{sid}/answers", json=body, headers=evaluator)
    assert posted.status_code == 201, posted.text
    assert m.app is not None
    async with unit_of_work(m.app.state.runtime.engine) as db:
        task = ReviewTask(
            session_id=uuid.UUID(sid),
            position=0,
            reason="needs_review",
            discipline="matrix",
            required=1,
            state="open",
        )
        db.add(task)
        await db.flush()
        return task.id


def _review_task_call(suffix: str = "", json: Any = None) -> Prepare:
    async def prepare(m: Matrix, role: str | None) -> Call:
        return Call(f"/v1/review/tasks/{await _review_task(m)}{suffix}", json)

    return prepare


async def _reviewed(m: Matrix) -> None:
    """A human score in the review queue: an admin scores a fresh review task."""
    task = await _review_task(m)
    scored = await m.client.post(
        f"/v1/review/tasks/{task}/score", json={"score": 2}, headers=m.headers["admin"]
    )
    assert scored.status_code == 201, scored.text


async def _freeze_set(m: Matrix, role: str | None) -> Call:
    # a calibration set is frozen from the review queue's human scores: give it one
    await _reviewed(m)
    return Call("/v1/admin/calibration-sets", {"name": "matrix"})


async def _set_runs(m: Matrix, role: str | None) -> Call:
    await _reviewed(m)
    made = await m.client.post(
        "/v1/admin/calibration-sets", json={"name": "matrix"}, headers=m.headers["admin"]
    )
    assert made.status_code == 201, made.text
    return Call(f"/v1/admin/calibration-sets/{made.json()['id']}/runs")


PREPARE: dict[tuple[str, str], Prepare] = {
    **{(method, path): static(path) for path in DOC_ROUTES for method in ("GET", "HEAD")},
    **{("GET", path): static(path) for path in ("/healthz", "/readyz", "/metrics")},
    ("POST", "/v1/auth/token"): _token,
    ("GET", "/v1/whoami"): static("/v1/whoami"),
    ("POST", "/v1/auth/refresh"): _refresh,
    ("POST", "/v1/admin/tokens/revoke"): static(
        "/v1/admin/tokens/revoke", {"jti": uuid.uuid4().hex}
    ),
    ("POST", "/v1/models"): _register,
    ("GET", "/v1/models"): static("/v1/models"),
    ("GET", "/v1/models/{model_id}"): _model,
    ("PUT", "/v1/models/{model_id}/endpoint"): _put_endpoint,
    ("GET", "/v1/models/{model_id}/endpoint"): _endpoint,
    ("DELETE", "/v1/models/{model_id}/endpoint"): _endpoint,
    ("POST", "/v1/models/{model_id}/endpoint/check"): _check_endpoint,
    ("POST", "/v1/runs"): _start_run,
    ("GET", "/v1/runs/{run_id}"): _run,
    ("POST", "/v1/runs/{run_id}/pause"): _pause_run,
    ("POST", "/v1/runs/{run_id}/resume"): _resume_run,
    ("POST", "/v1/runs/{run_id}/cancel"): _cancel_run,
    ("POST", "/v1/sessions"): _create,
    ("GET", "/v1/sessions"): static("/v1/sessions"),
    ("GET", "/v1/runs"): static("/v1/runs"),
    ("GET", "/v1/sessions/{session_id}"): _read,
    ("GET", "/v1/sessions/{session_id}/next"): _next,
    ("POST", "/v1/sessions/{session_id}/answers"): _answer,
    ("GET", "/v1/sessions/{session_id}/scoring"): _scoring,
    ("GET", "/v1/sessions/{session_id}/commitment"): _commitment,
    ("GET", "/v1/admin/sessions"): static("/v1/admin/sessions"),
    ("POST", "/v1/sessions/{session_id}/abort"): _abort_own,
    ("POST", "/v1/admin/sessions/{session_id}/abort"): _abort,
    ("GET", "/v1/admin/audit"): static("/v1/admin/audit"),
    ("GET", "/v1/audit/checkpoints"): static("/v1/audit/checkpoints"),
    ("GET", "/v1/audit/signing-key"): static("/v1/audit/signing-key"),
    ("GET", "/v1/audit/sessions/{session_id}/sample"): _audit_sample,
    ("GET", "/v1/audit/sessions/{session_id}/bundle"): _bundle,
    ("GET", "/v1/leaderboard"): static("/v1/leaderboard"),
    ("GET", "/v1/leaderboard/anchors"): static("/v1/leaderboard/anchors"),
    ("PUT", "/v1/admin/leaderboard/anchor"): static(
        "/v1/admin/leaderboard/anchor", {"model_id": None}
    ),
    ("GET", "/v1/admin/bank/items"): static("/v1/admin/bank/items"),
    ("GET", "/v1/admin/bank/items/{item_id}/history"): _item_history,
    ("POST", "/v1/admin/bank/items/{item_id}/review"): _review,
    ("POST", "/v1/admin/bank/item-sets"): _save_item_set,
    ("GET", "/v1/admin/bank/item-sets"): static("/v1/admin/bank/item-sets"),
    ("GET", "/v1/admin/bank/health"): _health("/v1/admin/bank/health"),
    ("GET", "/v1/admin/bank/health/history"): _health("/v1/admin/bank/health/history"),
    ("GET", "/v1/review/tasks"): static("/v1/review/tasks"),
    ("GET", "/v1/review/tasks/{task_id}"): _review_task_call(),
    ("POST", "/v1/review/tasks/{task_id}/score"): _review_task_call(
        "/score", {"score": 2, "note": "matrix"}
    ),
    ("POST", "/v1/review/tasks/{task_id}/skip"): _review_task_call("/skip"),
    ("GET", "/v1/review/agreement"): static("/v1/review/agreement"),
    ("GET", "/v1/admin/judges"): static("/v1/admin/judges"),
    ("GET", "/v1/admin/judges/panel-agreement"): static("/v1/admin/judges/panel-agreement"),
    ("GET", "/v1/admin/calibration-sets"): static("/v1/admin/calibration-sets"),
    ("POST", "/v1/admin/calibration-sets"): _freeze_set,
    ("GET", "/v1/admin/calibration-sets/{set_id}/runs"): _set_runs,
}


def test_every_table_entry_can_be_exercised() -> None:
    assert PREPARE.keys() == INTENDED.keys()


def classify(allowed: frozenset[str] | str, caller: str | None, status: int) -> str | None:
    """Why ``status`` is wrong for ``caller`` (None: anonymous), or None if it is right."""
    if status >= 500:
        return "server error"
    if allowed == PUBLIC:
        return "public route refused" if status in (401, 403) else None
    if allowed == SCRAPE:
        return None if status in (401, 404) else "served to a caller without the scrape token"
    if caller is None:
        return None if status == 401 else "anonymous not refused with 401"
    if caller in allowed:
        return "allowed role refused" if status in (401, 403) else None
    return None if status == 403 else "forbidden role not refused with 403"


async def test_route_role_matrix(api: tuple[httpx.AsyncClient, World, FastAPI]) -> None:
    client, world, app = api
    routes = app_routes(app)
    assert routes == INTENDED.keys()
    keys = {
        **world.a.keys,
        REVIEWER: await reviewer_key(app.state.runtime.settings.database_url, world.a.id),
    }
    headers = {role: await login(client, keys[role]) for role in CALLERS}
    assert world.a.model_id is not None
    shared = str((await open_session(client, headers["evaluator"], world.a.model_id, 3))["id"])
    matrix = Matrix(client, world, headers, shared, [], app, keys)
    mismatches: list[str] = []
    unexercised: list[str] = []
    requests = 0
    for method, path in sorted(INTENDED):
        allowed = INTENDED[(method, path)]
        for caller in (None, *CALLERS):
            call = await PREPARE[(method, path)](matrix, caller)
            sent: dict[str, str] = {}
            if caller is not None:
                sent = call.headers if call.headers is not None else headers[caller]
            response = await client.request(method, call.url, json=call.json, headers=sent)
            requests += 1
            problem = classify(allowed, caller, response.status_code)
            if problem is not None:
                mismatches.append(
                    f"{method} {path} as {caller or 'anonymous'}: {response.status_code} "
                    f"({problem}) {response.text[:200]}"
                )
            permitted = allowed == PUBLIC or (caller is not None and caller in allowed)
            if permitted and not 200 <= response.status_code < 300:
                # not a permission failure, but then the call did not really exercise the route
                unexercised.append(f"{method} {path} as {caller}: {response.status_code}")
            if (method, path) == ("POST", "/v1/sessions") and response.status_code == 201:
                matrix.opened.append(response.json()["id"])
            await matrix.close_opened()
    print(f"\nroute matrix: {len(INTENDED)} routes covered, {requests} requests made")
    assert requests == len(INTENDED) * (len(CALLERS) + 1)
    assert mismatches == []
    assert unexercised == []


@pytest.mark.parametrize(
    ("allowed", "caller", "status", "wrong"),
    [
        (ALL, None, 401, False),
        (ALL, None, 403, True),
        (ADMIN, "vendor", 403, False),
        (ADMIN, "vendor", 404, True),
        (ADMIN, "admin", 200, False),
        (ADMIN, "admin", 403, True),
        (ADMIN, "admin", 500, True),
        (PUBLIC, None, 200, False),
        (PUBLIC, None, 401, True),
        (SCRAPE, "admin", 404, False),
        (SCRAPE, "admin", 401, False),
        (SCRAPE, "admin", 200, True),
    ],
)
def test_classify(
    allowed: frozenset[str] | str, caller: str | None, status: int, wrong: bool
) -> None:
    assert (classify(allowed, caller, status) is not None) is wrong
