"""Benchmark: server time of every console page on a bank of 100,000 items and 200,000 verdicts.

Run (not collected by pytest)::

    cd /work/main && . .venv/bin/activate
    python tests/benchmarks/bench_console.py [--items 100000] [--verdicts 200000]
        [--repeats 10] [--json out.json]

The target: every console page answers in at most 300 ms of server time on a bank of
100,000 items and 200,000 verdicts.

What runs:

1. a throwaway PostgreSQL with durable settings (``bench_import.DURABLE``) and a Redis
   (``tests.support.services``); the schema by ``server.database.upgrade`` (what
   ``proctor db upgrade`` runs). With Redis the scoring worker and the health job are not
   in the API process, so nothing runs in the background while pages are timed;
2. the data: the synthetic bank of ``bench_import.write_synthetic_bank`` through the real
   importer (no augmentation: one item per family); an operator organisation with admin,
   auditor and evaluator keys and ``--vendors`` vendor organisations (vendor and evaluator
   keys); ``--models`` registered models spread over the vendors; ``--sessions`` sessions
   per model opened by ``server.sessions.service.create_session`` (real samples and
   exposures), each with ``verdicts / (models x sessions)`` answers, one scoring job
   (done) and one verdict of judge ``judge-v1`` under the current prompt version per
   answer (scores 0-3 from a 2PL draw of the model's ability against the item's
   difficulty; objective / similarity / judge by question type), bulk-inserted, then the
   session set ``scored`` with its counts. Then ``--review-tasks`` open review tasks (half
   answers the judge could not score, half audit draws), ``--done-reviews`` closed ones
   with their human verdicts, one open session per vendor, ``--audit-rows`` audit rows,
   a health snapshot computed and stored as the health job does (``refresh_health``, with
   its flagging) and, if that flagged fewer than ``--flagged`` items, more flagged through
   the one status-change function; ``ANALYZE`` (as autovacuum would after a bulk load);
3. the app in process (``tests.support.api.running_api``) on that database with Redis and
   ``judges=[judge-v1]``, the leaderboard's resamples at their default. As admin, then as
   auditor (logged in through the console's form): every GET route under ``/console``
   found in the app at run time (static files, the login page and SSE ``/events`` routes
   left out; path parameters filled with real ids), the CSV exports and filtered / paged
   list URLs. Each URL is requested once cold, then ``--repeats`` times (3 when the cold
   view took over 2 s), each request timed with ``time.perf_counter`` around ``client.get``
   (ASGI in process, no network: this is the server's time, the ASGI middleware stack
   included). Then, as admin, each URL ``--fresh-repeats`` times right after a new verdict
   is written (of a judge nobody configured, so no figure changes): the leaderboard's
   figures are memoised on the data's version, which every verdict changes, so this is
   what a page costs while scoring runs. Background tasks such a view leaves (a memo
   refreshed off the request path) are waited for before the next view: how long they ran
   and the event loop's longest stall meanwhile (what any request arriving then waits)
   are reported;
4. the JSON API routes the pages mirror (``GET /v1/leaderboard`` and others), as admin, the
   same way, for "page / API".

Printed: the machine, the data sizes and build times, a table per role (path, status,
cold, median, p95, max, fresh ms, bytes, PASS/MISS of p95 and fresh against 300 ms), the
API baseline with the ratios, and for every page that misses a profile of one request
(cProfile -- the request's main-thread Python, not its worker threads, and slowed by the
profiler -- and the SQL statements it ran, slowest first). The exit status is 0 whatever
the timings (it is a report); 1 only when the run itself fails.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import math
import os
import platform
import pstats
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

import httpx
from fastapi import FastAPI
from sqlalchemy import event, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bank.formats import read_records
from bank.health.flags import parse_thresholds
from bank.health.report import HealthOptions
from bank.importer import import_records
from bank.item_status import ItemStatus, change_status
from bank.models import Exposure, Item, SampleItem
from judge.prompts import PROMPT_VERSION
from server.audit.models import AuditEntry
from server.auth.permissions import Principal, Role
from server.auth.service import create_api_key
from server.config import Settings
from server.database import create_engine, unit_of_work, upgrade
from server.health.service import HEALTH_ACTOR, refresh_health
from server.orgs.service import create_org
from server.registry.models import RegisteredModel
from server.review.models import ReviewTask
from server.review.raters import HUMAN_METHOD, HUMAN_PROMPT_VERSION, human_rater
from server.review.states import ReviewReason, ReviewTaskState
from server.scoring.assignment import JudgeAssignment, assign_judges
from server.scoring.models import ScoringJob, Verdict
from server.sessions.limits import SessionLimits
from server.sessions.models import Answer, EvalSession
from server.sessions.service import create_session
from tests.benchmarks.bench_import import DURABLE, write_synthetic_bank
from tests.support.api import login, running_api, test_settings
from tests.support.bank_keys import install_test_keyring
from tests.support.console import console_login
from tests.support.services import postgres_server, redis_server

ROOT = Path(__file__).resolve().parents[2]
JUDGE = "judge-v1"
BUDGET_MS = 300.0
SLOW_MS = 2000.0
"""A URL whose first view takes longer is timed ``SLOW_REPEATS`` times only."""
SLOW_REPEATS = 3
SKIPPED_ROUTES = re.compile(r"^/console/(static/|login$)|/events$")
OBJECTIVE = ("multiple_choice", "true_false")
START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
"""When the first session opened; sessions follow every few hours."""
AUDIT_ROUTES = (
    ("POST", "/v1/auth/token", (200, 200, 200, 401, 429)),
    ("GET", "/v1/sessions/{session_id}/next", (200, 200, 200, 204, 409)),
    ("POST", "/v1/sessions/{session_id}/answers", (201, 201, 201, 201, 409, 422)),
    ("GET", "/v1/sessions/{session_id}", (200, 200, 404)),
    ("POST", "/v1/sessions", (201, 201, 403, 429)),
    ("GET", "/v1/leaderboard", (200, 200, 403)),
    ("GET", "/v1/models", (200,)),
    ("GET", "/console/sessions", (200, 200, 303)),
    ("GET", "/console/leaderboard", (200,)),
    ("POST", "/console/login", (303, 303, 401)),
)


# --------------------------------------------------------------------------- #
# Building the data
# --------------------------------------------------------------------------- #


@dataclass
class Built:
    """The ids and keys the pages are filled with, and how long each step took."""

    keys: dict[str, str] = field(default_factory=dict)
    """Operator's role -> API key."""
    key_ids: dict[str, str] = field(default_factory=dict)
    operator_id: uuid.UUID | None = None
    vendor_ids: list[uuid.UUID] = field(default_factory=list)
    model_ids: list[uuid.UUID] = field(default_factory=list)
    session_ids: list[uuid.UUID] = field(default_factory=list)
    item_id: uuid.UUID | None = None
    task_ids: list[int] = field(default_factory=list)
    search_word: str = ""
    discipline: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    models: int
    sessions: int
    answers: int
    vendors: int
    review_tasks: int
    done_reviews: int
    audit_rows: int
    flagged: int


