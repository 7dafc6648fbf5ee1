"""Reading scored sessions for the leaderboard, the anchor designation, and contamination.

The statistics are pure (``judge.ranking``, ``judge.contamination``); this module only
gathers their input from the database: for every model, the 0-3 scores of its scored
sessions by discipline (the verdicts of one judge and prompt version), the end-to-end time
of every answer and the tokens clients reported. Fixed sessions feed the ranking; replay
and anchor-set sessions feed only the contamination report.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Item
from judge.contamination.generalisation_gap import GapReport, ScoreEstimate, generalisation_gap
from judge.contamination.replay import ReplayRate, replay_rate
from judge.ranking.leaderboard import (
    BoardDiagnostics,
    Leaderboard,
    ModelRecord,
    board_diagnostics,
    build_leaderboard,
)
from judge.ranking.pairwise import (
    BradleyTerryError,
    BradleyTerryResult,
    EloResult,
    bradley_terry,
    comparisons_from_items,
    elo,
)
from judge.ranking.scores import MAX_SCORE
from server.errors import NotFound
from server.leaderboard.models import RankingAnchor
from server.orgs.models import Organisation
from server.registry.models import RegisteredModel
from server.scoring.models import Verdict
from server.sessions.models import Answer, EvalSession
from server.sessions.modes import SessionMode
from server.sessions.states import SCORED_STATE_VALUES


@dataclass
class _Collected:
    """What the database holds for one model, by session mode."""

    sessions: dict[uuid.UUID, list[int]] = field(default_factory=dict)
    items: dict[uuid.UUID, list[int]] = field(default_factory=lambda: defaultdict(list))
    """Item id -> its scores (per-item comparisons between models, for Elo and BT)."""
    disciplines: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    latencies_s: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    n_with_usage: int = 0


@dataclass(frozen=True, slots=True)
class Contamination:
    """Per model key: the replay rate (replay sessions) and the generalisation gap
    (fixed sessions versus anchor-set sessions)."""

    replay: dict[str, ReplayRate]
    gap: GapReport | None


@dataclass(frozen=True, slots=True)
class Baselines:
    """Elo (LLMEval-Fair, Zhang et al., app. D) and Bradley-Terry ratings from per-item
    comparisons: two models compared on every item both were served (their mean score on
    it)."""

    n_comparisons: int
    elo: EloResult | None
    bradley_terry: BradleyTerryResult | None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class LeaderboardData:
    board: Leaderboard
    contamination: Contamination
    judge: str
    prompt_version: str
    baselines: Baselines | None = None
    diagnostics: BoardDiagnostics | None = None


async def _scores_by_model(
    db: AsyncSession, *, mode: SessionMode, judge: str, prompt_version: str
) -> dict[uuid.UUID, _Collected]:
    """Scored sessions of ``mode``: readable verdicts only (answers still needing review
    are left out of the scores, never counted as 0)."""
    rows = await db.execute(
        select(
            EvalSession.model_id,
            EvalSession.id,
            Verdict.score,
            Item.discipline,
            Answer.item_id,
            Answer.delivered_at,
            Answer.submitted_at,
            Answer.prompt_tokens,
            Answer.completion_tokens,
        )
        .join(Verdict, Verdict.session_id == EvalSession.id)
        .join(
            Answer,
            and_(Answer.session_id == Verdict.session_id, Answer.position == Verdict.position),
        )
        .join(Item, Item.id == Answer.item_id)
        .where(
            EvalSession.state.in_(SCORED_STATE_VALUES),
            EvalSession.mode == mode.value,
            Verdict.judge == judge,
            Verdict.prompt_version == prompt_version,
            Verdict.score.is_not(None),
        )
        .order_by(EvalSession.created_at, EvalSession.id, Verdict.position)
    )
    out: dict[uuid.UUID, _Collected] = defaultdict(_Collected)
    for (
        model_id,
        session_id,
        score,
        discipline,
        item_id,
        delivered,
        submitted,
        p_tok,
        c_tok,
    ) in rows:
        entry = out[model_id]
        entry.sessions.setdefault(session_id, []).append(score)
        entry.items[item_id].append(score)
        entry.disciplines[discipline].append(score)
        entry.latencies_s.append(max(0.0, (submitted - delivered).total_seconds()))
        if p_tok is not None and c_tok is not None:
            entry.prompt_tokens += p_tok
            entry.completion_tokens += c_tok
            entry.n_with_usage += 1
    return out


async def _models(
    db: AsyncSession, ids: set[uuid.UUID]
) -> dict[uuid.UUID, tuple[RegisteredModel, str]]:
    rows = await db.execute(
        select(RegisteredModel, Organisation.name)
        .join(Organisation, Organisation.id == RegisteredModel.org_id)
        .where(RegisteredModel.id.in_(ids))
    )
    return {model.id: (model, org) for model, org in rows.tuples()}


def _display_names(models: dict[uuid.UUID, tuple[RegisteredModel, str]]) -> dict[uuid.UUID, str]:
    """The model's name, qualified by snapshot and then organisation where names collide."""
    names: dict[uuid.UUID, str] = {}
    counts: dict[str, int] = defaultdict(int)
    for model, _org in models.values():
        counts[model.name] += 1
    for model_id, (model, org) in models.items():
        name = model.name
        if counts[name] > 1:
            name = f"{model.name} ({model.api_snapshot}, {org})"
        names[model_id] = name
    return names


