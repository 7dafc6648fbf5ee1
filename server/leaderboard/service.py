"""The leaderboard's data, assembled from the scored sessions, and one model's session scores.

The statistics are pure (``judge.ranking``, ``judge.contamination``); this module
assembles their input, read by ``server.leaderboard.inputs``, into the board with the
current anchor designation (``server.leaderboard.anchors``), the contamination report (the
replay rate of replay sessions, the generalisation gap of fixed sessions against
anchor-set sessions) and, on request, Elo and Bradley-Terry baselines and the ReLE
diagnostics (``LeaderboardData``); and every scored session's own score with its interval
(``session_scores``). ``server.leaderboard.cache`` memoises both while the data is
unchanged.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncSession

from judge.contamination.generalisation_gap import GapReport, ScoreEstimate, generalisation_gap
from judge.contamination.replay import ReplayRate, replay_rate
from judge.prompts import PROMPT_VERSION
from judge.ranking.leaderboard import (
    BoardDiagnostics,
    EstimatedSession,
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
from server.calibration.gate import JudgeCalibrationView, calibration_of
from server.config import Settings
from server.leaderboard.anchors import current_anchor
from server.leaderboard.fields import ModelInfo
from server.leaderboard.inputs import (
    Collected,
    adaptive_estimates,
    fixed_scores,
    registered,
    scores_by_model,
    sessions_under_review,
)
from server.registry.models import RegisteredModel
from server.scoring.assignment import JudgeAssignment
from server.scoring.effective import counted_answers
from server.sessions.adaptive import SessionEstimate, session_estimates
from server.sessions.models import EvalSession
from server.sessions.modes import SessionMode, mode_spec
from server.sessions.states import SCORED_STATE_VALUES


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
    """The board with what its rows show beside the statistics, and what it was computed
    with."""

    board: Leaderboard
    models: Mapping[str, ModelInfo]
    """Per row key (the model's id), the model's registry facts."""
    contamination: Contamination
    judges: JudgeAssignment
    prompt_version: str
    baselines: Baselines | None = None
    diagnostics: BoardDiagnostics | None = None
    calibration: JudgeCalibrationView | None = None
    """The default judge's run the gate reads (None: uncalibrated)."""
    stale: bool = False
    """Computed before the latest verdict, review or anchor (``server.leaderboard.cache``): a
    newer board is being computed."""


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
    judges: JudgeAssignment,
    prompt_version: str,
    n_resamples: int,
    threshold: float,
    gap_threshold: float,
    baselines: bool = False,
    diagnostics: bool = False,
    calibration: JudgeCalibrationView | None = None,
) -> LeaderboardData:
    """The leaderboard from the verdicts of the ``judges`` (a panel, or one judge) under
    ``prompt_version`` and the reviewers' scores, with the current anchor designation, the
    contamination report and, on request, Elo and Bradley-Terry ratings (``baselines``)
    and the ReLE diagnostics of the discipline scores (``diagnostics``, over ReLE's
    weighting schemes when the disciplines are the LLMEval-Fair ten).

    Where a panel of several judges scored, the intervals, rank ranges and tie groups
    include the judge's variance: the bootstrap resamples the judges too
    (``judge.ranking.judge_variance``).

    Scored and reviewed adaptive sessions count as sessions of their model by their
    estimates (``adaptive_estimates``); a model with adaptive sessions only is ranked
    too. Their answers' latencies and tokens count in the model's usage."""
    fixed = await fixed_scores(
        db, judges=judges, prompt_version=prompt_version, items_needed=baselines
    )
    replay, anchor_set = [
        await scores_by_model(db, mode=mode, judges=judges, prompt_version=prompt_version)
        for mode in (SessionMode.REPLAY, SessionMode.ANCHOR)
    ]
    adaptive = await scores_by_model(
        db, mode=SessionMode.ADAPTIVE, judges=judges, prompt_version=prompt_version
    )
    estimated = await adaptive_estimates(db, counted=adaptive)
    models = await registered(db, set(fixed) | set(replay) | set(anchor_set) | set(estimated))
    names = _display_names(models)
    current = await current_anchor(db)
    anchor_key = str(current.model_id) if current is not None and current.model_id else None
    under_review = await sessions_under_review(db)
    ranked = [*fixed, *(m for m in estimated if m not in fixed)]
    records = [
        _record(
            model_id,
            models[model_id][0],
            names[model_id],
            fixed.get(model_id, Collected()),
            estimated=estimated.get(model_id, []),
            adaptive=adaptive.get(model_id),
        )
        for model_id in ranked
    ]
    board = build_leaderboard(
        records,
        anchor=anchor_key,
        threshold=threshold,
        n_resamples=n_resamples,
        judge_panels=_judge_panels(fixed, judges),
        panel_rule=judges.rule,
    )
    contamination = Contamination(
        replay={str(m): replay_rate(_near_exact(data)) for m, data in replay.items()},
        gap=_gap(board, anchor_set, gap_threshold),
    )
    return LeaderboardData(
        board=board,
        models={
            str(model_id): _model_info(models[model_id], under_review.get(model_id, 0))
            for model_id in ranked
        },
        contamination=contamination,
        judges=judges,
        prompt_version=prompt_version,
        baselines=_baselines(fixed) if baselines else None,
        diagnostics=board_diagnostics(board) if diagnostics else None,
        calibration=calibration,
    )


