"""The item state machine under random sequences of next / answer / retry / abort / expire.

A hypothesis ``RuleBasedStateMachine`` drives real sessions through the HTTP API (and the
expiry sweep through the service, as the server's sweeper does) and, after every step,
checks the database against a model of what the protocol allows.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bank.models import Exposure, Item, OrgStratumExclusion, SampleItem
from server.auth.service import create_api_key
from server.database import create_engine, unit_of_work
from server.registry.models import RegisteredModel
from server.sessions.models import Answer, EvalSession
from server.sessions.service import expire_overdue
from tests.support.api import World, login, running_api, test_settings
from tests.support.factories import make_org


class Harness:
    """One event loop, one running app and one engine shared by every machine instance."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        client: httpx.AsyncClient,
        engine: AsyncEngine,
        admin: dict[str, str],
    ) -> None:
        self.loop = loop
        self.client = client
        self.engine = engine
        self.admin = admin

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)


HARNESS: Harness | None = None


class SessionMachine(RuleBasedStateMachine):
    """Model: counters of delivered and completed positions and the session state."""

    @initialize(n_items=st.integers(1, 5))
    def open_session(self, n_items: int) -> None:
        assert HARNESS is not None
        self.h = HARNESS
        self.org_id, self.headers, model_id = self.h.run(self._new_org())
        response = self.h.run(
            self.h.client.post(
                "/v1/sessions",
                json={"model_id": str(model_id), "n_items": n_items},
                headers=self.headers,
            )
        )
        assert response.status_code == 201, response.text
        self.sid = response.json()["id"]
        self.n_items = n_items
        self.delivered = 0
        self.completed = 0
        self.state = "created"
        self.items: dict[int, str] = {}

    async def _new_org(self) -> tuple[uuid.UUID, dict[str, str], uuid.UUID]:
        async with unit_of_work(self.h.engine) as db:
            org = await make_org(db)
            _, key = await create_api_key(db, org_id=org.id, role="evaluator")
            model = RegisteredModel(org_id=org.id, name="m", api_snapshot="v1")
            db.add(model)
            await db.flush()
            org_id, model_id = org.id, model.id
        return org_id, await login(self.h.client, key), model_id

    @property
    def is_open(self) -> bool:
        return self.state in ("created", "active")

    @rule()
    def next(self) -> None:
        response = self.h.run(
            self.h.client.get(f"/v1/sessions/{self.sid}/next", headers=self.headers)
        )
        if not self.is_open:
            expected = 204 if self.state == "answered" else 409
            assert response.status_code == expected, response.text
            return
        if self.delivered > self.completed:  # a retry: the same pending item
            assert response.status_code == 200
            body = response.json()
            assert body["position"] == self.completed
            assert body["item_id"] == self.items[self.completed]
            return
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["position"] == self.delivered
        self.items[self.delivered] = body["item_id"]
        self.delivered += 1
        self.state = "active"

    @precondition(lambda self: self.delivered > self.completed)
    @rule()
    def answer_pending(self) -> None:
        position = self.completed
        response = self._answer(position, self.items[position])
        if not self.is_open:
            assert response.status_code == 409
            return
        assert response.status_code == 201, response.text
        self.completed += 1
        if self.completed == self.n_items:
            self.state = "answered"

    @precondition(lambda self: self.completed > 0)
    @rule(data=st.data())
    def answer_again(self, data: st.DataObject) -> None:
        position = data.draw(st.integers(0, self.completed - 1))
        response = self._answer(position, self.items[position])
        assert response.status_code == 409
        assert "first answer stands" in response.json()["detail"]

    @rule(offset=st.integers(1, 3), random_item=st.booleans())
    def answer_out_of_turn(self, offset: int, random_item: bool) -> None:
        position = self.completed + offset
        item = (
            str(uuid.uuid4()) if random_item else self.items.get(self.completed, str(uuid.uuid4()))
        )
        assert self._answer(position, item).status_code == 409

    @precondition(lambda self: self.delivered > self.completed)
    @rule()
    def answer_wrong_item(self) -> None:
        assert self._answer(self.completed, str(uuid.uuid4())).status_code == 409

    @rule()
    def abort(self) -> None:
        response = self.h.run(
            self.h.client.post(f"/v1/admin/sessions/{self.sid}/abort", headers=self.h.admin)
        )
        if self.is_open:
            assert response.status_code == 200, response.text
            self.state = "aborted"
        else:
            assert response.status_code == 409

    @rule()
    def expire(self) -> None:
        async def sweep() -> int:
            async with unit_of_work(self.h.engine) as db:
                later = datetime.now(UTC) + timedelta(days=365)
                return await expire_overdue(db, now=later, org_id=self.org_id)

        n = self.h.run(sweep())
        assert n == (1 if self.is_open else 0)
        if self.is_open:
            self.state = "expired"

    def _answer(self, position: int, item_id: str) -> httpx.Response:
        body = {"position": position, "item_id": item_id, "answer": f"answer {position}"}
        response: httpx.Response = self.h.run(
            self.h.client.post(f"/v1/sessions/{self.sid}/answers", json=body, headers=self.headers)
        )
        return response

    @invariant()
    def database_matches_model(self) -> None:
        self.h.run(self._check())

    async def _check(self) -> None:
        sid = uuid.UUID(self.sid)
        async with unit_of_work(self.h.engine) as db:
            record = await db.get(EvalSession, sid)
            assert record is not None
            # the scoring worker runs beside the test and may have scored an answered session
            state = (
                "answered" if (record.state, self.state) == ("scored", "answered") else record.state
            )
            assert (state, record.n_delivered, record.n_completed) == (
                self.state,
                self.delivered,
                self.completed,
            )
            assert record.n_delivered - record.n_completed <= record.pending_window
            positions = (
                (await db.execute(select(Answer.position).where(Answer.session_id == sid)))
                .scalars()
                .all()
            )
            assert sorted(positions) == list(range(self.completed))
            exposures = (
                (
                    await db.execute(
                        select(Exposure.delivered_at.is_not(None), func.count())
                        .where(Exposure.session_id == sid)
                        .group_by(Exposure.delivered_at.is_not(None))
                    )
                )
                .tuples()
                .all()
            )
            counts = {bool(delivered): n for delivered, n in exposures}
            assert counts.get(True, 0) == self.delivered
            reserved = (
                self.n_items - self.delivered if self.is_open or self.state == "answered" else 0
            )
            assert counts.get(False, 0) == reserved
            # The per-stratum exclusion counters equal the active items of held families.
            held = select(Exposure.family_id).where(Exposure.org_id == self.org_id)
            expected = (
                (
                    await db.execute(
                        select(Item.stratum_id, func.count())
                        .where(Item.family_id.in_(held), Item.status == "active")
                        .group_by(Item.stratum_id)
                    )
                )
                .tuples()
                .all()
            )
            actual = (
                (
                    await db.execute(
                        select(OrgStratumExclusion.stratum_id, OrgStratumExclusion.n_items).where(
                            OrgStratumExclusion.org_id == self.org_id,
                            OrgStratumExclusion.n_items != 0,
                        )
                    )
                )
                .tuples()
                .all()
            )
            assert dict(actual) == dict(expected)
            families = (
                await db.execute(
                    select(func.count(), func.count(SampleItem.family_id.distinct())).where(
                        SampleItem.sample_id == record.sample_id
                    )
                )
            ).one()
            assert families[0] == families[1] == self.n_items


def test_session_state_machine(world_db: tuple[str, World], backend: str) -> None:
    global HARNESS
    db_url, world = world_db
    loop = asyncio.new_event_loop()

    async def start() -> tuple[Any, httpx.AsyncClient, dict[str, str]]:
        context = running_api(test_settings(db_url, max_concurrent_sessions=1000))
        app_client = await context.__aenter__()
        admin = await login(app_client[1], world.a.keys["admin"])
        return context, app_client[1], admin

    context, client, admin = loop.run_until_complete(start())
    engine = create_engine(db_url)
    HARNESS = Harness(loop, client, engine, admin)
    try:
        machine = SessionMachine.TestCase
        machine.settings = settings(
            max_examples=25 if backend == "sqlite" else 15,
            stateful_step_count=14,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        machine().runTest()
    finally:
        HARNESS = None
        loop.run_until_complete(engine.dispose())
        loop.run_until_complete(context.__aexit__(None, None, None))
        loop.close()