async def leaderboard(
    db: AsyncSession,
    *,
    judge: str,
    prompt_version: str,
    n_resamples: int,
    threshold: float,
    gap_threshold: float,
    baselines: bool = False,
    diagnostics: bool = False,
) -> LeaderboardData:
    """The leaderboard from the verdicts of ``judge`` and ``prompt_version``, with the
    current anchor designation, the contamination report and, on request, Elo and
    Bradley-Terry ratings (``baselines``) and the ReLE diagnostics of the discipline scores
    (``diagnostics``, over ReLE's weighting schemes when the disciplines are the
    LLMEval-Fair ten)."""
    fixed = await _scores_by_model(
        db, mode=SessionMode.FIXED, judge=judge, prompt_version=prompt_version
    )
    replay = await _scores_by_model(
        db, mode=SessionMode.REPLAY, judge=judge, prompt_version=prompt_version
    )
    anchor_set = await _scores_by_model(
        db, mode=SessionMode.ANCHOR, judge=judge, prompt_version=prompt_version
    )
    models = await _models(db, set(fixed) | set(replay) | set(anchor_set))
    names = _display_names(models)
    current = await current_anchor(db)
    anchor_key = str(current.model_id) if current is not None and current.model_id else None
    records = [
        _record(model_id, models[model_id], names[model_id], data)
        for model_id, data in fixed.items()
    ]
    board = build_leaderboard(
        records, anchor=anchor_key, threshold=threshold, n_resamples=n_resamples
    )
    contamination = Contamination(
        replay={str(m): replay_rate(_near_exact(data)) for m, data in replay.items()},
        gap=_gap(board, anchor_set, gap_threshold),
    )
    extra = _baselines(fixed) if baselines else None
    found = board_diagnostics(board) if diagnostics else None
    return LeaderboardData(board, contamination, judge, prompt_version, extra, found)


def _baselines(fixed: dict[uuid.UUID, _Collected]) -> Baselines:
    per_item = {
        str(model_id): {item: sum(s) / len(s) for item, s in data.items.items()}
        for model_id, data in fixed.items()
    }
    comparisons = comparisons_from_items(per_item)
    if not comparisons:
        return Baselines(0, None, None, "no two models share an item")
    ratings = elo(comparisons, rng=0)
    try:
        strengths: BradleyTerryResult | None = bradley_terry(comparisons)
        note = None
    except BradleyTerryError as error:
        strengths, note = None, f"Bradley-Terry: {error}"
    return Baselines(len(comparisons), ratings, strengths, note)


def _record(
    model_id: uuid.UUID, info: tuple[RegisteredModel, str], name: str, data: _Collected
) -> ModelRecord:
    model, org = info
    return ModelRecord(
        key=str(model_id),
        name=name,
        sessions=list(data.sessions.values()),
        disciplines=dict(data.disciplines),
        latencies_s=data.latencies_s,
        prompt_tokens=data.prompt_tokens,
        completion_tokens=data.completion_tokens,
        n_with_usage=data.n_with_usage,
        usd_per_mtok_in=model.usd_per_mtok_in,
        usd_per_mtok_out=model.usd_per_mtok_out,
        extra={
            "model_id": str(model_id),
            "model": model.name,
            "api_snapshot": model.api_snapshot,
            "family": model.family,
            "organisation": org,
        },
    )


def _near_exact(data: _Collected) -> list[bool]:
    """Replay verdicts score ``MAX_SCORE`` for a near-exact completion, 0 otherwise."""
    return [score == MAX_SCORE for scores in data.sessions.values() for score in scores]


def _gap(
    board: Leaderboard, anchor_set: dict[uuid.UUID, _Collected], threshold: float
) -> GapReport | None:
    """Fixed-session score against anchor-set score for the models that have both."""
    private = {str(m): _pooled_estimate(data) for m, data in anchor_set.items()}
    public = {
        row.key: ScoreEstimate(row.absolute.mean, row.absolute.standard_error)
        for row in board.rows
        if row.key in private
    }
    if not public:
        return None
    return generalisation_gap(
        public, {k: v for k, v in private.items() if k in public}, threshold=threshold
    )


def _pooled_estimate(data: _Collected) -> ScoreEstimate:
    """Eq. 1 over every anchor-set item of the model, with the standard error of a mean."""
    scores = [s for session in data.sessions.values() for s in session]
    n = len(scores)
    mean = sum(scores) / n
    variance = sum((s - mean) ** 2 for s in scores) / (n - 1) if n > 1 else 0.0
    scale = 100 / MAX_SCORE
    return ScoreEstimate(mean * scale, math.sqrt(variance / n) * scale)


async def current_anchor(db: AsyncSession) -> RankingAnchor | None:
    """The newest anchor designation (None: none was ever made, the top model anchors)."""
    anchor: RankingAnchor | None = await db.scalar(
        select(RankingAnchor).order_by(RankingAnchor.id.desc()).limit(1)
    )
    return anchor


async def set_anchor(
    db: AsyncSession, *, model_id: uuid.UUID | None, set_by: str, now: datetime
) -> RankingAnchor:
    """Designate the anchor model (None: the top model); every change is kept."""
    if model_id is not None and await db.get(RegisteredModel, model_id) is None:
        raise NotFound(f"no model {model_id}")
    anchor = RankingAnchor(model_id=model_id, set_by=set_by, set_at=now)
    db.add(anchor)
    await db.flush()
    return anchor


async def anchor_history(db: AsyncSession) -> list[RankingAnchor]:
    """Every anchor designation, newest first (the first is the current one)."""
    rows = await db.execute(select(RankingAnchor).order_by(RankingAnchor.id.desc()))
    return list(rows.scalars())
