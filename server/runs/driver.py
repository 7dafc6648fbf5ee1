"""Driving one slot of a run: one session, with the runner ``proctor run`` uses.

The slot's session is opened and driven through Proctor's own API, as the key that started
the run (a token the worker mints for it, with one id per slot, so a worker that takes a
slot over holds its session's lease at once), by :class:`clients.runner.runner.Runner`:
the same prompt rendering, reasoning split, usage, latency and failure handling as
``proctor run``, so the two cannot drift. The model is called through the endpoint's
client on the egress guard (``server.model_endpoints.calls``).

Every call is admitted by the run's gate: no call once the run is paused or cancelled, and
none that could take the spending past the cost cap (the call's most possible cost is
reserved on the run's row in one conditional UPDATE, so workers on several hosts share
the cap, and settled once the model has answered).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import httpx
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from clients.llm.chat import ChatResult
from clients.runner.adapters import TemplateName, get_adapter
from clients.runner.prompts import Paradigm
from clients.runner.runner import RunConfig, Runner, SessionOutcome, StopDriving
from clients.sdk import AsyncProctorClient, Session, SessionMode
from clients.sdk.types import CallFailure, ModelApi
from server.auth.permissions import Principal, Role
from server.auth.tokens import TokenCodec
from server.config import Settings
from server.database import unit_of_work
from server.model_endpoints.calls import chat_client
from server.model_endpoints.service import EndpointRecord, get_endpoint
from server.ratelimit import Counters
from server.runs.models import Run, RunSlot
from server.runs.pacing import EndpointPace
from server.runs.slots import SlotEnd, SlotWork
from server.runs.states import SlotState

MESSAGE_OVERHEAD_TOKENS = 16
"""Tokens a chat message costs besides its text (role, separators), at most."""
API_RETRIES = 8
"""Retries of a request to Proctor (429s under a busy key's rate limit included)."""
STOP_PAUSED, STOP_CANCELLED, STOP_COST_CAP = "paused", "cancelled", "cost cap reached"
IN_PROCESS_URL = "http://proctor.in-process"
"""The base URL of the app's own ASGI transport (no network is involved)."""


@dataclass(frozen=True, slots=True)
class ApiTarget:
    """Where a worker reaches Proctor's API: its URL, and in process the app's own ASGI
    transport (the embedded default)."""

    base_url: str
    transport: httpx.AsyncBaseTransport | None = None


def slot_jti(run_id: uuid.UUID, index: int) -> str:
    """The one token id of a slot (32 hex digits)."""
    return hashlib.sha256(f"proctor-run-slot:{run_id}:{index}".encode()).hexdigest()[:32]


def creator(work: SlotWork) -> Principal:
    """The principal the run acts as: the key that started it."""
    return Principal(
        subject=work.created_by,
        org_id=work.org_id,
        role=Role(work.created_role),
        jti=slot_jti(work.run_id, work.index),
        expires_at=datetime.now(UTC),
    )


def call_bound_usd(record: EndpointRecord, messages_bytes: int, n_messages: int) -> float:
    """The most one call may cost: every byte of the prompt a token (no tokenizer makes
    fewer bytes than tokens), a few tokens a message, and the endpoint's ``max_tokens``."""
    model, endpoint = record.model, record.endpoint
    prompt_tokens = messages_bytes + MESSAGE_OVERHEAD_TOKENS * n_messages
    completion_tokens = endpoint.max_tokens or 0
    price_in, price_out = model.usd_per_mtok_in or 0.0, model.usd_per_mtok_out or 0.0
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000


@dataclass
class RunGate:
    """Admits the calls of one slot (see the module docstring). ``stop`` is set by the
    worker when the run is paused or cancelled; ``stop_reason`` says which."""

    engine: AsyncEngine
    work: SlotWork
    record: EndpointRecord
    system_prompt_bytes: int
    pace: EndpointPace
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    stop_reason: str = STOP_PAUSED
    failures: Counter[str] = field(default_factory=Counter)

    async def admit(self, prompt: str) -> float:
        if self.pace.paced:
            await self.pace.wait_turn(self.stop.is_set)
        if self.stop.is_set():
            raise StopDriving(self.stop_reason)
        cap = self.work.cost_cap_usd
        if cap is None:
            return 0.0
        bound = call_bound_usd(self.record, len(prompt.encode()) + self.system_prompt_bytes, 2)
        async with unit_of_work(self.engine) as db:
            reserved = await db.execute(
                update(Run)
                .where(Run.id == self.work.run_id, Run.cost_usd + Run.reserved_usd + bound <= cap)
                .values(reserved_usd=Run.reserved_usd + bound)
            )
        if cast(Any, reserved).rowcount != 1:
            raise StopDriving(STOP_COST_CAP)
        return bound

    async def settle(self, ticket: float, result: ChatResult | None) -> None:
        prompt_tokens = result.usage.prompt_tokens if result else 0
        completion_tokens = result.usage.completion_tokens if result else 0
        cost = result.cost if result else 0.0
        if result is not None and ticket and prompt_tokens + completion_tokens == 0:
            cost = ticket  # the model reported no usage: charge the most it could cost
        await self.pace.spent(prompt_tokens + completion_tokens)
        async with unit_of_work(self.engine) as db:
            await db.execute(
                update(Run)
                .where(Run.id == self.work.run_id)
                .values(
                    reserved_usd=Run.reserved_usd - ticket,
                    cost_usd=Run.cost_usd + cost,
                    prompt_tokens=Run.prompt_tokens + prompt_tokens,
                    completion_tokens=Run.completion_tokens + completion_tokens,
                    answers=Run.answers + (1 if result is not None else 0),
                )
            )


class RunEvents:
    """The runner's events for a slot: items the model failed are counted by kind (the
    runner's transcript lines are otherwise not kept: the answers are in the database)."""

    def __init__(self, failures: Counter[str]) -> None:
        self.failures = failures
        self.refused_answers = 0

    def write(self, event: str, **fields: Any) -> None:
        if event == "item" and fields.get("failure_kind"):
            self.failures[str(fields["failure_kind"])] += 1
            self.refused_answers += 1


class SlotBook:
    """The slot's one session: known once opened, recorded on the slot before it is driven."""

    adopts_open_sessions = False

    def __init__(self, engine: AsyncEngine, work: SlotWork) -> None:
        self.engine = engine
        self.work = work

    async def known(self) -> list[str]:
        return [str(self.work.session_id)] if self.work.session_id else []

    async def opened(self, session: Session, *, adopted: bool) -> None:
        async with unit_of_work(self.engine) as db:
            await db.execute(
                update(RunSlot)
                .where(RunSlot.run_id == self.work.run_id, RunSlot.index == self.work.index)
                .values(session_id=uuid.UUID(str(session.id)))
            )


def run_config(work: SlotWork, record: EndpointRecord, settings: Settings) -> RunConfig:
    """What the runner does for this slot, from the run and the endpoint."""
    endpoint = record.endpoint
    template = endpoint.template if endpoint.api == ModelApi.COMPLETIONS else None
    return RunConfig(
        model_id=str(work.model_id),
        sessions=1,
        concurrency=1,
        paradigm=cast(Paradigm, endpoint.paradigm),
        adapter=get_adapter(endpoint.adapter),
        system_prompt=endpoint.system_prompt,
        n_items=work.n_items,
        mode=SessionMode(work.mode),
        max_tokens=endpoint.max_tokens,
        template=cast(TemplateName | None, template),
        lease_wait_s=2 * settings.lease_idle_s,
        lease_poll_s=1.0,
    )


async def drive_slot(
    work: SlotWork,
    *,
    engine: AsyncEngine,
    settings: Settings,
    codec: TokenCodec,
    api: ApiTarget,
    counters: Counters,
    gate_of: Any = None,
) -> SlotEnd:
    """Drive ``work``'s session to its end (or until its gate stops it); how it ended.
    ``gate_of(gate)`` is told the slot's gate (the worker sets its ``stop``)."""
    principal = creator(work)
    async with unit_of_work(engine) as db:
        record = await get_endpoint(db, principal=principal, model_id=work.model_id)
        db.expunge_all()

    async def mint() -> tuple[str, float]:
        token, claims = codec.issue(
            subject=work.created_by,
            org_id=work.org_id,
            role=work.created_role,
            jti=slot_jti(work.run_id, work.index),
        )
        return token, float(claims.exp - claims.iat)

    system_bytes = len((record.endpoint.system_prompt or "").encode()) + 1024
    endpoint = record.endpoint
    pace = EndpointPace(
        counters, work.model_id, endpoint.requests_per_minute, endpoint.tokens_per_minute
    )
    gate = RunGate(engine, work, record, system_bytes, pace)
    if gate_of is not None:
        gate_of(gate)
    events = RunEvents(gate.failures)
    async with (
        AsyncProctorClient(
            api.base_url, token_source=mint, transport=api.transport, max_retries=API_RETRIES
        ) as client,
        chat_client(record, settings) as model,
    ):
        runner = Runner(
            client,
            model,
            run_config(work, record, settings),
            events,
            book=SlotBook(engine, work),
            gate=gate,
        )
        summary = await runner.run()
        redact = model.redact
    if summary.already_finished:
        return SlotEnd(SlotState.DONE)
    outcome: SessionOutcome = summary.outcomes[0]
    if outcome.failure is not None:
        gate.failures[outcome.failure.value] += 1
    if outcome.stopped == STOP_COST_CAP:
        return SlotEnd(SlotState.STOPPED, stop=STOP_COST_CAP)
    if outcome.stopped is not None:
        return SlotEnd(SlotState.WAITING, stop=outcome.stopped)
    if outcome.failure is CallFailure.DEFERRED or outcome.open_refused:
        # the provider asked to wait (Retry-After), or a quota kept the session from
        # opening: the slot waits and is tried again
        return SlotEnd(SlotState.WAITING, error=redact(outcome.error or "")[:2000])
    if outcome.error is not None:
        return SlotEnd(SlotState.FAILED, error=redact(outcome.error)[:2000])
    return SlotEnd(SlotState.DONE)
