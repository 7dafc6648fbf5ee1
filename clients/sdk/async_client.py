"""``AsyncProctorClient``: the asyncio client (httpx.AsyncClient underneath); the same
API as :class:`clients.sdk.client.ProctorClient`, awaited."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Literal, Self, TypeVar, overload

import httpx

from clients.sdk import _core
from clients.sdk._core import AdaptiveChoice, IdLike, LeaderboardView
from clients.sdk.errors import AuthenticationError, ProctorError
from clients.sdk.types import (
    Accepted,
    CommitmentReveal,
    DisciplineLeaderboard,
    EndpointCheck,
    EndpointSettings,
    FinishReason,
    Identity,
    Item,
    Leaderboard,
    Model,
    ModelEndpoint,
    Run,
    RunState,
    ScoringProgress,
    Session,
    SessionMode,
    Usage,
)

T = TypeVar("T")
TokenSource = Callable[[], Awaitable[tuple[str, float]]]
"""Gives a bearer token and its lifetime in seconds (a client that mints its own)."""

__all__ = ["AsyncProctorClient"]


class AsyncProctorClient:
    """An asyncio client of the Proctor API.

    ::

        async with AsyncProctorClient("https://proctor.example", api_key="pk_...") as client:
            session = await client.create_session(model_id=model.id)
            async for item in client.items(session.id):
                await client.submit_answer(session.id, item, await ask_my_model(item))

    The API key is exchanged for a bearer token on first use; the token is renewed with
    ``/v1/auth/refresh`` when fewer than ``refresh_margin_s`` seconds remain (which keeps
    the lease of the sessions it drives) and replaced from the key only if it was refused
    (a replaced token has lost those leases: the sessions answer ``SessionInUseError``
    until the server's ``PROCTOR_LEASE_IDLE_S`` has passed).
    Calls are retried ``max_retries`` times where that is safe (see
    :mod:`clients.sdk._core`). ``transport`` replaces httpx's network transport (tests,
    proxies). Task-safe: one token per client, renewed under a lock (single-flight).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        *,
        timeout: float | httpx.Timeout = 30.0,
        max_retries: int = 4,
        transport: httpx.AsyncBaseTransport | None = None,
        refresh_margin_s: float = 60.0,
        token_source: TokenSource | None = None,
    ) -> None:
        """``token_source``, instead of an API key: called for a token whenever one is
        needed (at first, when it is due, after a 401); it returns the token and its
        lifetime in seconds. The token is then never refreshed through the API."""
        _core.validate_options(max_retries, refresh_margin_s)
        if not api_key and token_source is None:
            raise ValueError("give an api_key or a token_source")
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self._api_key = api_key
        self._token_source = token_source
        self._tokens = _core.TokenState(refresh_margin_s)
        self._lock = asyncio.Lock()
        self._submissions: Counter[str] = Counter()
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            headers=_core.DEFAULT_HEADERS,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections (and an injected transport)."""
        await self._http.aclose()

    # ------------------------------------------------------------------ plumbing

    async def _run(self, call: _core.Call[T]) -> T:
        attempts = _core.Attempts(call, self.max_retries)
        while True:
            token = await self._token() if call.authenticated else None
            request = _core.build_request(self._http, call, token)
            try:
                response = await self._http.send(request)
            except httpx.RequestError as error:
                step: _core.Done[T] | _core.Retry = attempts.after_error(error)
            else:
                step = attempts.after_response(response)
            if isinstance(step, _core.Done):
                return step.value
            if step.reauthenticate:
                assert token is not None
                attempts.exchanged = await self._replace(token)
            if step.delay > 0:
                await asyncio.sleep(step.delay)

    async def _token(self) -> str:
        """The current token; exchanged or renewed first if needed."""
        async with self._lock:
            tokens = self._tokens
            if tokens.token is None or (tokens.due() and self._token_source is not None):
                await self._exchange()
            elif tokens.due():
                await self._refresh(tokens.token)
            assert tokens.token is not None
            return tokens.token

    async def _exchange(self) -> None:
        started = time.monotonic()
        if self._token_source is not None:
            self._tokens.store(await self._token_source(), started)
            return
        self._tokens.store(await self._run(_core.exchange(self._api_key)), started)

    async def _refresh(self, token: str) -> None:
        started = time.monotonic()
        try:
            grant = await self._run(_core.refresh(token))
        except AuthenticationError:
            await self._exchange()  # revoked or expired: only the key can help
            return
        except ProctorError:
            if self._tokens.remaining() > 0:
                return  # keep the valid token; the renewal is tried again on the next call
            raise
        self._tokens.store(grant, started)

    async def _replace(self, refused: str) -> bool:
        """After a 401 for ``refused``: a new token from the key, unless another task has
        renewed it meanwhile. True if the key was exchanged."""
        async with self._lock:
            if self._tokens.token != refused:
                return False
            self._tokens.clear()
            await self._exchange()
            return True

    # ------------------------------------------------------------------ API

    async def whoami(self) -> Identity:
        """The token's subject, organisation, role (and session scope, if any)."""
        return await self._run(_core.whoami())

    async def register_model(
        self,
        *,
        name: str,
        api_snapshot: str,
        family: str | None = None,
        params_b: float | None = None,
        usd_per_mtok_in: float | None = None,
        usd_per_mtok_out: float | None = None,
    ) -> Model:
        """Register a model pinned to ``api_snapshot`` (prices in USD per million tokens
        feed the leaderboard's cost figures). Not retried once the request may have reached
        the server."""
        return await self._run(
            _core.register_model(
                name=name,
                api_snapshot=api_snapshot,
                family=family,
                params_b=params_b,
                usd_per_mtok_in=usd_per_mtok_in,
                usd_per_mtok_out=usd_per_mtok_out,
            )
        )

    async def list_models(self) -> list[Model]:
        return await self._run(_core.list_models())

    async def get_model(self, model_id: IdLike) -> Model:
        return await self._run(_core.get_model(model_id))

    async def set_endpoint(self, model_id: IdLike, settings: EndpointSettings) -> ModelEndpoint:
        """Set how the server calls model ``model_id`` (replacing what it had). The secret
        headers are sealed by the server and never come back: the result lists their
        names."""
        return await self._run(_core.set_endpoint(model_id, settings))

    async def get_endpoint(self, model_id: IdLike) -> ModelEndpoint:
        """The model's endpoint (``NotFoundError`` if it has none)."""
        return await self._run(_core.get_endpoint(model_id))

    async def delete_endpoint(self, model_id: IdLike) -> None:
        """Remove the model's endpoint and its secrets."""
        await self._run(_core.delete_endpoint(model_id))

    async def check_endpoint(self, model_id: IdLike) -> EndpointCheck:
        """Have the server call the endpoint once (a fixed prompt) and say how it went."""
        return await self._run(_core.check_endpoint(model_id))

    async def start_run(
        self,
        *,
        model_id: IdLike,
        sessions: int = 1,
        mode: SessionMode | str = SessionMode.FIXED,
        n_items: int | None = None,
        cost_cap_usd: float | None = None,
    ) -> Run:
        """Have the server drive model ``model_id`` (which needs an endpoint:
        ``set_endpoint``) through ``sessions`` new sessions; it stops before spending more
        than ``cost_cap_usd``. The run is queued: follow it with ``get_run``."""
        call = _core.start_run(
            model_id=model_id,
            sessions=sessions,
            mode=str(mode),
            n_items=n_items,
            cost_cap_usd=cost_cap_usd,
        )
        return await self._run(call)

    async def get_run(self, run_id: IdLike) -> Run:
        """The run and its progress (items done, pace, ETA, tokens, cost, failures)."""
        return await self._run(_core.get_run(run_id))

    async def list_runs(
        self,
        *,
        state: RunState | str | None = None,
        model_id: IdLike | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        """Your organisation's runs (every one for admins and auditors), newest first."""
        wanted = None if state is None else str(state)
        return await self._run(_core.list_runs(wanted, model_id, limit))

    async def pause_run(self, run_id: IdLike) -> Run:
        """Send no more items to the model until ``resume_run``."""
        return await self._run(_core.move_run(run_id, "pause"))

    async def resume_run(self, run_id: IdLike) -> Run:
        return await self._run(_core.move_run(run_id, "resume"))

    async def cancel_run(self, run_id: IdLike) -> Run:
        """End the run; its open sessions are aborted."""
        return await self._run(_core.move_run(run_id, "cancel"))

    async def create_session(
        self,
        *,
        model_id: IdLike,
        n_items: int | None = None,
        mode: SessionMode = SessionMode.FIXED,
        adaptive: AdaptiveChoice | None = None,
        item_set: str | None = None,
    ) -> Session:
        """Open a session (a fresh sample of unseen items). ``mode="adaptive"`` lets the
        server choose items and stop early (``n_items`` is then the budget; ``adaptive``:
        :class:`~clients.sdk.types.AdaptiveOptions`, or the same as a dict). ``item_set``
        names an item set an admin saved to draw from (mode ``item_set``; admins and
        evaluators only). Not retried once the request may have reached the server: after
        an ``APIConnectionError``, look at ``list_sessions()`` before opening another."""
        call = _core.create_session(
            model_id=model_id, n_items=n_items, mode=mode, adaptive=adaptive, item_set=item_set
        )
        return await self._run(call)

    async def get_session(self, session_id: IdLike) -> Session:
        return await self._run(_core.get_session(session_id))

    async def abort_session(self, session_id: IdLike) -> Session:
        """Abort a session of your organisation (a run that broke): it stops delivering,
        its undelivered items go back to the pool and its session slot is free at once.
        :class:`~clients.sdk.errors.SessionClosedError` if it had ended already."""
        return await self._run(_core.abort_session(session_id))

    async def get_commitment(self, session_id: IdLike) -> CommitmentReveal:
        """The server's commitment to the session's sample and, once the session is scored,
        what opens it; check it with :func:`clients.sdk.verify_commitment` against the
        ``Session.commitment`` you got at creation and the items you were given."""
        return await self._run(_core.get_commitment(session_id))

    async def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        """The organisation's sessions, newest first (the server's default limit: 100)."""
        return await self._run(_core.list_sessions(limit))

    async def next_item(self, session_id: IdLike) -> Item | None:
        """The item to answer now (the same one again until it is answered); None when the
        session has nothing left."""
        return await self._run(_core.next_item(session_id))

    async def submit_answer(
        self,
        session_id: IdLike,
        item: Item,
        answer: str,
        *,
        reasoning: str | None = None,
        usage: Usage | None = None,
        finish_reason: FinishReason | None = None,
        model_latency_s: float | None = None,
    ) -> Accepted:
        """Answer ``item``. Retried on transport errors and 5xx; if a retry finds the
        position answered, the earlier attempt was committed and the result has
        ``already_answered=True``. A second answer of the caller's own raises
        :class:`~clients.sdk.errors.AlreadyAnsweredError`. ``finish_reason`` says why the
        model's reply ended (``length``: cut; ``error``: the call failed and the answer is
        empty); ``model_latency_s`` is the model's own time for the reply, as you measured
        it (stored as reported, beside the server's delivery-to-answer time)."""
        self._submissions[str(session_id)] += 1
        return await self._run(
            _core.submit_answer(
                session_id,
                item,
                answer,
                reasoning=reasoning,
                usage=usage,
                finish_reason=finish_reason,
                model_latency_s=model_latency_s,
            )
        )

    async def items(self, session_id: IdLike) -> AsyncIterator[Item]:
        """Yield the session's items in order until it has none left; answer each with
        :meth:`submit_answer` before asking for the next."""
        guard = _core.ItemsGuard()
        while (item := await self.next_item(session_id)) is not None:
            guard.check(item, self._submissions[str(session_id)])
            yield item

    async def scoring(self, session_id: IdLike) -> ScoringProgress:
        """How far the scoring of the session has come (default judge)."""
        return await self._run(_core.scoring(session_id))

    async def wait_scored(
        self, session_id: IdLike, *, timeout_s: float = 600, poll_s: float = 1.0
    ) -> ScoringProgress:
        """Poll :meth:`scoring` until it is ``complete``; ``TimeoutError`` after
        ``timeout_s``."""
        deadline = _core.scoring_deadline(timeout_s)
        while True:
            progress = await self.scoring(session_id)
            if progress.complete:
                return progress
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(_core.scoring_timeout(session_id, progress, timeout_s))
            await asyncio.sleep(min(poll_s, remaining))

    @overload
    async def leaderboard(
        self,
        *,
        view: Literal["models"] = "models",
        baselines: bool = False,
        diagnostics: bool = False,
    ) -> Leaderboard: ...

    @overload
    async def leaderboard(
        self, *, view: Literal["disciplines"], baselines: bool = False, diagnostics: bool = False
    ) -> DisciplineLeaderboard: ...

    async def leaderboard(
        self,
        *,
        view: LeaderboardView = "models",
        baselines: bool = False,
        diagnostics: bool = False,
    ) -> Leaderboard | DisciplineLeaderboard:
        """The ranking, one row per model (``view="disciplines"``: the models of each
        discipline); ``baselines`` and ``diagnostics`` add those parts. Vendors see the
        public fields only: the others are None, and a view or part outside them raises
        :class:`~clients.sdk.errors.PermissionDeniedError`."""
        call = _core.leaderboard(view=view, baselines=baselines, diagnostics=diagnostics)
        return await self._run(call)