def plan_of(args: argparse.Namespace) -> Plan:
    answers = max(1, round(args.verdicts / (args.models * args.sessions)))
    return Plan(
        models=args.models,
        sessions=args.sessions,
        answers=answers,
        vendors=args.vendors,
        review_tasks=args.review_tasks,
        done_reviews=args.done_reviews,
        audit_rows=args.audit_rows,
        flagged=args.flagged,
    )


def step(built: Built, name: str, started: float) -> None:
    built.seconds[name] = round(time.perf_counter() - started, 2)
    print(f"  {name}: {built.seconds[name]:.1f} s", flush=True)


async def make_orgs(engine: AsyncEngine, plan: Plan, built: Built) -> None:
    """The operator (admin, auditor, evaluator keys) and the vendors (vendor, evaluator),
    and the registered models, spread over the vendors (priced, so cost shows)."""
    async with unit_of_work(engine) as db:
        operator = await create_org(db, name="operator", operator=True)
        built.operator_id = operator.id
        for role in ("admin", "auditor", "evaluator"):
            key, secret = await create_api_key(db, org_id=operator.id, role=role)
            built.keys[role], built.key_ids[role] = secret, str(key.id)
        for v in range(plan.vendors):
            vendor = await create_org(db, name=f"vendor-{v + 1}")
            built.vendor_ids.append(vendor.id)
            for role in ("vendor", "evaluator"):
                await create_api_key(db, org_id=vendor.id, role=role)
        for m in range(plan.models):
            model = RegisteredModel(
                org_id=built.vendor_ids[m % plan.vendors],
                name=f"model-{m + 1:02d}",
                api_snapshot=f"2026-0{1 + m % 9}-01",
                family=f"family-{m % 5}",
                params_b=float(2 ** (m % 7)),
                usd_per_mtok_in=0.5 + m % 4,
                usd_per_mtok_out=2.0 + 2 * (m % 4),
            )
            db.add(model)
            await db.flush()
            built.model_ids.append(model.id)


def admin_principal(built: Built) -> Principal:
    assert built.operator_id is not None
    return Principal(
        subject=built.key_ids["admin"],
        org_id=built.operator_id,
        role=Role.ADMIN,
        jti="bench-console",
        expires_at=datetime.now(UTC) + timedelta(days=1),
    )


def limits_for(plan: Plan) -> SessionLimits:
    return SessionLimits(
        max_concurrent=10**6,
        max_per_period=10**6,
        default_items=plan.answers,
        max_items=max(plan.answers, 5000),
        deadline_s=7 * 86_400,
    )


def difficulty(item_id: uuid.UUID) -> float:
    """A fixed 2PL difficulty per item (the same for every model)."""
    return random.Random(item_id.int).gauss(0.0, 1.0)


def draw_score(rng: random.Random, ability: float, item_id: uuid.UUID) -> int:
    """3 or 0 by the 2PL outcome; a tenth of the 3s and 15% of the 0s moved a step toward
    the middle (a judge's partial credit)."""
    p = 1.0 / (1.0 + math.exp(-(ability - difficulty(item_id))))
    if rng.random() < p:
        return 2 if rng.random() < 0.1 else 3
    return 1 if rng.random() < 0.15 else 0


@dataclass
class Reviews:
    """Positions of one session that get a review task: open (the judge could not score
    them: ``needs_review``, or drawn for audit), and closed with a human's score."""

    needs_review: set[int] = field(default_factory=set)
    audit_open: set[int] = field(default_factory=set)
    done: set[int] = field(default_factory=set)


def spread(total: int, n: int, index: int) -> int:
    """``total`` split over ``n`` as evenly as it goes: the share of ``index``."""
    return total // n + (1 if index < total % n else 0)


def reviews_for(rng: random.Random, plan: Plan, index: int, n_answers: int) -> Reviews:
    n_sessions = plan.models * plan.sessions
    n_open = spread(plan.review_tasks, n_sessions, index)
    n_done = spread(plan.done_reviews, n_sessions, index)
    chosen = rng.sample(range(n_answers), min(n_answers, n_open + n_done))
    opened, done = chosen[:n_open], chosen[n_open:]
    half = len(opened) // 2
    return Reviews(set(opened[:half]), set(opened[half:]), set(done))


