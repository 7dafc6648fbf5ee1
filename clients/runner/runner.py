"""The evaluator runner: drive an OpenAI-compatible model through Proctor sessions.

For every session: ask the server for the next item, render it with the paradigm's
template (:mod:`clients.runner.prompts`) and the model's adapter
(:mod:`clients.runner.adapters`), call the model, split the reasoning trace from the
answer, submit the answer with the tokens the model reported, record the line in the
transcript; until the server says the session is done. Sessions run ``concurrency`` at a
time (each session is strictly sequential: the server delivers one item at a time).

Resuming. Where a session stands is the server's word: a session that an earlier run of
the same transcript opened, or any open session of the model found on the server, is
driven on from what ``next`` returns (the pending item again, if the crash came between
taking and answering it). A lease still held by the crashed run's token is waited out
(``lease_wait_s``). Finished sessions of the transcript count towards ``sessions``; only
the rest are opened anew.

What real inference servers do to an item. A prompt longer than the model's context
(``ChatContextOverflow``, whatever status the server used) or a request the provider
refuses for this item (400, 413, 422) is no reason to stop: the item is answered empty
with ``finish_reason: error`` and the refusal is in the transcript, and the session goes
on, so it ends and its slot comes back. Any other failure (a bad key, an unknown model,
retries exhausted) stops the session, which stays open for a rerun to resume (or its
organisation aborts it). A reply cut at ``max_tokens`` (``finish_reason: length``) and an
empty reply are submitted as they are, marked on the answer and in the transcript, and
counted in the summary.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from clients.llm.chat import ChatClient, ChatContextOverflow, ChatError, ChatRejected, ChatResult
from clients.llm.failures import MODEL_CALL_ERRORS, failure_kind
from clients.runner.adapters import (
    ModelAdapter,
    TemplateName,
    get_adapter,
    render_template,
    split_reply,
)
from clients.runner.prompts import Paradigm, PromptItem, render
from clients.runner.transcript import Transcript, read_state
from clients.sdk import (
    AdaptiveOptions,
    AsyncProctorClient,
    FinishReason,
    Item,
    ProctorError,
    QuotaExhaustedError,
    RateLimitError,
    Session,
    SessionInUseError,
    SessionMode,
    SessionState,
    Usage,
)
from clients.sdk.types import ALL_ANSWERED_STATES, OPEN_STATES, CallFailure

ITEM_REFUSAL_STATUSES = frozenset({400, 413, 422})
"""Statuses with which a provider refuses one request (its content, its size) rather than
every request (401, 403, 404: a key or model that is wrong for all of them)."""
KNOWN_FINISH_REASONS = {reason.value: reason for reason in FinishReason}
DRIVE_ERRORS: tuple[type[Exception], ...] = (ProctorError, *MODEL_CALL_ERRORS)
"""What stops driving one session (and only it): Proctor's refusals, the model's failures."""


def refuses_the_item(error: ChatError) -> bool:
    """Whether ``error`` means this item cannot be answered, while others can."""
    if isinstance(error, ChatContextOverflow):
        return True
    return isinstance(error, ChatRejected) and error.status in ITEM_REFUSAL_STATUSES


@dataclass(frozen=True, slots=True)
class RunConfig:
    """What to run. ``n_items`` None: the server's default session size."""

    model_id: str
    sessions: int = 3
    concurrency: int = 1
    paradigm: Paradigm = "zero-shot"
    adapter: ModelAdapter = field(default_factory=lambda: get_adapter("openai"))
    system_prompt: str | None = None
    n_items: int | None = None
    mode: SessionMode = SessionMode.FIXED
    """``fixed`` or ``adaptive`` (the server picks the items and may stop early)."""
    adaptive: AdaptiveOptions | None = None
    """Options of adaptive sessions (policy, bound, target half-width, error probability)."""
    max_tokens: int | None = None
    template: TemplateName | None = None
    """Send raw prompts in this chat template to ``/completions`` instead of chat
    messages to ``/chat/completions``."""
    lease_wait_s: float = 120.0
    lease_poll_s: float = 2.0


