"""The configured judges: clients, the database-backed reply cache, the default judge.

The default judge is the first configured judge that passes the calibration gate and is
not drifting (``server.calibration.gate``: the lower bound of its weighted kappa against
human scores on the current calibration set; Zhang et al., "LLMEval-Fair: A Large-Scale
Longitudinal Study on Robust and Fair Evaluation of Large Language Models", §3.4: the judge
is chosen by its agreement with human experts). Without any calibration set the gate is
open and it is the first configured judge; without any eligible judge it is ``NO_JUDGE``
(objective items are scored, open ones wait for review).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from clients.llm.chat import ChatClient, ChatEndpoint, Pricing, RetryPolicy
from judge.llm_judge import CachedVerdict, CacheKey, LlmJudge
from server.calibration.gate import eligible_judges
from server.config import JudgeEndpoint, Settings
from server.database import session_factory
from server.observability.judge_metrics import ClientMeter, metered_transport
from server.scoring.models import Verdict

NO_JUDGE = "none"
"""The judge name of verdicts made without any judge configured."""


class VerdictCache:
    """``judge.llm_judge.JudgeCache`` over the ``verdicts`` table.

    A judge verdict already stores its judge, prompt version, input hash, reply and usage,
    so the cache is a lookup of a readable verdict with the same key (an index serves it);
    ``put`` has nothing to do because recording the verdict is the put. Shared by every
    worker and kept across restarts: a request is paid for once whoever asks again.
    """

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def get(self, key: CacheKey) -> CachedVerdict | None:
        async with self._sessions() as db:
            row = (
                await db.execute(
                    select(
                        Verdict.score,
                        Verdict.detail,
                        Verdict.judge_reply,
                        Verdict.prompt_tokens,
                        Verdict.completion_tokens,
                        Verdict.cost,
                    )
                    .where(
                        Verdict.judge == key.judge,
                        Verdict.prompt_version == key.prompt_version,
                        Verdict.input_hash == key.input_hash,
                        Verdict.score.is_not(None),
                    )
                    .limit(1)
                )
            ).first()
        if row is None:
            return None
        return CachedVerdict(
            rating=row.score,
            reason=row.detail,
            reply=row.judge_reply or "",
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            cost=row.cost,
        )

    async def put(self, key: CacheKey, verdict: CachedVerdict) -> None:
        return None


def chat_client(endpoint: JudgeEndpoint, settings: Settings) -> ChatClient:
    """The chat client of one configured judge (its 429s counted in the judge's metrics)."""
    return ChatClient(
        ChatEndpoint(
            base_url=endpoint.base_url,
            model=endpoint.model,
            api_key=endpoint.api_key.get_secret_value() if endpoint.api_key else None,
            read_timeout_s=endpoint.read_timeout_s,
            max_tokens=endpoint.max_tokens,
        ),
        retry=RetryPolicy(max_wait_s=settings.judge_max_wait_s),
        concurrency=settings.judge_concurrency,
        pricing=Pricing(endpoint.input_per_mtok, endpoint.output_per_mtok),
        transport=metered_transport(endpoint.name, endpoint.base_url, settings.judge_concurrency),
    )


class JudgePanel:
    """Every configured judge, built lazily, sharing one database cache."""

    def __init__(self, settings: Settings, engine: AsyncEngine) -> None:
        self.settings = settings
        self._cache = VerdictCache(session_factory(engine))
        self._endpoints = {judge.name: judge for judge in settings.judges}
        self._judges: dict[str, LlmJudge] = {}
        self._meters: dict[str, ClientMeter] = {}

    def get(self, name: str) -> LlmJudge | None:
        """The judge called ``name``; None for ``NO_JUDGE`` or a judge no longer configured."""
        if name not in self._endpoints:
            return None
        if name not in self._judges:
            client = chat_client(self._endpoints[name], self.settings)
            self._judges[name] = LlmJudge(name=name, client=client, cache=self._cache)
            self._meters[name] = ClientMeter(name, client)
        return self._judges[name]

    def meter(self, name: str) -> ClientMeter:
        """The meter of judge ``name`` (after ``get`` returned it)."""
        return self._meters[name]

    async def aclose(self) -> None:
        for judge in self._judges.values():
            await judge.client.aclose()
        self._judges.clear()
        self._meters.clear()


async def default_judge(db: AsyncSession, settings: Settings) -> str:
    """The judge new answers are scored with (see the module docstring)."""
    eligible = await eligible_judges(db, settings)
    return eligible[0] if eligible else NO_JUDGE