async def fill_session(
    db: AsyncSession,
    record: EvalSession,
    *,
    ability: float,
    rng: random.Random,
    reviews: Reviews,
    reviewer: str,
) -> int:
    """The answers, done scoring jobs, verdicts and review tasks of a session whose sample
    was drawn; sets it ``scored``. Returns the number of judge verdicts written."""
    rows = (
        await db.execute(
            select(SampleItem.position, Item.id, Item.qtype, Item.discipline)
            .join(Item, Item.id == SampleItem.item_id)
            .where(SampleItem.sample_id == record.sample_id)
            .order_by(SampleItem.position)
        )
    ).all()
    created = record.created_at
    answers, jobs, verdicts, human, tasks = [], [], [], [], []
    clock = created
    for position, item_id, qtype, discipline in rows:
        latency = rng.uniform(0.8, 12.0)
        delivered = clock + timedelta(seconds=rng.uniform(0.05, 0.5))
        clock = delivered + timedelta(seconds=latency)
        objective = qtype in OBJECTIVE
        answers.append(
            {
                "session_id": record.id,
                "position": position,
                "item_id": item_id,
                "answer": rng.choice("ABCD")
                if objective
                else " ".join(rng.choices(("the", "answer", "is", "x", "because"), k=12)),
                "submitted_by": "bench-jti",
                "delivered_at": delivered,
                "submitted_at": clock,
                "prompt_tokens": rng.randint(80, 600),
                "completion_tokens": rng.randint(20, 900),
            }
        )
        jobs.append(
            {
                "session_id": record.id,
                "position": position,
                "judge": JUDGE,
                "prompt_version": PROMPT_VERSION,
                "state": "done",
                "not_before": clock,
                "attempts": 1,
                "created_at": clock,
            }
        )
        unreadable = position in reviews.needs_review
        score = None if unreadable else draw_score(rng, ability, item_id)
        method = "objective" if objective else ("similarity" if qtype == "fill_in" else "judge")
        judged = method == "judge"
        verdicts.append(
            {
                "session_id": record.id,
                "position": position,
                "judge": JUDGE,
                "prompt_version": PROMPT_VERSION,
                "score": score,
                "method": method,
                "needs_review": unreadable,
                "detail": "judge reply unreadable" if unreadable else f"{method} {score}",
                "judge_reply": f"The answer ... Rating: {score}" if judged else None,
                "input_hash": f"{rng.getrandbits(256):064x}",
                "calls": 1 if judged else 0,
                "prompt_tokens": rng.randint(300, 900) if judged else 0,
                "completion_tokens": rng.randint(40, 200) if judged else 0,
                "cost": 0.0004 if judged else 0.0,
                "latency_ms": rng.uniform(400, 3000) if judged else 0.0,
                "created_at": clock + timedelta(seconds=2),
            }
        )
        reason = None
        if unreadable:
            reason = ReviewReason.NEEDS_REVIEW
        elif position in reviews.audit_open or position in reviews.done:
            reason = ReviewReason.AUDIT
        if reason is not None:
            done = position in reviews.done
            tasks.append(
                {
                    "session_id": record.id,
                    "position": position,
                    "reason": reason.value,
                    "judge": JUDGE,
                    "discipline": discipline,
                    "required": 1,
                    "state": (ReviewTaskState.DONE if done else ReviewTaskState.OPEN).value,
                    "created_at": clock + timedelta(seconds=3),
                    "closed_at": clock + timedelta(hours=6) if done else None,
                }
            )
            if done:
                human.append(
                    {
                        "session_id": record.id,
                        "position": position,
                        "judge": human_rater(reviewer),
                        "prompt_version": HUMAN_PROMPT_VERSION,
                        "score": score if rng.random() < 0.8 else rng.randint(0, 3),
                        "method": HUMAN_METHOD,
                        "needs_review": False,
                        "detail": "checked",
                        "created_at": clock + timedelta(hours=6),
                    }
                )
    await db.execute(insert(Answer), answers)
    await db.execute(insert(ScoringJob), jobs)
    await db.execute(insert(Verdict), verdicts)
    if human:
        await db.execute(insert(Verdict), human)
    if tasks:
        await db.execute(insert(ReviewTask), tasks)
    await db.execute(
        update(Exposure)
        .where(Exposure.session_id == record.id)
        .values(delivered_at=record.created_at + timedelta(minutes=1))
    )
    record.state = "scored"
    record.n_delivered = record.n_completed = len(rows)
    record.ended_at = clock + timedelta(minutes=2)
    return len(verdicts)


async def make_sessions(engine: AsyncEngine, plan: Plan, built: Built) -> None:
    """``plan.sessions`` scored sessions per model, opened by the real service, oldest
    first, models taking turns; then one open session per vendor."""
    principal = admin_principal(built)
    limits = limits_for(plan)
    rng = random.Random(17)
    abilities = [-1.0 + 2.5 * m / max(1, plan.models - 1) for m in range(plan.models)]
    index = written = 0
    started = time.perf_counter()
    for _ in range(plan.sessions):
        for m, model_id in enumerate(built.model_ids):
            now = START + timedelta(hours=3 * index)
            async with unit_of_work(engine) as db:
                record = await create_session(
                    db,
                    principal=principal,
                    model_id=model_id,
                    n_items=plan.answers,
                    limits=limits,
                    now=now,
                    judges=JudgeAssignment(),
                )
                written += await fill_session(
                    db,
                    record,
                    ability=abilities[m],
                    rng=rng,
                    reviews=reviews_for(rng, plan, index, record.n_items),
                    reviewer=built.key_ids["admin"],
                )
                built.session_ids.append(record.id)
            index += 1
            if index % 20 == 0:
                elapsed = time.perf_counter() - started
                print(f"    {index} sessions, {written:,} verdicts ({elapsed:.0f} s)", flush=True)
    built.counts["scored_sessions"] = index
    built.counts["judge_verdicts"] = written
    now = START + timedelta(hours=3 * index)
    for v, vendor_model in enumerate(built.model_ids[: plan.vendors]):
        async with unit_of_work(engine) as db:
            await create_session(
                db,
                principal=principal,
                model_id=vendor_model,
                n_items=plan.answers,
                limits=limits,
                now=now + timedelta(minutes=v),
                judges=JudgeAssignment(),
            )
    built.counts["open_sessions"] = min(plan.vendors, len(built.model_ids))