@dataclass(slots=True)
class SessionOutcome:
    """How driving one session ended."""

    session_id: str
    n_items: int
    answered_before: int
    answered: int = 0
    state: SessionState | str | None = None
    """The session's state when driving it ended (None if it could not be read)."""
    error: str | None = None
    resumed: bool = False
    truncated: int = 0
    """Answers whose reply was cut (``finish_reason: length``)."""
    empty: int = 0
    """Answers the model left empty (failed items not counted)."""
    failed_items: int = 0
    """Items the model could not answer (context overflow, a refusal for the item)."""
    failure: CallFailure | None = None
    """The kind of the model's failure that stopped the session, if one did."""
    stopped: str | None = None
    """Why driving stopped early without an error (a ``CallGate`` said so)."""
    open_refused: bool = False
    """The session could not be opened for now (a quota: 409 or 429); a later try may."""

    @property
    def finished(self) -> bool:
        """Driven to its end without error: every item answered (``ALL_ANSWERED_STATES``)."""
        return self.error is None and self.state in ALL_ANSWERED_STATES


@dataclass(slots=True)
class RunSummary:
    outcomes: list[SessionOutcome]
    already_finished: list[str]
    """Sessions an earlier run of the transcript had finished."""
    wall_s: float


class StopDriving(Exception):
    """Raised by a ``CallGate`` to stop driving the session before the next call (the
    session stays open, to be driven on later or aborted)."""


class CallGate(Protocol):
    """Admits each model call (server-driven runs: a pause, a cancel, the cost cap).

    ``admit`` runs before the call and raises ``StopDriving`` to stop; what it returns is
    handed to ``settle`` after the call, with the tokens the model reported (None if the
    call failed)."""

    async def admit(self, prompt: str) -> Any: ...

    async def settle(self, ticket: Any, result: ChatResult | None) -> None: ...


class OpenGate:
    """Admits every call (``proctor run``)."""

    async def admit(self, prompt: str) -> None:
        return None

    async def settle(self, ticket: Any, result: ChatResult | None) -> None:
        return None


class SessionBook(Protocol):
    """Which sessions are this run's: ``known`` ones from before (driven on if open,
    counted if finished), and each newly ``opened`` one, recorded before it is driven so a
    crash cannot lose it. ``adopts_open_sessions``: whether any other open session of the
    model on the server is taken over too."""

    adopts_open_sessions: bool

    async def known(self) -> list[str]: ...

    async def opened(self, session: Session, *, adopted: bool) -> None: ...


class TranscriptBook:
    """The sessions of ``proctor run``'s transcript; open sessions of the model found on
    the server are adopted."""

    adopts_open_sessions = True

    def __init__(self, transcript: Transcript, model_id: str) -> None:
        self.transcript = transcript
        self.model_id = model_id

    async def known(self) -> list[str]:
        return read_state(self.transcript.path, model_id=self.model_id).sessions

    async def opened(self, session: Session, *, adopted: bool) -> None:
        self.transcript.write(
            "session",
            session_id=str(session.id),
            model_id=self.model_id,
            n_items=session.n_items,
            adopted=adopted,
        )


class EventSink(Protocol):
    """Where the run's events go (``Transcript``: a JSONL file)."""

    def write(self, event: str, **fields: Any) -> None: ...


class Listener(Protocol):
    """Progress callbacks (the CLI draws Rich progress bars with them)."""

    def session_started(self, session_id: str, total: int, done: int, resumed: bool) -> None: ...

    def item_answered(self, session_id: str, position: int) -> None: ...

    def session_ended(self, outcome: SessionOutcome) -> None: ...

    def waiting(self, session_id: str, reason: str) -> None: ...


class SilentListener:
    def session_started(self, session_id: str, total: int, done: int, resumed: bool) -> None:
        pass

    def item_answered(self, session_id: str, position: int) -> None:
        pass

    def session_ended(self, outcome: SessionOutcome) -> None:
        pass

    def waiting(self, session_id: str, reason: str) -> None:
        pass