def _judge_panels(
    fixed: dict[uuid.UUID, Collected], judges: JudgeAssignment
) -> dict[str, npt.NDArray[np.float64]] | None:
    """Per model its answers' scores by every judge, when some answer had several judges:
    the bootstrap then resamples judges too. None: one judge scored everything."""
    if len(judges.every_judge) < 2:
        return None
    panels = {
        str(model_id): np.asarray(data.panel, dtype=np.float64).reshape(
            len(data.panel), len(judges.every_judge)
        )
        for model_id, data in fixed.items()
    }
    several = any((np.isfinite(p).sum(axis=1) > 1).any() for p in panels.values())
    return panels if several else None


def _baselines(fixed: dict[uuid.UUID, Collected]) -> Baselines:
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
    model_id: uuid.UUID,
    model: RegisteredModel,
    name: str,
    data: Collected,
    *,
    estimated: list[EstimatedSession],
    adaptive: Collected | None,
) -> ModelRecord:
    """The model's record: fixed sessions by their items, adaptive ones by ``estimated``;
    ``adaptive`` (the adaptive sessions' answers) adds to latency and usage only."""
    usage = [data] if adaptive is None else [data, adaptive]
    return ModelRecord(
        key=str(model_id),
        name=name,
        sessions=list(data.sessions.values()),
        disciplines=dict(data.disciplines),
        latencies_s=[s for part in usage for s in part.latencies_s],
        reported_latencies_s=[s for part in usage for s in part.reported_latencies_s],
        prompt_tokens=sum(part.prompt_tokens for part in usage),
        completion_tokens=sum(part.completion_tokens for part in usage),
        n_with_usage=sum(part.n_with_usage for part in usage),
        usd_per_mtok_in=model.usd_per_mtok_in,
        usd_per_mtok_out=model.usd_per_mtok_out,
        estimated_sessions=estimated,
    )


def _model_info(info: tuple[RegisteredModel, str], under_review: int) -> ModelInfo:
    model, org = info
    return ModelInfo(family=model.family, organisation=org, sessions_under_review=under_review)


def _near_exact(data: Collected) -> list[bool]:
    """Replay verdicts score ``MAX_SCORE`` for a near-exact completion, 0 otherwise."""
    return [score == MAX_SCORE for scores in data.sessions.values() for score in scores]


