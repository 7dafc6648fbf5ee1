"""The LLM judge: render the fig. 11 prompt, call the judge, read the rating, cache it.

``LlmJudge.grade`` makes at most two calls: the request, and -- only if the reply states
no readable rating -- one retry with a format reminder. If that reply is unreadable too the
outcome is ``needs_review`` (never a silent 0). A readable rating is cached under
(judge, prompt version, input hash), so the same request is never paid for twice; the
cache is a protocol so that the server can keep it in PostgreSQL and tests in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from clients.llm.chat import ChatClient, ChatResult
from judge.prompts import PROMPT_VERSION, JudgeInput, input_hash, render, with_reminder
from judge.verdict import UnparseableVerdict, Verdict, parse_verdict


@dataclass(frozen=True, slots=True)
class CacheKey:
    judge: str
    prompt_version: str
    input_hash: str


@dataclass(frozen=True, slots=True)
class CachedVerdict:
    rating: int
    reason: str | None
    reply: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0


class JudgeCache(Protocol):
    """Where parsed judge replies are kept (``server.scoring`` keeps them in the database)."""

    async def get(self, key: CacheKey) -> CachedVerdict | None: ...

    async def put(self, key: CacheKey, verdict: CachedVerdict) -> None: ...


class MemoryJudgeCache:
    """A dict-backed ``JudgeCache`` for one process."""

    def __init__(self) -> None:
        self._entries: dict[CacheKey, CachedVerdict] = {}

    async def get(self, key: CacheKey) -> CachedVerdict | None:
        return self._entries.get(key)

    async def put(self, key: CacheKey, verdict: CachedVerdict) -> None:
        self._entries.setdefault(key, verdict)


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """The result of grading one answer.

    ``rating`` is None exactly when ``needs_review``. ``calls`` counts paid calls (0 on a
    cache hit); tokens, cost and latency sum over them.
    """

    rating: int | None
    reason: str | None
    reply: str
    input_hash: str
    calls: int
    cached: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0

    @property
    def needs_review(self) -> bool:
        return self.rating is None


class LlmJudge:
    """One judge (a named model behind an OpenAI-compatible endpoint) on the fig. 11 rubric.

    Errors of the chat client (``clients.llm.chat.ChatError``: deferred, exhausted, rejected)
    propagate: the caller decides whether to reschedule the job.
    """

    def __init__(
        self,
        *,
        name: str,
        client: ChatClient,
        cache: JudgeCache | None = None,
        prompt_version: str = PROMPT_VERSION,
    ) -> None:
        self.name = name
        self.client = client
        self.cache = cache or MemoryJudgeCache()
        self.prompt_version = prompt_version

    async def grade(self, judge_input: JudgeInput) -> JudgeOutcome:
        """Grade ``judge_input`` (cache first, then at most two calls)."""
        messages = render(judge_input)
        key = CacheKey(self.name, self.prompt_version, input_hash(messages))
        hit = await self.cache.get(key)
        if hit is not None:
            return JudgeOutcome(
                rating=hit.rating,
                reason=hit.reason,
                reply=hit.reply,
                input_hash=key.input_hash,
                calls=0,
                cached=True,
            )
        first = await self.client.complete(messages)
        results = [first]
        verdict = _read(first.content, judge_input.answer)
        if verdict is None:
            retry = with_reminder(messages, first.content, judge_input.language)
            results.append(await self.client.complete(retry))
            verdict = _read(results[-1].content, judge_input.answer)
        outcome = _outcome(verdict, results, key.input_hash)
        if verdict is not None:
            await self.cache.put(
                key,
                CachedVerdict(
                    rating=verdict.rating,
                    reason=verdict.reason,
                    reply=outcome.reply,
                    prompt_tokens=outcome.prompt_tokens,
                    completion_tokens=outcome.completion_tokens,
                    cost=outcome.cost,
                ),
            )
        return outcome


def _read(reply: str, answer: str) -> Verdict | None:
    try:
        return parse_verdict(reply, answer=answer)
    except UnparseableVerdict:
        return None


def _outcome(verdict: Verdict | None, results: list[ChatResult], digest: str) -> JudgeOutcome:
    return JudgeOutcome(
        rating=verdict.rating if verdict else None,
        reason=verdict.reason if verdict else "the judge's reply stated no readable rating",
        reply=results[-1].content,
        input_hash=digest,
        calls=len(results),
        cached=False,
        prompt_tokens=sum(r.usage.prompt_tokens for r in results),
        completion_tokens=sum(r.usage.completion_tokens for r in results),
        cost=sum(r.cost for r in results),
        latency_s=sum(r.latency_s for r in results),
    )