class Runner:
    """Drives one registered model (``config.model_id``) behind ``model`` through sessions
    of the server behind ``client``."""

    def __init__(
        self,
        client: AsyncProctorClient,
        model: ChatClient,
        config: RunConfig,
        transcript: EventSink,
        listener: Listener | None = None,
        *,
        book: SessionBook | None = None,
        gate: CallGate | None = None,
    ) -> None:
        """``book`` defaults to the transcript's sessions (``TranscriptBook``, which needs
        a ``Transcript``), ``gate`` to admitting every call."""
        self.client = client
        self.model = model
        self.config = config
        self.transcript = transcript
        self.listener = listener or SilentListener()
        if book is None:
            if not isinstance(transcript, Transcript):
                raise TypeError("without a book, the runner's events go to a Transcript")
            book = TranscriptBook(transcript, config.model_id)
        self.book = book
        self.gate = gate or OpenGate()

    async def run(self) -> RunSummary:
        """Resume what stands open, open what is missing, drive everything to the end."""
        started = time.monotonic()
        resumable, finished = await self._resumable()
        missing = max(0, self.config.sessions - len(finished) - len(resumable))
        semaphore = asyncio.Semaphore(self.config.concurrency)

        async def resume(session: Session) -> SessionOutcome:
            async with semaphore:
                return await self._drive(session, resumed=True)

        async def fresh() -> SessionOutcome:
            async with semaphore:
                try:
                    session = await self.client.create_session(
                        model_id=self.config.model_id,
                        n_items=self.config.n_items,
                        mode=self.config.mode,
                        adaptive=self.config.adaptive,
                    )
                except ProctorError as error:
                    return SessionOutcome(
                        "",
                        0,
                        0,
                        error=f"opening a session: {error}",
                        open_refused=isinstance(error, QuotaExhaustedError | RateLimitError),
                    )
                await self.book.opened(session, adopted=False)
                return await self._drive(session, resumed=False)

        tasks = [resume(s) for s in resumable] + [fresh() for _ in range(missing)]
        outcomes = list(await asyncio.gather(*tasks))
        return RunSummary(outcomes, finished, time.monotonic() - started)

    async def _resumable(self) -> tuple[list[Session], list[str]]:
        """Open sessions to drive on (this transcript's, then any other open session of
        the model on the server) and this transcript's finished ones."""
        known = await self.book.known()
        resumable: list[Session] = []
        finished: list[str] = []
        for session_id in known:
            session = await self.client.get_session(session_id)
            if session.state in OPEN_STATES:
                resumable.append(session)
            elif session.state in ALL_ANSWERED_STATES:
                finished.append(session_id)
        if not self.book.adopts_open_sessions:
            return resumable, finished
        seen = set(known)
        for session in await self.client.list_sessions():
            model_matches = str(session.model_id) == self.config.model_id
            if model_matches and session.state in OPEN_STATES and str(session.id) not in seen:
                await self.book.opened(session, adopted=True)
                resumable.append(session)
        return resumable, finished

    async def _drive(self, session: Session, *, resumed: bool) -> SessionOutcome:
        sid = str(session.id)
        outcome = SessionOutcome(sid, session.n_items, session.completed, resumed=resumed)
        self.listener.session_started(sid, session.n_items, session.completed, resumed)
        try:
            while (item := await self._next(sid)) is not None:
                await self._answer(sid, item, outcome)
                outcome.answered += 1
            outcome.state = (await self.client.get_session(sid)).state
        except StopDriving as stop:
            outcome.stopped = str(stop)
        except DRIVE_ERRORS as error:
            outcome.error = f"{type(error).__name__}: {error}"
            outcome.failure = failure_kind(error)
        self.transcript.write(
            "session_end",
            session_id=sid,
            state=outcome.state,
            stopped=outcome.stopped,
            answered=outcome.answered,
            truncated=outcome.truncated,
            empty=outcome.empty,
            failed_items=outcome.failed_items,
            error=outcome.error,
        )
        self.listener.session_ended(outcome)
        return outcome

    async def _next(self, session_id: str) -> Item | None:
        """The next item; a lease still held by a crashed run's token is waited out."""
        deadline = time.monotonic() + self.config.lease_wait_s
        while True:
            try:
                return await self.client.next_item(session_id)
            except SessionInUseError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"session {session_id} stayed in use by another token for "
                        f"{self.config.lease_wait_s:.0f} s"
                    ) from None
                self.listener.waiting(session_id, "the session is leased to another token")
                await asyncio.sleep(self.config.lease_poll_s)

    async def _answer(self, session_id: str, item: Item, outcome: SessionOutcome) -> None:
        config = self.config
        started = time.monotonic()
        prompt = render(
            PromptItem(item.question, item.options, item.qtype, item.discipline), config.paradigm
        )
        messages = config.adapter.messages(prompt, system_prompt=config.system_prompt)
        ticket = await self.gate.admit(prompt)
        reply = None
        try:
            reply = await self._ask(messages)
        except ChatError as error:
            if not refuses_the_item(error):
                raise
            await self._answer_refused(session_id, item, prompt, error, started)
            outcome.failed_items += 1
            return
        finally:
            await self.gate.settle(ticket, reply)
        answer, reasoning = split_reply(reply.content, reply.reasoning)
        finish = KNOWN_FINISH_REASONS.get(reply.finish_reason or "")
        accepted = await self.client.submit_answer(
            session_id,
            item,
            answer,
            reasoning=reasoning,
            usage=Usage(reply.usage.prompt_tokens, reply.usage.completion_tokens),
            finish_reason=finish,
            model_latency_s=round(reply.latency_s, 4),
        )
        outcome.truncated += finish is FinishReason.LENGTH
        outcome.empty += not answer.strip()
        self.transcript.write(
            "item",
            **self._item_fields(session_id, item, prompt),
            answer=answer,
            reasoning=reasoning,
            finish_reason=reply.finish_reason,
            empty=not answer.strip(),
            model_latency_s=round(reply.latency_s, 4),
            end_to_end_s=round(time.monotonic() - started, 4),
            prompt_tokens=reply.usage.prompt_tokens,
            completion_tokens=reply.usage.completion_tokens,
            attempts=reply.attempts,
            already_answered=accepted.already_answered,
            at=datetime.now(UTC).isoformat(),
        )
        self.listener.item_answered(session_id, item.position)

    async def _ask(self, messages: list[dict[str, str]]) -> ChatResult:
        config = self.config
        if config.template is None:
            return await self.model.complete(messages, max_tokens=config.max_tokens)
        raw = render_template(config.template, messages)
        return await self.model.complete_text(raw, max_tokens=config.max_tokens)

    async def _answer_refused(
        self, session_id: str, item: Item, prompt: str, error: ChatError, started: float
    ) -> None:
        """Answer an item the model cannot answer: empty, ``finish_reason: error``, and
        the refusal in the transcript."""
        accepted = await self.client.submit_answer(
            session_id, item, "", finish_reason=FinishReason.ERROR
        )
        self.transcript.write(
            "item",
            **self._item_fields(session_id, item, prompt),
            answer="",
            reasoning=None,
            finish_reason=FinishReason.ERROR.value,
            empty=True,
            failure=f"{type(error).__name__}: {error}",
            failure_kind=failure_kind(error),
            end_to_end_s=round(time.monotonic() - started, 4),
            attempts=getattr(error, "attempts", None),
            already_answered=accepted.already_answered,
            at=datetime.now(UTC).isoformat(),
        )
        self.listener.item_answered(session_id, item.position)

    def _item_fields(self, session_id: str, item: Item, prompt: str) -> dict[str, object]:
        return {
            "session_id": session_id,
            "position": item.position,
            "item_id": str(item.item_id),
            "discipline": item.discipline,
            "qtype": item.qtype,
            "paradigm": self.config.paradigm,
            "prompt": prompt,
        }


def summary_json(summary: RunSummary) -> dict[str, object]:
    """The run's outcome as printed at the end of ``proctor run``."""
    outcomes: Sequence[SessionOutcome] = summary.outcomes
    return {
        "sessions": [
            {
                "session_id": o.session_id,
                "state": o.state,
                "resumed": o.resumed,
                "answered_now": o.answered,
                "answered_before": o.answered_before,
                "n_items": o.n_items,
                "truncated": o.truncated,
                "empty": o.empty,
                "failed_items": o.failed_items,
                "error": o.error,
                "failure": o.failure,
            }
            for o in outcomes
        ],
        "truncated": sum(o.truncated for o in outcomes),
        "empty": sum(o.empty for o in outcomes),
        "failed_items": sum(o.failed_items for o in outcomes),
        "finished_earlier": summary.already_finished,
        "finished": sum(o.finished for o in outcomes) + len(summary.already_finished),
        "failed": sum(o.error is not None for o in outcomes),
        "wall_s": round(summary.wall_s, 2),
    }