def _gap(
    board: Leaderboard, anchor_set: dict[uuid.UUID, Collected], threshold: float
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


def _pooled_estimate(data: Collected) -> ScoreEstimate:
    """Eq. 1 over every anchor-set item of the model, with the standard error of a mean."""
    scores = [s for session in data.sessions.values() for s in session]
    n = len(scores)
    mean = sum(scores) / n
    variance = sum((s - mean) ** 2 for s in scores) / (n - 1) if n > 1 else 0.0
    scale = 100 / MAX_SCORE
    return ScoreEstimate(mean * scale, math.sqrt(variance / n) * scale)


async def configured_leaderboard(
    db: AsyncSession,
    *,
    settings: Settings,
    judges: JudgeAssignment,
    baselines: bool = False,
    diagnostics: bool = False,
) -> LeaderboardData:
    """``leaderboard`` as ``GET /v1/leaderboard`` builds it: the current prompt version,
    the default judge's calibration, and the resamples and thresholds of ``settings``."""
    return await leaderboard(
        db,
        judges=judges,
        calibration=await calibration_of(db, settings, judges.default),
        prompt_version=PROMPT_VERSION,
        n_resamples=settings.leaderboard_resamples,
        threshold=settings.leaderboard_tie_threshold,
        gap_threshold=settings.contamination_gap_threshold,
        baselines=baselines,
        diagnostics=diagnostics,
    )


SESSION_Z = 1.959963984540054
"""The normal quantile of a two-sided 95% interval."""


@dataclass(frozen=True, slots=True)
class SessionScore:
    """One scored session's absolute score ``S`` (eq. 1, 0-100) over its scored answers,
    with a normal-approximation 95% interval (mean ± 1.96 standard errors of its item
    scores, clipped to 0-100). An adaptive session's score is its estimate, the one the
    leaderboard counts, with ± 1.96 of its standard error (its raw item mean is biased
    by the informative selection)."""

    session_id: uuid.UUID
    created_at: datetime
    mode: str
    n_scored: int
    score: float
    ci_low: float
    ci_high: float
    ranked: bool
    """Whether the leaderboard counts the session: its mode is ranked and, if adaptive, it
    has an estimate (until every stratum has a counted score it has none, and its raw
    mean is not a score the board uses)."""


async def session_scores(
    db: AsyncSession, *, model_id: uuid.UUID, judges: JudgeAssignment, prompt_version: str
) -> list[SessionScore]:
    """Every ``scored``/``reviewed`` session of ``model_id`` that has a scored answer,
    oldest first, with ``S`` from the scores the leaderboard counts
    (``server.scoring.effective``; answers waiting for review are left out). No visibility
    check: the caller has checked the model may be seen."""
    answers = await counted_answers(
        db,
        judges=judges,
        prompt_version=prompt_version,
        where=[EvalSession.model_id == model_id, EvalSession.state.in_(SCORED_STATE_VALUES)],
        columns=(EvalSession.created_at, EvalSession.mode),
    )
    sessions: dict[uuid.UUID, tuple[datetime, str]] = {}
    scores: dict[uuid.UUID, list[int]] = defaultdict(list)
    counted: dict[uuid.UUID, dict[int, float]] = defaultdict(dict)
    for answer in answers:
        row = answer.row
        sessions.setdefault(row.session_id, (row.created_at, row.mode))
        if answer.score is not None:
            scores[row.session_id].append(answer.score)
            counted[row.session_id][row.position] = answer.score / MAX_SCORE
    adaptive = [i for i, (_, mode) in sessions.items() if mode == SessionMode.ADAPTIVE.value]
    estimates = (
        await session_estimates(db, session_ids=adaptive, scores=counted) if adaptive else {}
    )
    return [
        _session_score(
            session_id,
            created_at,
            mode,
            scores[session_id],
            estimates.get(session_id),
            ranked=mode_spec(mode).traits.ranked
            and (session_id in estimates or session_id not in adaptive),
        )
        for session_id, (created_at, mode) in sessions.items()
        if scores[session_id]
    ]


def _session_score(
    session_id: uuid.UUID,
    created_at: datetime,
    mode: str,
    scores: list[int],
    estimate: SessionEstimate | None = None,
    *,
    ranked: bool,
) -> SessionScore:
    n = len(scores)
    scale = 100 / MAX_SCORE
    mean = sum(scores) / n
    variance = sum((s - mean) ** 2 for s in scores) / (n - 1) if n > 1 else 0.0
    half = SESSION_Z * math.sqrt(variance / n) * scale
    value = mean * scale
    if estimate is not None:
        value, half = estimate.score, SESSION_Z * math.sqrt(max(estimate.variance, 0.0))
    return SessionScore(
        session_id=session_id,
        created_at=created_at,
        mode=mode,
        n_scored=n,
        score=value,
        ci_low=max(0.0, value - half),
        ci_high=min(100.0, value + half),
        ranked=ranked,
    )
