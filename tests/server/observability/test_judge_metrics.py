"""The judge's metrics against the fake provider answering some calls with 429: every 429
is counted, every retry is counted, and the tokens and cost are the provider's usage.

The worker runs in this process, so the counters are this process's: compared before and
after.
"""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, generate_latest

from fakellm.app import ServerConfig
from server.database import create_engine
from server.scoring.worker import ScoringWorker
from tests.support import services
from tests.support.api import World, running_api, test_settings
from tests.support.fake_llm import running_fake_llm
from tests.support.sessions import drive_session

from .scrape import Samples, delta, parse

pytestmark = [pytest.mark.postgres]
JUDGE = "judge-metered"
PRICE_PER_MTOK = 2.0
N_ITEMS = 16


def local_samples() -> Samples:
    return parse(generate_latest(REGISTRY).decode())


async def test_judge_calls_retries_429s_tokens_and_cost(
    open_answers_db: tuple[str, World], redis_server: services.RedisServer
) -> None:
    db_url, world = open_answers_db
    config = ServerConfig(error_rate=0.3, retry_after=0.01, seed=7)
    with running_fake_llm(config) as llm:
        judge = {
            "name": JUDGE,
            "base_url": llm.base_url,
            "model": "judge",
            "input_per_mtok": PRICE_PER_MTOK,
            "output_per_mtok": PRICE_PER_MTOK,
        }
        settings = test_settings(db_url, redis_server.url, scoring_in_process=False, judges=[judge])
        async with running_api(settings) as (_, client):
            await drive_session(client, db_url, world, n_items=N_ITEMS)
        before = local_samples()
        engine = create_engine(db_url)
        worker = ScoringWorker(engine=engine, settings=settings)
        try:
            stats = await worker.drain()
        finally:
            await worker.aclose()
            await engine.dispose()
        after = local_samples()
        served = llm.stats()["by_status"]
    rate_limited = served.get("429", 0)
    assert rate_limited >= 1 and served.get("200", 0) >= 1, served
    assert delta(before, after, "proctor_judge_rate_limited_total", judge=JUDGE) == rate_limited
    # every 429 was retried (none exhausted six attempts at this rate)
    assert delta(before, after, "proctor_judge_retries_total", judge=JUDGE) == rate_limited
    ok_calls = delta(before, after, "proctor_judge_calls_total", judge=JUDGE, outcome="ok")
    assert ok_calls == N_ITEMS  # every answer is open: one judge call each
    assert delta(before, after, "proctor_judge_calls_total", judge=JUDGE) == ok_calls
    durations = "proctor_judge_call_duration_seconds_count"
    assert delta(before, after, durations, judge=JUDGE) == ok_calls
    judged = delta(before, after, "proctor_verdicts_total", method="judge")
    assert judged == ok_calls and stats.recorded == N_ITEMS
    prompt = delta(before, after, "proctor_judge_tokens_total", judge=JUDGE, kind="prompt")
    completion = delta(before, after, "proctor_judge_tokens_total", judge=JUDGE, kind="completion")
    assert prompt > 0 and completion > 0
    cost = delta(before, after, "proctor_judge_cost_usd_total", judge=JUDGE)
    assert cost == pytest.approx((prompt + completion) * PRICE_PER_MTOK / 1e6)
