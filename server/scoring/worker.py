"""The scoring worker: claim jobs from the outbox, run the cascade and the judge, record.

One ``ScoringWorker.drain`` runs ``2 x judge_concurrency`` consumer tasks over a local
buffer refilled by ``service.claim``; the chat client bounds the calls in flight, and the
extra consumers keep its slots busy while some jobs sleep on a provider's Retry-After.
Each verdict commits in its own short transaction. The worker may be killed at any point:
its leased jobs are taken over when the lease runs out, and the verdict's unique key turns
a job done twice into one verdict (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal
Study on Robust and Fair Evaluation of Large Language Models", §2.3 scoring).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from clients.llm.chat import ChatDeferred, ChatError, ChatRejected
from judge.cascade import Cascade
from judge.embedding import embedding_similarity_filter
from judge.prompts import JudgeInput
from judge.reasoning import split_reasoning
from judge.similarity import SimilarityFilter
from server.config import Settings
from server.database import session_factory
from server.ledger.results import CheckpointSigner
from server.observability import metrics
from server.observability.judge_metrics import judge_call
from server.review.sampling import ReviewPolicy
from server.scoring import service
from server.scoring.judges import JudgePanel
from server.scoring.service import ClaimedJob, JobInput
from server.sessions.modes import mode_spec

log = logging.getLogger(__name__)
MAX_ERROR_BACKOFF_S = 300.0


@dataclass
class _Deferral:
    wait_s: float
    error: str


@dataclass
class DrainStats:
    """What one ``drain`` did."""

    recorded: int = 0
    duplicates: int = 0
    """Jobs whose verdict another worker had already written."""
    deferred: int = 0
    sessions_scored: list[uuid.UUID] = field(default_factory=list)


def cascade_from(settings: Settings) -> Cascade:
    """The scoring cascade of ``settings``; ``EmbeddingBackendUnavailable`` if the embedding
    filter is chosen without the ``proctor[embed]`` extra."""
    if settings.similarity_backend == "embedding":
        return Cascade(similarity=embedding_similarity_filter())
    return Cascade(
        similarity=SimilarityFilter(
            match_at=settings.similarity_match_at,
            mismatch_below=settings.similarity_mismatch_below,
        )
    )


def worker_name() -> str:
    """A lease owner that tells which process holds a job."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class ScoringWorker:
    """Scores queued answers against one database; see the module docstring."""

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        settings: Settings,
        panel: JudgePanel | None = None,
        cascade: Cascade | None = None,
        owner: str | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = session_factory(engine)
        self.panel = panel or JudgePanel(settings, engine)
        self.cascade = cascade or cascade_from(settings)
        self.owner = owner or worker_name()
        self.signer = CheckpointSigner.from_settings(settings)
        """Signs the checkpoints of this process's results chain (``server.ledger.results``)."""
        self.consumers = 2 * settings.judge_concurrency
        self._buffer: list[tuple[ClaimedJob, JobInput | None]] = []
        self._refill_lock = asyncio.Lock()
        self._exhausted = False
        self._held: dict[int, ClaimedJob] = {}
        """Jobs claimed and not yet given back, deferred or recorded."""
        self._stopping = False
        self._wake: asyncio.Event | None = None

    async def drain(self) -> DrainStats:
        """Score until no job is claimable now (deferred jobs wait for a later drain)."""
        stats = DrainStats()
        touched: set[uuid.UUID] = set()
        self._exhausted = False
        await asyncio.gather(*(self._consume(stats, touched) for _ in range(self.consumers)))
        if self._stopping:  # claimed, never started: back to the queue for another worker
            await self.release_held()
        async with self.sessions() as db, db.begin():
            stats.sessions_scored = await service.finish_sessions(
                db,
                session_ids=touched,
                now=_now(),
                review=ReviewPolicy.from_settings(self.settings),
            )
        return stats

    async def run_forever(self, wake: asyncio.Event) -> None:
        """Drain whenever ``wake`` is set, and every ``scoring_poll_s`` seconds anyway,
        until ``stop`` is called (then it returns once the jobs in hand are done)."""
        self._wake = wake
        while not self._stopping:
            try:
                await self.drain()
            except Exception:
                log.exception("scoring drain failed; retrying after the poll interval")
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation
            # that arrives just as the event is set, and shutdown would then wait forever
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.scoring_poll_s):
                    await wake.wait()
            wake.clear()

    def stop(self) -> None:
        """Claim no more jobs: the jobs being scored are finished, the claimed ones not
        started yet are given back, and ``run_forever`` returns."""
        self._stopping = True
        self._buffer.clear()
        if self._wake is not None:
            self._wake.set()

    async def release_held(self) -> int:
        """Give every job this worker still holds back to the queue (at shutdown; past the
        grace period that includes jobs cut short); the number given back."""
        held = list(self._held.values())
        if not held:
            return 0
        async with self.sessions() as db, db.begin():
            await service.release(db, jobs=held, owner=self.owner)
        for job in held:
            self._held.pop(job.id, None)
        log.info("gave %d scoring jobs back to the queue", len(held))
        return len(held)

    async def aclose(self) -> None:
        await self.panel.aclose()

    async def _next(self) -> tuple[ClaimedJob, JobInput | None] | None:
        if self._stopping:
            return None
        if not self._buffer and not self._exhausted:
            async with self._refill_lock:
                if not self._buffer and not self._exhausted:
                    await self._refill()
        return self._buffer.pop(0) if self._buffer else None

    async def _refill(self) -> None:
        async with self.sessions() as db, db.begin():
            jobs = await service.claim(
                db,
                owner=self.owner,
                limit=2 * self.consumers,
                lease_s=self.settings.scoring_lease_s,
                now=_now(),
            )
            inputs = await service.load_inputs(db, [job.id for job in jobs]) if jobs else {}
        self._exhausted = not jobs
        self._held.update((job.id, job) for job in jobs)
        if self._stopping:  # stopped while claiming: give them back with the rest
            return
        self._buffer.extend((job, inputs.get(job.id)) for job in jobs)

    async def _consume(self, stats: DrainStats, touched: set[uuid.UUID]) -> None:
        while (claimed := await self._next()) is not None:
            job, data = claimed
            result = await self._score(job, data)
            async with self.sessions() as db, db.begin():
                if isinstance(result, _Deferral):
                    until = _now() + timedelta(seconds=result.wait_s)
                    await service.defer(
                        db, job=job, owner=self.owner, until=until, error=result.error
                    )
                else:
                    inserted = await service.record_verdict(
                        db, job=job, values=result, signer=self.signer
                    )
            self._held.pop(job.id, None)
            if isinstance(result, _Deferral):
                stats.deferred += 1
                continue
            if inserted:
                metrics.VERDICTS.labels(method=result["method"]).inc()
            touched.add(job.session_id)
            stats.recorded += inserted
            stats.duplicates += not inserted

    async def _score(self, job: ClaimedJob, data: JobInput | None) -> dict[str, Any] | _Deferral:
        if data is None:
            return _needs_review("the answer or its item is gone")
        final, _trace = split_reasoning(data.answer)
        own = mode_spec(data.mode).verdict_without_judge(question=data.question, answer=final)
        if own is not None:
            return own
        decision = self.cascade.route(
            qtype=data.qtype,
            answer=final,
            reference=data.reference,
            options=data.options,
            language=data.language,
        )
        if decision is not None:
            return {"score": decision.score, "method": decision.method, "detail": decision.detail}
        judge = self.panel.get(job.judge)
        if judge is None:
            return _needs_review(f"no judge {job.judge!r} is configured for this open answer")
        judge_input = JudgeInput(
            question=data.question, answer=final, reference=data.reference, language=data.language
        )
        try:
            with judge_call(self.panel.meter(job.judge)):
                outcome = await judge.grade(judge_input)
        except ChatDeferred as deferred:
            return _Deferral(deferred.wait_s, f"deferred by the judge's provider: {deferred}")
        except ChatRejected as rejected:
            return _rejected(job.judge, rejected)
        except ChatError as error:
            if job.attempts >= self.settings.judge_max_attempts:
                return _needs_review(
                    f"judge unavailable after {job.attempts} attempts: {error}",
                    calls=getattr(error, "attempts", 0),
                )
            return _Deferral(min(MAX_ERROR_BACKOFF_S, 5.0 * 2**job.attempts), str(error))
        return {
            "score": outcome.rating,
            "method": "judge",
            "needs_review": outcome.needs_review,
            "detail": outcome.reason,
            "judge_reply": outcome.reply,
            "input_hash": outcome.input_hash,
            "calls": outcome.calls,
            "prompt_tokens": outcome.prompt_tokens,
            "completion_tokens": outcome.completion_tokens,
            "cost": outcome.cost,
            "latency_ms": outcome.latency_s * 1000,
        }


def _rejected(judge: str, rejected: ChatRejected) -> dict[str, Any]:
    """A judge's provider refused the call for good (a 4xx: the prompt does not fit its
    context, a bad key, an unknown model): retrying cannot help, so the answer goes to
    human review at once, with the reason, and the judge is named in the log (the
    ``rejected`` call outcome feeds the judge-error alert)."""
    log.error(
        "judge %s rejected the call (HTTP %d); the answer goes to review: %s",
        judge,
        rejected.status,
        rejected.body,
    )
    return _needs_review(f"judge {judge} rejected the call: {rejected}", calls=rejected.attempts)


def _needs_review(detail: str, *, calls: int = 0) -> dict[str, Any]:
    return {
        "score": None,
        "method": "judge",
        "needs_review": True,
        "detail": detail,
        "calls": calls,
    }


def _now() -> datetime:
    return datetime.now(UTC)
