"""A running Proctor API for tests: the real app, lifespan included, on a real database.

``running_api`` starts the app (engine, audit writer, sweeper) on ``db_url`` and gives an
``httpx.AsyncClient`` talking to it in process through ASGI. ``seed_world`` fills the
database with a small bank and two organisations: org-a, the operator, with an API key per
role, so a test can log in as anyone, and org-b with the organisation roles' keys only
(evaluator, vendor; platform roles belong to the operator's organisation). ``live_server``
runs ``proctor serve`` as a real process for crash tests.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from server.app import create_app
from server.auth.permissions import PLATFORM_ROLES
from server.auth.service import create_api_key
from server.config import Settings
from server.database import create_engine, unit_of_work
from server.registry.models import RegisteredModel
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.factories import make_bank, make_org
from tests.support.ports import free_port
from tests.support.serving import serve_command, wait_ready

JWT_SECRET = "test-secret-" + "x7Qp2Lm9Zr4Tn8Vb" * 3
ROLES = ("admin", "evaluator", "vendor", "auditor")
ORG_ROLES = tuple(role for role in ROLES if role not in PLATFORM_ROLES)
"""The roles a key of a non-operator organisation may have."""


def test_settings(db_url: str, redis_url: str | None = None, **overrides: Any) -> Settings:
    """Settings for a test server on ``db_url`` with a fixed strong secret."""
    values: dict[str, Any] = {
        "database_url": db_url,
        "redis_url": redis_url,
        "jwt_secret": JWT_SECRET,
        "bank_keys": TEST_BANK_KEYS,
        "rate_limit_per_minute": 100_000,
        "rate_limit_org_per_minute": 1_000_000,
        "auth_failures_per_minute": 100_000,
        "max_concurrent_sessions": 50,
        "max_sessions_per_period": 1000,
        # runs are driven only where a test asks for it (they open sessions of the bank)
        "runs_in_process": False,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


test_settings.__test__ = False  # type: ignore[attr-defined]  # not a test, despite its name


def unique_address() -> str:
    """A client address no other test uses (IPv6 documentation prefix, a /64 of its own):
    per-address counters in the session's shared Redis then start from zero."""
    return f"2001:db8:{secrets.randbits(16):x}:{secrets.randbits(16):x}::1"


@asynccontextmanager
async def running_api(
    settings: Settings, *, address: str = "127.0.0.1"
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app with its lifespan running, and a client bound to it (connecting from
    ``address``)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=(address, 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://proctor.test") as client:
            yield app, client


@dataclass
class Org:
    id: uuid.UUID
    name: str
    keys: dict[str, str] = field(default_factory=dict)
    model_id: uuid.UUID | None = None


@dataclass
class World:
    a: Org
    b: Org


async def seed_world(
    db_url: str,
    *,
    per_cell: int = 6,
    augment: bool = True,
    qtypes: tuple[str, ...] = ("multiple_choice", "short_answer"),
    disciplines: int = 3,
    subdisciplines: int = 2,
) -> World:
    """A bank (``disciplines`` × ``qtypes`` × ``subdisciplines`` × ``per_cell`` items,
    augmented) and two organisations with one registered model each: ``a`` is the operator
    and has a key per role (``ROLES``), ``b`` has keys of ``ORG_ROLES`` only."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            await make_bank(
                db,
                disciplines=disciplines,
                qtypes=qtypes,
                subdisciplines=subdisciplines,
                per_cell=per_cell,
                augment=augment,
            )
        orgs = []
        async with unit_of_work(engine) as db:
            for name, operator, roles in (("org-a", True, ROLES), ("org-b", False, ORG_ROLES)):
                org = await make_org(db, name, operator=operator)
                record = Org(org.id, name)
                for role in roles:
                    _, record.keys[role] = await create_api_key(db, org_id=org.id, role=role)
                model = RegisteredModel(org_id=org.id, name=f"model-{name}", api_snapshot="v1")
                db.add(model)
                await db.flush()
                record.model_id = model.id
                orgs.append(record)
        return World(*orgs)
    finally:
        await engine.dispose()


async def login(
    client: httpx.AsyncClient, key: str, session_id: uuid.UUID | str | None = None
) -> dict[str, str]:
    """Authorization headers for a fresh token of ``key``."""
    body: dict[str, Any] = {"api_key": key}
    if session_id is not None:
        body["session_id"] = str(session_id)
    response = await client.post("/v1/auth/token", json=body)
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


async def open_session(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    model_id: uuid.UUID,
    n_items: int | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model_id": str(model_id)}
    if n_items is not None:
        body["n_items"] = n_items
    response = await client.post("/v1/sessions", json=body, headers=headers)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def evaluator_session(
    client: httpx.AsyncClient, org: Org, n_items: int | None = None
) -> tuple[dict[str, str], str]:
    """Log in as ``org``'s evaluator and open a session on ``org``'s model: the evaluator's
    headers and the session id."""
    assert org.model_id is not None
    headers = await login(client, org.keys["evaluator"])
    session = await open_session(client, headers, org.model_id, n_items=n_items)
    return headers, str(session["id"])


@dataclass
class LiveServer:
    """A ``proctor serve`` process; ``kill()`` sends SIGKILL, ``start()`` starts it again."""

    env: dict[str, str]
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                serve_command(self.port), env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        wait_ready(self.url, self.process, self.log, within=timeout)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def live_server(settings_env: dict[str, str], workdir: Path) -> Iterator[LiveServer]:
    """``proctor serve`` on a free port with ``PROCTOR_*`` variables ``settings_env``; the
    tail of its log is printed if the block fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(settings_env)
    env.setdefault("PROCTOR_BANK_KEYS", TEST_BANK_KEYS)
    server = LiveServer(env=env, port=free_port(), log=workdir / "serve.log")
    server.start()
    try:
        yield server
    except BaseException:
        print(f"--- {server.log} (tail) ---\n{server.log.read_text()[-4000:]}")
        raise
    finally:
        server.stop()