async def make_audit(engine: AsyncEngine, plan: Plan, built: Built) -> None:
    """``plan.audit_rows`` audit rows over the sessions' weeks: API and console requests
    of the keys, refusals among them, in time order."""
    rng = random.Random(23)
    subjects = [*built.key_ids.values(), None]
    orgs: list[uuid.UUID | None] = [built.operator_id, *built.vendor_ids, None]
    span = (max(1, len(built.session_ids)) * 3 + 48) * 3600
    batch: list[dict[str, Any]] = []
    for i in range(plan.audit_rows):
        method, route, statuses = rng.choice(AUDIT_ROUTES)
        session = (
            rng.choice(built.session_ids) if "{session_id}" in route and built.session_ids else None
        )
        batch.append(
            {
                "at": START + timedelta(seconds=span * i / plan.audit_rows),
                "subject": rng.choice(subjects),
                "org_id": rng.choice(orgs),
                "session_id": session,
                "method": method,
                "route": route,
                "status": rng.choice(statuses),
                "client": f"192.0.2.{rng.randint(1, 254)}",
                "repeats": 1,
            }
        )
        if len(batch) == 10_000 or i == plan.audit_rows - 1:
            async with unit_of_work(engine) as db:
                await db.execute(insert(AuditEntry), batch)
            batch = []
    built.counts["audit_rows"] = plan.audit_rows


async def make_health(engine: AsyncEngine, settings: Settings, plan: Plan, built: Built) -> None:
    """A snapshot as the health job computes it (with its flagging), then more flagged
    items through the status-change function if the report flagged fewer than
    ``plan.flagged``."""
    started = time.perf_counter()
    async with unit_of_work(engine) as db:
        judges = await assign_judges(db, settings)
    outcome = await refresh_health(
        engine,
        judges=judges,
        population=settings.health_population,
        min_new_verdicts=0,
        flag=settings.health_flag,
        max_flag_share=settings.health_flag_max_share,
        options=HealthOptions(thresholds=parse_thresholds(settings.health_thresholds)),
        keep_snapshots=settings.health_keep_snapshots,
    )
    step(built, "health snapshot (collect + report + store + flag)", started)
    built.counts["flagged_by_health"] = outcome.flagged
    built.counts["flags_held_back"] = outcome.held_back
    missing = plan.flagged - outcome.flagged
    if missing > 0:
        async with unit_of_work(engine) as db:
            ids = list(
                (
                    await db.execute(
                        select(Item.id)
                        .where(Item.status == ItemStatus.ACTIVE.value)
                        .order_by(Item.id)
                        .limit(missing)
                    )
                ).scalars()
            )
            await change_status(
                db,
                item_ids=ids,
                to=ItemStatus.FLAGGED,
                actor=HEALTH_ACTOR,
                reasons=("low_discrimination",),
                snapshot_id=outcome.snapshot_id,
            )
    built.counts["flagged_added"] = max(0, missing)


async def pick_ids(engine: AsyncEngine, built: Built, bank_file: Path) -> None:
    """An item that has answers, open review tasks, a discipline and a word to search."""
    async with unit_of_work(engine) as db:
        built.item_id = (
            (
                await db.execute(
                    select(Answer.item_id).where(Answer.session_id == built.session_ids[0])
                )
            )
            .scalars()
            .first()
        )
        built.task_ids = list(
            (
                await db.execute(
                    select(ReviewTask.id)
                    .where(ReviewTask.state == ReviewTaskState.OPEN.value)
                    .order_by(ReviewTask.id)
                    .limit(60)
                )
            ).scalars()
        )
        built.discipline = (
            await db.execute(select(Item.discipline).order_by(Item.discipline).limit(1))
        ).scalar_one()
    with bank_file.open(encoding="utf-8") as lines:
        built.search_word = json.loads(next(lines))["question"].split()[1]


async def import_bank(url: str, path: Path) -> tuple[int, float]:
    """``bench_import.import_file`` with ``add_disciplines`` (the synthetic bank's
    ``discipline-N`` are not in the taxonomy): reader, validation, hashing, near-duplicate
    index and COPY, as ``proctor bank import --add-disciplines --no-augment``."""
    engine = create_engine(url)
    started = time.perf_counter()
    try:
        async with unit_of_work(engine) as session:
            report = await import_records(
                session, read_records(path, "jsonl"), augment=False, add_disciplines=True
            )
    finally:
        await engine.dispose()
    return report.items_added, time.perf_counter() - started


