"""Memoised reads: the same figures while the data they come from is unchanged.

The console reads the leaderboard on every page view, and on a big deployment computing it
takes seconds; ``GET /v1/leaderboard`` must never serve a board older than a change the
request could have seen. Both read through one per-process memo keyed on a *data version*
(``data_version``: on PostgreSQL the sum of the ``leaderboard_changes`` counters the
database's triggers bump, elsewhere counts of the tables), which changes whenever an input
of the leaderboard may have. The console takes a board computed before the latest change
at once, marked stale, while one refresh per key computes the new one in a thread of its
own (``cached_leaderboard``, ``cached_session_scores``, ``cached_on_data``); the API waits
for a build on data at least as new as the version it read (``fresh_leaderboard``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.pool import NullPool

from judge.prompts import PROMPT_VERSION
from server.calibration.gate import calibration_of
from server.config import Settings
from server.database import create_engine, unit_of_work
from server.leaderboard.models import LeaderboardChange, RankingAnchor
from server.leaderboard.service import (
    LeaderboardData,
    SessionScore,
    configured_leaderboard,
    session_scores,
)
from server.registry.models import RegisteredModel
from server.review.models import ReviewTask
from server.review.states import ReviewTaskState
from server.scoring.assignment import JudgeAssignment
from server.scoring.models import Verdict
from server.sessions.models import EvalSession
from server.sessions.states import SCORED_STATE_VALUES, SessionState

_T = TypeVar("_T")
log = logging.getLogger(__name__)

MEMO_ENTRIES = 32
"""Leaderboards and session-score lists kept per process (least recently used dropped)."""
_memo: OrderedDict[Hashable, tuple[Hashable, Any]] = OrderedDict()


async def data_version(db: AsyncSession) -> Hashable:
    """A value that changes whenever an input of the leaderboard may have: a verdict added
    or removed, a session scored or reviewed, a review task opened or closed, an anchor
    designated, a model registered; with the database's URL.

    On PostgreSQL it is the sum of ``leaderboard_changes``, which the database's triggers
    bump on every such write, whoever makes it (any worker, process or host): sixteen rows,
    whatever the number of verdicts. It is read before the data it labels, so a value
    computed under it is never older than it. Elsewhere (SQLite) it is ``_counted_version``.
    """
    if db.get_bind().dialect.name == "postgresql":
        total = await db.scalar(select(func.sum(LeaderboardChange.n)))
        return (str(db.get_bind().engine.url), "changes", int(total or 0))
    return await _counted_version(db)


async def _counted_version(db: AsyncSession) -> Hashable:
    """The data version from the tables: a verdict added or removed (its highest id and
    count), and the counts behind the other inputs. One statement of index-backed
    aggregates (a count of the verdicts is the dearest)."""
    scored = EvalSession.state.in_(SCORED_STATE_VALUES)
    is_open = ReviewTask.state == ReviewTaskState.OPEN.value
    figures = (
        await db.execute(
            select(
                select(func.max(Verdict.id)).scalar_subquery(),
                select(func.count()).select_from(Verdict).scalar_subquery(),
                select(func.count()).select_from(EvalSession).where(scored).scalar_subquery(),
                select(func.count())
                .select_from(EvalSession)
                .where(EvalSession.state == SessionState.REVIEWED.value)
                .scalar_subquery(),
                select(func.count()).select_from(ReviewTask).where(is_open).scalar_subquery(),
                select(func.count()).select_from(ReviewTask).scalar_subquery(),
                select(func.max(RankingAnchor.id)).scalar_subquery(),
                select(func.count()).select_from(RegisteredModel).scalar_subquery(),
            )
        )
    ).one()
    return (str(db.get_bind().engine.url), *figures)


def _judges_key(judges: JudgeAssignment) -> Hashable:
    return (judges.default, judges.panel, tuple(sorted(judges.by_discipline.items())), judges.rule)


_refreshing: dict[Hashable, asyncio.Task[None]] = {}


async def _memoised(
    db: AsyncSession,
    key: Hashable,
    compute: Callable[[AsyncSession], Awaitable[_T]],
    *,
    refresh_on: AsyncEngine | None = None,
) -> tuple[_T, bool]:
    """``compute(db)``'s value and whether it is fresh, reused while ``data_version`` is
    unchanged. When the data has changed since: with ``refresh_on`` (the server's engine),
    the value computed on the older data comes back at once (not fresh) and one refresh
    per key computes the new one in a thread of its own (``_compute_in_thread``: seconds
    of Python work do not hold the server's event loop); without, it is computed now. A
    value never computed is computed now either way."""
    key = (str(db.get_bind().engine.url), key)  # never another database's board, stale or not
    version = await data_version(db)
    found = _memo.get(key)
    if found is not None and found[0] == version:
        _memo.move_to_end(key)
        return found[1], True
    if found is not None and refresh_on is not None and _has_file(refresh_on):
        _refresh_later(key, compute, refresh_on)
        return found[1], False
    value = await compute(db)
    _remember(key, version, value)
    return value, True


def _has_file(engine: AsyncEngine) -> bool:
    """Whether another engine on the same URL sees the same data (not in-memory SQLite)."""
    return engine.dialect.name != "sqlite" or engine.url.database not in (None, "", ":memory:")


def _remember(key: Hashable, version: Hashable, value: object) -> None:
    """Keep ``value`` as ``key``'s, unless the memo holds one computed on newer data: a
    build that read the data before a change can finish after a request that computed
    the board on it (a refresh thread against an admin's designation), and putting the
    older board back would serve it, stale, on the next page view."""
    found = _memo.get(key)
    if found is not None and found[0] != version and _covers(found[0], version):
        return
    _memo[key] = (version, value)
    _memo.move_to_end(key)
    while len(_memo) > MEMO_ENTRIES:
        _memo.popitem(last=False)


def _refresh_later(
    key: Hashable, compute: Callable[[AsyncSession], Awaitable[Any]], engine: AsyncEngine
) -> None:
    """Compute ``key``'s value on the current data in a thread, once at a time per key."""
    running = _refreshing.get(key)
    if running is not None and not running.done():
        return
    url = engine.url.render_as_string(hide_password=False)

    async def refresh() -> None:
        try:
            version, value = await asyncio.to_thread(_compute_in_thread, compute, url)
        except Exception:
            log.exception("refreshing the cached leaderboard failed")
            return
        _remember(key, version, value)  # on the server's loop: the memo has one writer

    _refreshing[key] = asyncio.create_task(refresh(), name="leaderboard-refresh")


def _compute_in_thread(
    compute: Callable[[AsyncSession], Awaitable[_T]], url: str
) -> tuple[Hashable, _T]:
    """``compute`` and the data version it saw, on an event loop and engine of this
    thread's own (asyncpg connections belong to one loop)."""

    async def run() -> tuple[Hashable, _T]:
        engine = create_engine(url, poolclass=NullPool)  # one connection, closed after
        try:
            async with unit_of_work(engine) as db:
                return await data_version(db), await compute(db)
        finally:
            await engine.dispose()

    return asyncio.run(run())


async def cached_on_data(
    db: AsyncSession, key: Hashable, compute: Callable[[AsyncSession], Awaitable[_T]]
) -> _T:
    """``compute(db)``, computed again only when ``data_version`` changes: for figures of
    the verdicts and reviews that pages show on every view (agreement with bootstraps)."""
    value, _ = await _memoised(db, ("on-data", key), compute)
    return value


async def cached_leaderboard(
    db: AsyncSession,
    *,
    settings: Settings,
    judges: JudgeAssignment,
    baselines: bool = False,
    diagnostics: bool = False,
    refresh_on: AsyncEngine | None = None,
) -> LeaderboardData:
    """``configured_leaderboard``, computed again only when ``data_version`` changes (the
    judge's calibration is read fresh every time): the console reads the board on every
    page view, and on a big deployment computing it takes seconds. With ``refresh_on``, a
    board computed before the latest change is returned at once with ``stale`` set while
    a thread computes the new one (``_memoised``)."""
    key = _board_key(settings, judges, baselines=baselines, diagnostics=diagnostics)

    async def compute(own: AsyncSession) -> LeaderboardData:
        return await configured_leaderboard(
            own, settings=settings, judges=judges, baselines=baselines, diagnostics=diagnostics
        )

    data, fresh = await _memoised(db, key, compute, refresh_on=refresh_on)
    calibration = await calibration_of(db, settings, judges.default)
    return dataclasses.replace(data, calibration=calibration, stale=not fresh)


@dataclass(frozen=True, slots=True)
class _Build:
    """A computation of one memo key in a thread, giving ``(version, value)``; ``mark``
    orders its start against the version reads of requests (``_marks``)."""

    mark: int
    task: asyncio.Task[tuple[Hashable, Any]]


_builds: dict[Hashable, _Build] = {}
_marks = itertools.count()


async def _fresh(
    db: AsyncSession,
    key: Hashable,
    compute: Callable[[AsyncSession], Awaitable[_T]],
    *,
    engine: AsyncEngine,
) -> _T:
    """``compute``'s value on data at least as new as the data version read now: the
    memo's when its version is that one (one read of ``leaderboard_changes``), else a
    build's in a thread of its own (the server's event loop keeps serving; on SQLite, on
    the request's own connection, computed now). One build at a
    time per key, which every request arriving meanwhile joins; a request takes its value
    if the build read a version no older than its own (``_covers``) or started after the
    request's version read, and otherwise waits for the next build. Never a value older
    than a change committed before the request read the version."""
    key = (str(db.get_bind().engine.url), key)
    version = await data_version(db)
    found = _memo.get(key)
    if found is not None and found[0] == version:
        _memo.move_to_end(key)
        return found[1]  # type: ignore[no-any-return]
    if engine.dialect.name != "postgresql":  # SQLite: a second connection may wait on a lock
        value = await compute(db)
        _remember(key, version, value)
        return value
    mark = next(_marks)
    while True:
        build = _builds.get(key)
        if build is None or build.task.done():
            build = _Build(next(_marks), asyncio.create_task(_build(key, compute, engine)))
            _builds[key] = build
        built, value = await asyncio.shield(build.task)  # a failed build fails its requests
        if build.mark > mark or _covers(built, version):
            return value


def _covers(built: Hashable, seen: Hashable) -> bool:
    """Whether data of version ``built`` include every change counted in ``seen``: the
    change counter only grows (PostgreSQL); other versions only by equality."""
    counted = isinstance(built, tuple) and isinstance(seen, tuple) and len(built) == len(seen) == 3
    if counted and built[:2] == seen[:2] and built[1] == "changes":  # type: ignore[index]
        return bool(built[2] >= seen[2])  # type: ignore[index]
    return built == seen


async def _build(
    key: Hashable, compute: Callable[[AsyncSession], Awaitable[_T]], engine: AsyncEngine
) -> tuple[Hashable, _T]:
    url = engine.url.render_as_string(hide_password=False)
    version, value = await asyncio.to_thread(_compute_in_thread, compute, url)
    _remember(key, version, value)  # on the server's loop: the memo has one writer
    return version, value


async def fresh_leaderboard(
    db: AsyncSession,
    *,
    settings: Settings,
    judges: JudgeAssignment,
    engine: AsyncEngine,
    baselines: bool = False,
    diagnostics: bool = False,
) -> LeaderboardData:
    """``configured_leaderboard`` as ``GET /v1/leaderboard`` serves it: from the memo
    while ``data_version`` is unchanged, else computed off the event loop and waited for
    (``_fresh``): never a board older than the latest verdict, review or anchor the
    request could have seen. The board is the console's (diagnostics included, dropped
    here unless asked for), so the API and the console share one computation; the
    judge's calibration is read fresh every time."""
    key = _board_key(settings, judges, baselines=baselines, diagnostics=True)

    async def compute(own: AsyncSession) -> LeaderboardData:
        return await configured_leaderboard(
            own, settings=settings, judges=judges, baselines=baselines, diagnostics=True
        )

    data = await _fresh(db, key, compute, engine=engine)
    calibration = await calibration_of(db, settings, judges.default)
    return dataclasses.replace(
        data, calibration=calibration, diagnostics=data.diagnostics if diagnostics else None
    )


def _board_key(
    settings: Settings, judges: JudgeAssignment, *, baselines: bool, diagnostics: bool
) -> Hashable:
    return (
        "leaderboard",
        _judges_key(judges),
        PROMPT_VERSION,
        settings.leaderboard_resamples,
        settings.leaderboard_tie_threshold,
        settings.contamination_gap_threshold,
        baselines,
        diagnostics,
    )


async def cached_session_scores(
    db: AsyncSession,
    *,
    model_id: uuid.UUID,
    judges: JudgeAssignment,
    prompt_version: str,
    refresh_on: AsyncEngine | None = None,
) -> list[SessionScore]:
    """``session_scores``, computed again only when ``data_version`` changes (stale while
    refreshing with ``refresh_on``, as ``cached_leaderboard``)."""
    key = ("session_scores", model_id, _judges_key(judges), prompt_version)

    async def compute(own: AsyncSession) -> list[SessionScore]:
        return await session_scores(
            own, model_id=model_id, judges=judges, prompt_version=prompt_version
        )

    scores, _ = await _memoised(db, key, compute, refresh_on=refresh_on)
    return list(scores)