async def analyze(url: str) -> None:
    """Planner statistics after the bulk load, as autovacuum would gather shortly."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    async with engine.connect() as connection:
        await connection.exec_driver_sql("VACUUM ANALYZE")
    await engine.dispose()


async def build(url: str, settings: Settings, plan: Plan, args: argparse.Namespace) -> Built:
    built = Built()
    with tempfile.TemporaryDirectory() as tmp:
        bank_file = Path(tmp) / "bank.jsonl"
        started = time.perf_counter()
        write_synthetic_bank(bank_file, args.items)
        added, seconds = await import_bank(url, bank_file)
        built.counts["items"] = added
        step(built, f"bank import ({added:,} items, real importer, {seconds:.1f} s of it)", started)
        engine = create_engine(url)
        try:
            started = time.perf_counter()
            await make_orgs(engine, plan, built)
            step(built, "organisations, keys and models", started)
            started = time.perf_counter()
            await make_sessions(engine, plan, built)
            step(built, "sessions (create_session) + answers, jobs, verdicts, reviews", started)
            started = time.perf_counter()
            await make_audit(engine, plan, built)
            step(built, f"audit rows ({plan.audit_rows:,})", started)
            await make_health(engine, settings, plan, built)
            await pick_ids(engine, built, bank_file)
        finally:
            await engine.dispose()
    started = time.perf_counter()
    await analyze(url)
    step(built, "VACUUM ANALYZE", started)
    return built


# --------------------------------------------------------------------------- #
# Timing
# --------------------------------------------------------------------------- #


@dataclass
class Timing:
    role: str
    label: str
    url: str
    status: int
    cold_ms: float
    ms: list[float]
    bytes: int
    fresh_ms: list[float] = field(default_factory=list)
    """Views each right after a new verdict (admin only): what a page costs while scoring
    runs and figures memoised on the data's version are computed again."""
    refresh_ms: list[float] = field(default_factory=list)
    """For fresh views that left background tasks (a memo refreshed off the request): how
    long they ran after the response."""
    stall_ms: list[float] = field(default_factory=list)
    """The longest the event loop did not run while those tasks ran: any request arriving
    then waits that long."""

    @property
    def median(self) -> float:
        return statistics.median(self.ms)

    @property
    def p95(self) -> float:
        return percentile(self.ms, 0.95)

    @property
    def fresh(self) -> float | None:
        return max(self.fresh_ms) if self.fresh_ms else None

    @property
    def stall(self) -> float | None:
        return max(self.stall_ms) if self.stall_ms else None

    @property
    def refresh(self) -> float | None:
        return max(self.refresh_ms) if self.refresh_ms else None

    @property
    def passed(self) -> bool:
        """p95 of the warm views, and every view after a new verdict, within budget."""
        return self.p95 <= BUDGET_MS and (self.fresh is None or self.fresh <= BUDGET_MS)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def flatten(routes: Sequence[Any]) -> Iterator[Any]:
    """Every leaf route, descending into FastAPI's included-router wrappers."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from flatten(list(inner.routes))
        else:
            yield route


def console_routes(app: FastAPI) -> list[str]:
    """The console's GET page routes, in the app's order."""
    found = []
    for route in flatten(list(app.routes)):
        path = getattr(route, "path", "")
        methods = getattr(route, "methods", None) or set()
        if path.startswith("/console") and "GET" in methods and not SKIPPED_ROUTES.search(path):
            found.append(path)
    return list(dict.fromkeys(found))


def fill(path: str, values: dict[str, str]) -> str | None:
    """``path`` with its ``{name}`` parameters filled; None if one has no value."""
    names = re.findall(r"\{(\w+)(?::\w+)?\}", path)
    if any(name not in values for name in names):
        return None
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values[m.group(1)], path)


def path_values(built: Built) -> dict[str, str]:
    """Values of the path parameters (and of the extra URLs' placeholders)."""
    values = {
        "session_id": str(built.session_ids[len(built.session_ids) // 2]),
        "model_id": str(built.model_ids[0]),
        "item_id": str(built.item_id),
        "org_id": str(built.vendor_ids[0]),
        "other_org": str(built.vendor_ids[1 % len(built.vendor_ids)]),
        "other_model": str(built.model_ids[1 % len(built.model_ids)]),
        "admin_key": built.key_ids["admin"],
        "auditor_key": built.key_ids["auditor"],
        "day": (START + timedelta(days=7)).date().isoformat(),
        "word": built.search_word,
        "discipline": built.discipline,
    }
    if built.task_ids:
        values["task_id"] = str(built.task_ids[0])
    if len(built.task_ids) > 50:
        values["task_after"] = str(built.task_ids[49])
    return values


EXTRA_URLS = (
    ("/console/sessions", "?state=scored"),
    ("/console/sessions", "?page=2"),
    ("/console/sessions", "?org={other_org}&model={other_model}"),
    ("/console/sessions", "?state=scored&mode=fixed&created_from={day}"),
    ("/console/leaderboard", "?baselines=1"),
    ("/console/models", "?page=2"),
    ("/console/models/{model_id}", "?page=2"),
    ("/console/bank/items", "?q={word}"),
    ("/console/bank/items", "?discipline={discipline}&qtype=short_answer"),
    ("/console/bank/items", "?status=flagged"),
    ("/console/bank/items", "?page=2"),
    ("/console/bank/items", "?page=1000"),
    ("/console/bank/health", "?page=2"),
    ("/console/review", "?reason=audit"),
    ("/console/review", "?after={task_after}"),
    ("/console/audit", "?subject={admin_key}"),
    ("/console/audit", "?route=/v1/sessions&status=4xx"),
    ("/console/audit", "?org={other_org}&from={day}"),
    ("/console/audit", "?before=1000"),
    ("/console/audit.csv", "?subject={auditor_key}"),
)
"""Filtered, searched and paged list URLs: (route, query with placeholders)."""


async def time_get(
    client: httpx.AsyncClient,
    url: str,
    repeats: int,
    headers: dict[str, str] | None = None,
    before: Callable[[], Awaitable[None]] | None = None,
) -> tuple[int, float, list[float], int]:
    """Status, cold ms, warm ms per request and body size of ``url`` (``repeats`` warm
    views, ``SLOW_REPEATS`` when the cold one took over ``SLOW_MS``); ``before`` runs
    (untimed) before every request, and background tasks a view leaves are waited for
    (untimed) after it, so they never run into the next timing."""
    times: list[float] = []
    total = repeats + 1
    while len(times) < total:
        if before is not None:
            await before()
        tasks = set(asyncio.all_tasks())
        started = time.perf_counter()
        response = await client.get(url, headers=headers)
        times.append((time.perf_counter() - started) * 1000)
        await settle(background_tasks(tasks))
        if len(times) == 1 and times[0] > SLOW_MS:
            total = min(repeats, SLOW_REPEATS) + 1
    return response.status_code, times[0], times[1:], len(response.content)


async def time_pages(
    client: httpx.AsyncClient,
    role: str,
    pages: Sequence[tuple[str, str]],
    repeats: int,
    before: Callable[[], Awaitable[None]] | None = None,
) -> list[Timing]:
    results = []
    for label, url in pages:
        status, cold, times, size = await time_get(client, url, repeats, before=before)
        results.append(Timing(role, label, url, status, cold, times, size))
        timing = results[-1]
        print(
            f"  {role:<8} {label:<60} {status} cold {cold:8.1f}  p95 {timing.p95:8.1f} ms",
            flush=True,
        )
    return results


class VerdictBump:
    """Adds a verdict of a judge nobody configured (it counts for no score) on one answer:
    the leaderboard's ``data_version`` changes, as it does with every verdict the scoring
    workers write, so memoised figures are computed again."""

    def __init__(self, url: str, session_id: uuid.UUID) -> None:
        self.engine = create_engine(url)
        self.session_id = session_id
        self.n = 0

    async def __call__(self) -> None:
        self.n += 1
        async with unit_of_work(self.engine) as db:
            db.add(
                Verdict(
                    session_id=self.session_id,
                    position=0,
                    judge="bench-live",
                    prompt_version=f"bump-{self.n}",
                    score=3,
                    method="judge",
                )
            )

    async def aclose(self) -> None:
        await self.engine.dispose()


API_MIRRORS = (
    ("/console/leaderboard", "/v1/leaderboard"),
    ("/console/leaderboard", "/v1/leaderboard?view=disciplines"),
    ("/console/leaderboard?baselines=1", "/v1/leaderboard?baselines=1"),
    ("/console/models", "/v1/models"),
    ("/console/models/{model_id}", "/v1/models/{model_id}"),
    ("/console/sessions", "/v1/admin/sessions"),
    ("/console/sessions/{session_id}", "/v1/sessions/{session_id}"),
    ("/console/sessions/{session_id}", "/v1/sessions/{session_id}/scoring"),
    ("/console/bank/items", "/v1/admin/bank/items"),
    ("/console/bank/items/{item_id}", "/v1/admin/bank/items/{item_id}/history"),
    ("/console/bank/health", "/v1/admin/bank/health"),
    ("/console/judges", "/v1/admin/judges"),
    ("/console/judges", "/v1/admin/judges/panel-agreement"),
    ("/console/review", "/v1/review/tasks"),
    ("/console/review/{task_id}", "/v1/review/tasks/{task_id}"),
    ("/console/audit", "/v1/admin/audit"),
)
"""(the console page, a JSON route with the same figures)."""


def api_routes(app: FastAPI) -> set[str]:
    return {
        getattr(route, "path", "")
        for route in flatten(list(app.routes))
        if "GET" in (getattr(route, "methods", None) or set())
    }


async def time_api(
    client: httpx.AsyncClient, app: FastAPI, built: Built, repeats: int
) -> list[tuple[str, Timing]]:
    """The JSON routes the pages mirror, as admin: (the page's label, the API's timing)."""
    known = api_routes(app)
    values = path_values(built)
    headers = await login(client, built.keys["admin"])
    results = []
    for page_label, api in API_MIRRORS:
        url = fill(api, values)
        if api.split("?")[0] not in known or url is None:
            continue
        status, cold, times, size = await time_get(client, url, repeats, headers)
        timing = Timing("admin", api, url, status, cold, times, size)
        print(f"  api      {api:<60} {status} cold {cold:8.1f}  p95 {timing.p95:8.1f} ms")
        results.append((page_label, timing))
    return results


# --------------------------------------------------------------------------- #
# Profiling a page that misses
# --------------------------------------------------------------------------- #

REPO_FRAME = re.compile(r"^(server|bank|judge|clients)/")


async def profile_page(
    client: httpx.AsyncClient,
    app: FastAPI,
    url: str,
    before: Callable[[], Awaitable[None]] | None = None,
    background: bool = False,
) -> str:
    """One request of ``url`` under cProfile, with the SQL it ran (and, with
    ``background``, the tasks it left running until they end): the report's text.
    cProfile sees the event loop's thread only: work in ``asyncio.to_thread`` shows as
    waiting, and so does the database (its statements are listed with their times)."""
    if before is not None:
        await before()
    tasks = set(asyncio.all_tasks())
    engine = app.state.runtime.engine.sync_engine
    statements: list[tuple[float, str]] = []
    starts: list[float] = []

    def on_before(*_: Any) -> None:
        starts.append(time.perf_counter())

    def on_after(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        spent = (time.perf_counter() - starts.pop()) * 1000 if starts else 0.0
        statements.append((spent, " ".join(statement.split())))

    event.listen(engine, "before_cursor_execute", on_before)
    event.listen(engine, "after_cursor_execute", on_after)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    try:
        await client.get(url)
        spawned = background_tasks(tasks)
        if background and spawned:
            await settle(spawned)
    finally:
        profiler.disable()
        event.remove(engine, "before_cursor_execute", on_before)
        event.remove(engine, "after_cursor_execute", on_after)
    wall = (time.perf_counter() - started) * 1000
    return profile_text(profiler, statements, wall)


def profile_text(
    profiler: cProfile.Profile, statements: list[tuple[float, str]], wall: float
) -> str:
    out = io.StringIO()
    sql_ms = sum(ms for ms, _ in statements)
    out.write(
        f"wall {wall:.1f} ms (under the profiler); {len(statements)} SQL statements, "
        f"{sql_ms:.1f} ms from send to result; slowest:\n"
    )
    for ms, statement in sorted(statements, reverse=True)[:5]:
        out.write(f"    {ms:8.1f} ms  {statement[:240]}\n")
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [
        (cumtime, tottime, calls, f"{short_path(filename)}:{line}({name})")
        for (filename, line, name), (_cc, calls, tottime, cumtime, _callers) in stats.items()
    ]
    out.write("  top frames by cumulative time (this repository's code):\n")
    mine = [r for r in rows if REPO_FRAME.search(r[3])]
    for cumtime, tottime, calls, where in sorted(mine, reverse=True)[:15]:
        out.write(
            f"    {cumtime * 1000:8.1f} ms cum {tottime * 1000:8.1f} ms own {calls:7d}x  {where}\n"
        )
    out.write("  top frames by own time (all code):\n")
    for cumtime, tottime, calls, where in sorted(rows, key=lambda r: r[1], reverse=True)[:12]:
        out.write(
            f"    {tottime * 1000:8.1f} ms own {cumtime * 1000:8.1f} ms cum {calls:7d}x  {where}\n"
        )
    return out.getvalue()


def short_path(filename: str) -> str:
    for marker in ("/site-packages/", str(ROOT) + "/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# --------------------------------------------------------------------------- #
# The report
# --------------------------------------------------------------------------- #


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def mark(timing: Timing) -> str:
    if timing.status >= 400:
        return f"refused ({timing.status}), not a page for this role"
    if timing.p95 > BUDGET_MS:
        text = "MISS"
    elif timing.fresh is not None and timing.fresh > BUDGET_MS:
        text = "MISS after a new verdict"
    else:
        text = "PASS"
        if timing.cold_ms > BUDGET_MS:
            text += " (first view over)"
    if timing.stall is not None and timing.stall > BUDGET_MS:
        text += f"; its background refresh stalls the server {timing.stall:.0f} ms"
    if timing.status >= 300:
        text += f" (status {timing.status})"
    return text


def number(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}"


def table(results: Sequence[Timing]) -> Iterator[str]:
    yield (
        f"{'path':<64} {'status':>6} {'n':>3} {'cold':>8} {'median':>8} {'p95':>8} {'max':>8} "
        f"{'fresh':>8} {'bg':>8} {'stall':>8} {'bytes':>9}  verdict (300 ms)"
    )
    for r in results:
        yield (
            f"{r.label:<64} {r.status:>6} {len(r.ms):>3} {r.cold_ms:8.1f} {r.median:8.1f} "
            f"{r.p95:8.1f} {max(r.ms):8.1f} {number(r.fresh):>8} {number(r.refresh):>8} "
            f"{number(r.stall):>8} {r.bytes:>9}  {mark(r)}"
        )


def ratio_table(pages: Sequence[Timing], api: Sequence[tuple[str, Timing]]) -> Iterator[str]:
    by_label = {p.label: p for p in pages if p.role == "admin"}
    yield (
        f"{'API route (admin)':<40} {'status':>6} {'n':>3} {'median':>8} {'p95':>8}   "
        f"{'page':<34} {'median':>8} {'fresh':>8}  page/API: warm  fresh"
    )
    for page_label, timing in api:
        page = by_label.get(page_label)
        median = page.median if page else math.nan
        fresh = page.fresh if page and page.fresh is not None else math.nan
        warm_ratio = median / timing.median if timing.median > 0 else math.nan
        fresh_ratio = fresh / timing.median if timing.median > 0 else math.nan
        yield (
            f"{timing.label:<40} {timing.status:>6} {len(timing.ms):>3} {timing.median:8.1f} "
            f"{timing.p95:8.1f}   {page_label:<34} {median:8.1f} {number(fresh):>8}  "
            f"{warm_ratio:8.2f}x {fresh_ratio:6.2f}x"
        )


def as_json(timing: Timing) -> dict[str, Any]:
    data = asdict(timing)
    data.update(median_ms=timing.median, p95_ms=timing.p95, max_ms=max(timing.ms))
    data["pass"] = timing.passed
    return data


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #


def page_list(app: FastAPI, built: Built) -> tuple[list[tuple[str, str]], list[str]]:
    """(label, url) of every page to time, and the routes that could not be filled."""
    routes = console_routes(app)
    values = path_values(built)
    pages, unfilled = [], []
    for route in routes:
        url = fill(route, values)
        if url is None:
            unfilled.append(route)
        else:
            pages.append((route, url))
    for route, query in EXTRA_URLS:
        url = fill(route + query, values)
        if route in routes and url is not None:
            pages.append((route + query, url))
    return pages, unfilled


@dataclass
class Measured:
    pages: list[Timing]
    api: list[tuple[str, Timing]]
    unfilled: list[str]
    profiles: dict[str, str]


async def measure(settings: Settings, built: Built, args: argparse.Namespace) -> Measured:
    bump = VerdictBump(settings.database_url, built.session_ids[0])
    try:
        async with running_api(settings) as (app, client):
            pages, unfilled = page_list(app, built)
            found = Measured([], [], unfilled, {})
            for role in ("admin", "auditor"):
                client.cookies.clear()
                response = await console_login(client, built.keys[role])
                assert response.status_code == 303, response.text
                print(f"\n{role}: {len(pages)} console URLs, 1 cold + {args.repeats} views each")
                timings = await time_pages(client, role, pages, args.repeats)
                found.pages += timings
                if role == "admin" and args.fresh_repeats > 0:
                    await time_fresh(client, timings, bump, args.fresh_repeats)
                await profile_misses(client, app, timings, bump, args, found)
            print("\ntiming the JSON API routes the pages mirror (admin)", flush=True)
            found.api = await time_api(client, app, built, args.repeats)
            return found
    finally:
        await bump.aclose()


async def time_fresh(
    client: httpx.AsyncClient, timings: Sequence[Timing], bump: VerdictBump, repeats: int
) -> None:
    """Every page again, each view right after a new verdict; background tasks the view
    leaves (a memo refreshed off the request path) are waited for, timed, and the event
    loop's longest stall while they run recorded."""
    print(f"\nadmin: each URL {repeats}x right after a new verdict")
    for timing in timings:
        if timing.status >= 400:
            continue
        for _ in range(repeats):
            await bump()
            before = set(asyncio.all_tasks())
            started = time.perf_counter()
            await client.get(timing.url)
            timing.fresh_ms.append((time.perf_counter() - started) * 1000)
            spawned = background_tasks(before)
            if spawned:
                refresh, stall = await settle(spawned)
                timing.refresh_ms.append(refresh)
                timing.stall_ms.append(stall)
        print(
            f"  admin    {timing.label:<60} fresh {number(timing.fresh):>8} ms; background "
            f"{number(timing.refresh):>8} ms, loop stalled {number(timing.stall):>8} ms",
            flush=True,
        )


def background_tasks(before: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """Tasks running this repository's code that were started since ``before`` and still
    run (not the audit writer's ``Queue.get`` waits and the like)."""
    found = []
    for task in asyncio.all_tasks() - before:
        code = getattr(task.get_coro(), "cr_code", None)
        if not task.done() and code is not None and code.co_filename.startswith(str(ROOT)):
            found.append(task)
    return found


async def settle(tasks: Sequence[asyncio.Task[Any]], limit_s: float = 600.0) -> tuple[float, float]:
    """Wait for ``tasks``: (ms until all are done, the event loop's longest stall in ms,
    measured by a 5 ms tick)."""
    tick = 0.005
    started = last = time.perf_counter()
    worst = 0.0
    pending = set(tasks)
    while pending and time.perf_counter() - started < limit_s:
        _, pending = await asyncio.wait(pending, timeout=tick)
        now = time.perf_counter()
        worst = max(worst, now - last - tick)
        last = now
    return (time.perf_counter() - started) * 1000, max(0.0, worst) * 1000


async def profile_misses(
    client: httpx.AsyncClient,
    app: FastAPI,
    timings: Sequence[Timing],
    bump: VerdictBump,
    args: argparse.Namespace,
    found: Measured,
) -> None:
    """A profile of one view of each URL over ``--profile-over`` (once per URL across
    roles), and of one view after a new verdict of each route over it (once per route)."""
    done = {name.split(" ", 1)[1] for name in found.profiles}
    for timing in timings:
        if timing.status >= 400:
            continue
        if timing.p95 > args.profile_over and timing.label not in done:
            text = await profile_page(client, app, timing.url)
            found.profiles[f"{timing.role} {timing.label}"] = text
            done.add(timing.label)
        route = timing.label.split("?")[0]
        fresh, stall = timing.fresh or 0.0, timing.stall or 0.0
        if max(fresh, stall) > args.profile_over and route not in done:
            text = await profile_page(client, app, timing.url, before=bump, background=True)
            found.profiles[f"{timing.role} {route} (after a new verdict, with its background)"] = (
                text
            )
            done.add(route)


def data_line(plan: Plan, built: Built) -> str:
    counts = built.counts
    return (
        f"data: {counts.get('items', 0):,} items; {counts.get('judge_verdicts', 0):,} verdicts "
        f"of {JUDGE} ({plan.models} models x {plan.sessions} sessions x {plan.answers} "
        f"answers = {counts.get('scored_sessions', 0)} scored sessions) + {plan.done_reviews} "
        f"human verdicts; {counts.get('open_sessions', 0)} open sessions; {plan.review_tasks} "
        f"open review tasks; {counts.get('audit_rows', 0):,} audit rows (+ the run's own); "
        f"{plan.vendors + 1} organisations; flagged items: {counts.get('flagged_by_health', 0)} "
        f"by the health job (held back {counts.get('flags_held_back', 0)}) + "
        f"{counts.get('flagged_added', 0)} more"
    )


def report(args: argparse.Namespace, plan: Plan, built: Built, found: Measured) -> dict[str, Any]:
    info = machine()
    print("\n" + "=" * 110)
    print(f"console server time -- {info['date']}, {info['cores']} cores ({info['cpu']})")
    print(data_line(plan, built))
    print(
        f"ms of server time: time.perf_counter around client.get, in process (ASGI, no "
        f"network). cold: the URL's first view; n: warm views timed ({args.repeats}, "
        f"{SLOW_REPEATS} when the first took over {SLOW_MS:.0f} ms) -> median, p95, max; "
        f"fresh (admin): the slowest of {args.fresh_repeats} view(s) right after a new verdict, "
        "as while scoring runs (figures memoised on the data's version are computed again); "
        "bg: how long background tasks that view left ran (a memo refreshed off the request); "
        "stall: the longest the event loop did not run meanwhile (any request then waits); "
        "verdict: p95 and fresh within 300 ms"
    )
    print("build: " + "; ".join(f"{k} {v:.1f} s" for k, v in built.seconds.items()))
    for role in ("admin", "auditor"):
        print(f"\n-- {role} --")
        for line in table([p for p in found.pages if p.role == role]):
            print(line)
    print("\n-- JSON API baseline --")
    for line in ratio_table(found.pages, found.api):
        print(line)
    if found.unfilled:
        print("\nroutes not timed (no value for a path parameter): " + ", ".join(found.unfilled))
    timed = [p for p in found.pages if p.status < 400]
    misses = [p for p in timed if not p.passed]
    print(
        f"\n{len(timed) - len(misses)} of {len(timed)} page timings within {BUDGET_MS:.0f} ms "
        f"(p95 and fresh); misses: {', '.join(f'{p.role} {p.label}' for p in misses) or 'none'}"
    )
    stalls = [p for p in timed if p.stall is not None and p.stall > BUDGET_MS]
    if stalls:
        print(
            "the event loop stood still over 300 ms in the background work after a new verdict "
            "of: "
            + ", ".join(f"{p.label} ({p.stall:.0f} ms)" for p in stalls)
            + " -- every request arriving meanwhile waits"
        )
    for name, text in found.profiles.items():
        print(f"\n-- profile: {name} --\n{text}", end="")
    return {
        "machine": info,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "plan": asdict(plan),
        "counts": built.counts,
        "build_seconds": built.seconds,
        "budget_ms": BUDGET_MS,
        "pages": [as_json(p) for p in found.pages],
        "api": [{"page": label, **as_json(t)} for label, t in found.api],
        "unfilled": found.unfilled,
        "profiles": found.profiles,
    }


async def main_async(
    url: str, redis_url: str, data_dir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    plan = plan_of(args)
    settings = test_settings(
        url,
        redis_url=redis_url,
        judges=[{"name": JUDGE, "base_url": "http://127.0.0.1:9/v1", "model": "judge"}],
        data_dir=data_dir,  # the audit spool, should the writer need one: thrown away too
    )
    print(
        f"building: {args.items:,} items, {plan.models} models x {plan.sessions} sessions x "
        f"{plan.answers} answers",
        flush=True,
    )
    built = await build(url, settings, plan, args)
    # A server process does not carry the build's garbage: collect it and keep the collector
    # from rescanning what is left, so the timings are of the pages alone.
    gc.collect()
    gc.freeze()
    found = await measure(settings, built, args)
    return report(args, plan, built, found)


def main() -> None:
    install_test_keyring()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--verdicts", type=int, default=200_000)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=10, help="scored sessions per model")
    parser.add_argument("--vendors", type=int, default=4)
    parser.add_argument("--review-tasks", type=int, default=500, help="open review tasks")
    parser.add_argument("--done-reviews", type=int, default=300)
    parser.add_argument("--audit-rows", type=int, default=100_000)
    parser.add_argument("--flagged", type=int, default=200, help="at least this many flagged")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--fresh-repeats",
        type=int,
        default=1,
        help="views of each page (admin) right after a new verdict (0: none)",
    )
    parser.add_argument(
        "--profile-over", type=float, default=BUDGET_MS, help="profile pages whose p95 exceeds this"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    started = time.perf_counter()
    with (
        postgres_server(settings=DURABLE) as server,
        redis_server() as redis,
        tempfile.TemporaryDirectory() as data_dir,
    ):
        server.create_database("bench")
        url = server.url("bench")
        upgrade(url)
        result = asyncio.run(main_async(url, redis.url, Path(data_dir), args))
    result["wall_s"] = round(time.perf_counter() - started, 1)
    print(f"\nwall time {result['wall_s']:.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
