"""The leaderboard: every model's scores, intervals, tie group, disciplines, latency and cost.

Pure assembly of the statistics in this package from the scored sessions of every model
(the server reads them, :mod:`server.leaderboard.inputs`). One bootstrap
(:func:`~judge.ranking.stability.hierarchical_bootstrap`) feeds the absolute and relative
intervals and the tie groups, so a row's interval, its group and its rank range agree.

* Absolute ``S`` (LLMEval-Fair eq. 1) and relative ``R = S / S_anchor * 100`` (eq. 2) per
  model over its sessions: mean, variance (table 9), bootstrap 95% interval.
* The anchor is the designated model if it has scored sessions, else the top model (the
  highest mean ``S``); :attr:`Leaderboard.anchor_note` says why when a designated anchor
  could not be used.
* Rows are ordered by mean ``S``; ``group`` and ``rank_range`` come from
  :func:`~judge.ranking.stability.tie_groups`: models in one group are ones the data cannot
  order, and a leaderboard must show that rather than a strict order.
* Per-discipline scores on the 10-point scale (LLMEval-Fair tables 1 and 8), pooled over the
  model's sessions, each with its standard error.
* Estimated sessions (adaptive sessions: an unbiased estimate of the session's score with
  its variance, :class:`~judge.ranking.stability.EstimatedSession`) count alongside the
  fixed ones: ``S`` is the mean over all the model's sessions, and the bootstrap draws an
  estimated session's replicate from a normal distribution around its estimate (a
  parametric stage in place of the item stage), so intervals, tie groups and relative
  scores compare like with like. Per discipline, the fixed sessions' pooled score and the
  estimated sessions' estimates are combined by inverse-variance weighting
  (:func:`combine_discipline`).
* Latency: median and 95th percentile of the end-to-end time per item (delivery of the
  item to acceptance of its answer, as the server saw it). Cost: tokens per item as the
  client reported them, times the model's prices when it has them.
* Judged by a panel (``judge_panels``): the judges' variance enters as an independent
  second stage of the bootstrap that resamples the panel's judges
  (:mod:`~judge.ranking.judge_variance`; Davison & Hinkley, "Bootstrap Methods and their
  Application", §3.8), before the intervals, relative scores and tie groups are computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from judge.panel import PanelRule
from judge.ranking.diagnostics import Diagnostics, diagnose
from judge.ranking.judge_variance import with_judge_variance
from judge.ranking.scores import DISCIPLINE_SCALE, MAX_SCORE
from judge.ranking.stability import (
    BootstrapReplicates,
    DisciplineEstimate,
    EstimatedSession,
    ModelSummary,
    RunScores,
    hierarchical_bootstrap,
    model_summary,
    tie_groups,
)

__all__ = [
    "DEFAULT_RESAMPLES",
    "TOKENS_PER_PRICE_UNIT",
    "BoardDiagnostics",
    "DisciplineEstimate",
    "DisciplineScore",
    "EstimatedSession",
    "Leaderboard",
    "LeaderboardRow",
    "ModelRecord",
    "Usage",
    "board_diagnostics",
    "build_leaderboard",
    "combine_discipline",
]

DEFAULT_RESAMPLES = 2000
TOKENS_PER_PRICE_UNIT = 1_000_000
"""Prices are in USD per million tokens."""


@dataclass(frozen=True, slots=True)
class ModelRecord:
    """One model's input to the leaderboard.

    Attributes
    ----------
    key : str
        Unique identifier (the server uses the registered model's id).
    name : str
        What the leaderboard shows.
    sessions : sequence of sequence of int
        Item scores (0-3) of each scored session, in session order.
    disciplines : mapping of str to sequence of int
        Item scores by discipline, pooled over the (fixed) sessions.
    latencies_s : sequence of float
        End-to-end seconds per answered item (delivery to answer, by the server's clock).
    reported_latencies_s : sequence of float
        The model's own seconds per answer, where the client reported them.
    prompt_tokens, completion_tokens : int
        Tokens summed over the answers whose client reported usage ...
    n_with_usage : int
        ... and how many answers that is.
    usd_per_mtok_in, usd_per_mtok_out : float or None
        The model's prices per million tokens, if known.
    estimated_sessions : sequence of EstimatedSession
        Sessions known by an unbiased estimate of their score (adaptive sessions), with
        their per-discipline estimates; they count as sessions beside ``sessions``. A
        model with estimated sessions only is ranked too. Their items belong in neither
        ``sessions`` nor ``disciplines`` (an adaptive session's raw item mean is biased).
    """

    key: str
    name: str
    sessions: Sequence[Sequence[int]]
    disciplines: Mapping[str, Sequence[int]] = field(default_factory=dict)
    latencies_s: Sequence[float] = ()
    reported_latencies_s: Sequence[float] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    n_with_usage: int = 0
    usd_per_mtok_in: float | None = None
    usd_per_mtok_out: float | None = None
    estimated_sessions: Sequence[EstimatedSession] = ()


@dataclass(frozen=True, slots=True)
class DisciplineScore:
    """A model's score in one discipline on the 10-point scale, and its standard error
    (the items' standard deviation over ``sqrt(n)``, rescaled; with estimated sessions,
    that of the combination, see :func:`combine_discipline`) and the items behind it."""

    score: float
    standard_error: float
    n_items: int


@dataclass(frozen=True, slots=True)
class Usage:
    """Latency and cost of one model per item."""

    latency_median_s: float | None
    latency_p95_s: float | None
    prompt_tokens_per_item: float | None
    completion_tokens_per_item: float | None
    usd_per_1k_items: float | None
    reported_latency_median_s: float | None = None
    """The median of the model latencies clients reported (their own clocks; the server's
    ``latency_*`` include the client's overhead), over ``n_reported_latency`` answers."""
    n_reported_latency: int = 0


@dataclass(frozen=True, slots=True)
class LeaderboardRow:
    """One model on the leaderboard."""

    key: str
    name: str
    position: int
    group: int
    rank_range: tuple[int, int]
    beats_next: float | None
    """P(this model beats the next one down) over the bootstrap replicates; None for the
    last row."""
    absolute: ModelSummary
    relative: ModelSummary | None
    """None only when no model can anchor (see :func:`build_leaderboard`)."""
    disciplines: dict[str, DisciplineScore]
    usage: Usage
    estimated_sessions: int = 0
    """How many of the model's sessions are estimated ones (``absolute.session_values``
    lists them after the fixed sessions)."""


@dataclass(frozen=True, slots=True)
class Leaderboard:
    """Rows best first, the anchor of ``R`` and the groups of models the data cannot
    separate (each a tuple of keys, best first)."""

    rows: tuple[LeaderboardRow, ...]
    anchor: str | None
    anchor_designated: bool
    anchor_note: str | None
    groups: tuple[tuple[str, ...], ...]
    threshold: float
    confidence_level: float
    disciplines: tuple[str, ...]

    def row(self, key: str) -> LeaderboardRow:
        for row in self.rows:
            if row.key == key:
                return row
        raise KeyError(key)


def build_leaderboard(
    records: Sequence[ModelRecord],
    *,
    anchor: str | None = None,
    threshold: float = 0.95,
    confidence_level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    judge_panels: Mapping[str, npt.ArrayLike] | None = None,
    panel_rule: PanelRule = PanelRule.MEDIAN,
) -> Leaderboard:
    """Rank ``records`` (LLMEval-Fair (Zhang et al.) eq. 1-2, app. F; tie groups).

    Parameters
    ----------
    records : sequence of ModelRecord
        Models with at least one scored session, fixed or estimated; models without one
        are left out. ``S`` of a model is the mean over all its sessions (a fixed
        session's eq. 1, an estimated session's estimate); see
        :func:`~judge.ranking.stability.hierarchical_bootstrap` for how estimated sessions
        are resampled (a normal draw with their variance).
    anchor : str or None
        Key of the designated anchor. ``None``, or a key without sessions: the top model.
    threshold : float
        Beat probability that separates neighbouring models (see ``tie_groups``).
    confidence_level : float
        Of the bootstrap intervals.
    n_resamples : int
        Bootstrap replicates.
    seed : int or None
        Seed of the bootstrap; the default makes the leaderboard reproducible.
    judge_panels : mapping of str to array_like, shape (n_answers, k), optional
        Model key -> its answers' 0-3 scores by the k judges of the panel (NaN where a
        judge did not score; the same judges for every model). Each model's session
        replicates get the offsets of :func:`~judge.ranking.judge_variance.judge_offsets`
        added (one judge draw per replicate, shared by every model), so the intervals,
        rank ranges, beat probabilities and tie groups include the judges' variance: a
        two-stage bootstrap whose second, independent stage resamples judges (Davison &
        Hinkley, "Bootstrap Methods and their Application", §3.8). Models without a panel
        get offset 0; the point estimates are unchanged. The judge stage draws from its own
        stream spawned from ``seed``, so the session replicates are the same with and
        without panels.
    panel_rule : PanelRule, default median
        How a drawn panel's scores of an answer become its verdict.

    Returns
    -------
    Leaderboard
        Empty rows when no model has a scored session.

    Raises
    ------
    ValueError
        Duplicate keys, item scores outside ``0..3`` (from the statistics), or invalid
        panels (see ``judge_offsets``).
    """
    ranked = [r for r in records if any(len(s) for s in r.sessions) or r.estimated_sessions]
    keys = [r.key for r in ranked]
    if len(set(keys)) != len(keys):
        raise ValueError("model keys must be unique")
    disciplines = tuple(
        sorted(
            {d for r in ranked for d in r.disciplines}
            | {d for r in ranked for e in r.estimated_sessions for d in e.disciplines}
        )
    )
    if not ranked:
        return Leaderboard((), None, False, None, (), threshold, confidence_level, disciplines)
    runs = RunScores(
        {r.key: [_scores(s) for s in r.sessions if len(s)] for r in ranked},
        {r.key: list(r.estimated_sessions) for r in ranked if r.estimated_sessions},
    )
    boot = hierarchical_bootstrap(runs, n_resamples=n_resamples, rng=seed)
    if judge_panels:
        judge_stream = None if seed is None else np.random.SeedSequence(seed).spawn(1)[0]
        boot = with_judge_variance(boot, judge_panels, rule=panel_rule, rng=judge_stream)
    absolute = model_summary(boot, confidence_level=confidence_level)
    chosen, designated, note, relative = _relative(boot, anchor, absolute, confidence_level)
    ranking = tie_groups(boot, threshold=threshold, confidence_level=confidence_level)
    by_key = {r.key: r for r in ranked}
    n = len(ranking.entries)
    rows = tuple(
        LeaderboardRow(
            key=entry.model,
            name=by_key[entry.model].name,
            position=entry.position,
            group=entry.group,
            rank_range=entry.rank_range,
            beats_next=float(ranking.beat_matrix[i, i + 1]) if i + 1 < n else None,
            absolute=absolute[entry.model],
            relative=relative[entry.model] if relative else None,
            disciplines=_disciplines(
                by_key[entry.model].disciplines, by_key[entry.model].estimated_sessions
            ),
            usage=_usage(by_key[entry.model]),
            estimated_sessions=len(by_key[entry.model].estimated_sessions),
        )
        for i, entry in enumerate(ranking.entries)
    )
    return Leaderboard(
        rows, chosen, designated, note, ranking.groups, threshold, confidence_level, disciplines
    )


def _scores(session: Sequence[int]) -> Sequence[int]:
    """A session's item scores as ``RunScores`` takes them: an integer array as it is (a
    million scores are not copied into a list and checked one by one), else a list."""
    if isinstance(session, np.ndarray) and session.dtype.kind in "iu":
        return session
    return list(session)


def _relative(
    boot: BootstrapReplicates,
    anchor: str | None,
    absolute: Mapping[str, ModelSummary],
    confidence_level: float,
) -> tuple[str | None, bool, str | None, dict[str, ModelSummary] | None]:
    """The anchor and the relative summaries against it.

    ``R`` needs an anchor that scores above 0 in every session and every bootstrap
    replicate. The designated anchor is tried first, then the models from the top down;
    the note says why the designated one (or the top model) was passed over. When no model
    qualifies (every model scores 0 somewhere), there are no relative scores."""
    by_mean = sorted(absolute, key=lambda key: -absolute[key].mean)
    candidates = ([anchor] if anchor is not None else []) + by_mean
    notes: list[str] = []
    if anchor is not None and anchor not in absolute:
        notes.append("the designated anchor has no scored sessions")
        candidates = by_mean
    for key in dict.fromkeys(candidates):
        try:
            relative = model_summary(boot, anchor=key, confidence_level=confidence_level)
        except ValueError:
            notes.append(f"{key} scores 0 in a session or a bootstrap replicate")
            continue
        designated = key == anchor
        note = "; ".join(notes) + ("; the top usable model is used" if notes else "")
        return key, designated, note or None, relative
    notes.append("no model can anchor relative scores")
    return None, False, "; ".join(notes), None


def _disciplines(
    scores: Mapping[str, Sequence[int]], estimated: Sequence[EstimatedSession] = ()
) -> dict[str, DisciplineScore]:
    out: dict[str, DisciplineScore] = {}
    for discipline in sorted(set(scores) | {d for e in estimated for d in e.disciplines}):
        values = np.asarray(scores.get(discipline, ()), dtype=float)
        pooled = None
        if values.size:
            scale = DISCIPLINE_SCALE / MAX_SCORE
            sd = float(values.std(ddof=1)) if values.size > 1 else math.nan
            pooled = DisciplineScore(
                score=float(values.mean()) * scale,
                standard_error=sd / math.sqrt(values.size) * scale,
                n_items=int(values.size),
            )
        found = [e.disciplines[discipline] for e in estimated if discipline in e.disciplines]
        if not found:
            if pooled is not None:
                out[discipline] = pooled
            continue
        out[discipline] = combine_discipline(pooled, found)
    return out


_POINTS_PER_DISCIPLINE_POINT = 100 / DISCIPLINE_SCALE


def combine_discipline(
    pooled: DisciplineScore | None, estimates: Sequence[DisciplineEstimate]
) -> DisciplineScore:
    """One discipline's score from the fixed sessions' pooled items and the estimated
    sessions' estimates, by inverse-variance weighting.

    Every part is an unbiased estimate of the model's score in the discipline: the
    fixed sessions' pooled item mean (``pooled``, 10-point scale, with its standard error)
    and each estimated session's estimate (points 0-100 and variance, rescaled to the
    10-point scale). The combination is ``sum(w_k x_k) / sum(w_k)`` with ``w_k = 1 /
    SE_k**2``, standard error ``1 / sqrt(sum(w_k))``: the minimum-variance weighted mean
    of independent estimates (W. G. Cochran, "The combination of estimates from different
    experiments", Biometrics, 1954). Weights that sum to one keep a combination of
    unbiased estimates unbiased when they do not depend on the estimates; these are
    estimated from the same data, so the combination is unbiased to first order in the
    weights' error (exactly so for known variances). When a part's standard error is
    missing (NaN: a single item) or 0, the weights fall back to the parts' item counts,
    which are fixed, so the combination stays unbiased; its standard error is then
    ``sqrt(sum((n_k / n)**2 SE_k**2))`` (NaN if a part's is missing). Raw item means of
    an adaptive session never enter: they are biased by its informative selection.

    Parameters
    ----------
    pooled : DisciplineScore or None
        The fixed sessions' pooled score, if the model has items of the discipline there.
    estimates : sequence of DisciplineEstimate
        The estimated sessions' estimates of the discipline (points and points squared).

    Returns
    -------
    DisciplineScore
        On the 10-point scale, ``n_items`` the sum over the parts.

    Raises
    ------
    ValueError
        No part at all.
    """
    parts = [] if pooled is None else [(pooled.score, pooled.standard_error, pooled.n_items)]
    parts += [
        (
            e.score / _POINTS_PER_DISCIPLINE_POINT,
            math.sqrt(e.variance) / _POINTS_PER_DISCIPLINE_POINT,
            e.n_items,
        )
        for e in estimates
    ]
    if not parts:
        raise ValueError("nothing to combine: no pooled score and no estimate")
    x = np.array([p[0] for p in parts], dtype=np.float64)
    se = np.array([p[1] for p in parts], dtype=np.float64)
    n = np.array([p[2] for p in parts], dtype=np.int64)
    if np.all(np.isfinite(se) & (se > 0)):
        weights = 1 / se**2
        return DisciplineScore(
            score=float(np.sum(weights * x) / np.sum(weights)),
            standard_error=float(1 / math.sqrt(float(np.sum(weights)))),
            n_items=int(n.sum()),
        )
    share = n / n.sum() if n.sum() > 0 else np.full(len(parts), 1 / len(parts))
    return DisciplineScore(
        score=float(np.sum(share * x)),
        standard_error=float(math.sqrt(float(np.sum(share**2 * se**2)))),
        n_items=int(n.sum()),
    )


def _usage(record: ModelRecord) -> Usage:
    latencies = np.asarray(record.latencies_s, dtype=float)
    median = float(np.median(latencies)) if latencies.size else None
    p95 = float(np.quantile(latencies, 0.95)) if latencies.size else None
    n = record.n_with_usage
    tokens_in = record.prompt_tokens / n if n else None
    tokens_out = record.completion_tokens / n if n else None
    cost = None
    prices = (record.usd_per_mtok_in, record.usd_per_mtok_out)
    if tokens_in is not None and tokens_out is not None and None not in prices:
        price_in, price_out = (float(p or 0.0) for p in prices)
        per_item = (tokens_in * price_in + tokens_out * price_out) / TOKENS_PER_PRICE_UNIT
        cost = per_item * 1000
    reported = np.asarray(record.reported_latencies_s, dtype=float)
    reported_median = float(np.median(reported)) if reported.size else None
    return Usage(median, p95, tokens_in, tokens_out, cost, reported_median, int(reported.size))


BoardDiagnostics = Diagnostics
"""ReLE diagnostics (§3.5, §5-6) of the leaderboard's discipline scores: each
statistic computed or None with the reason in ``unavailable`` (see
:func:`~judge.ranking.diagnostics.diagnose`)."""


def board_diagnostics(
    board: Leaderboard, schemes: Mapping[str, Mapping[str, float]] | None = None
) -> BoardDiagnostics:
    """Anisotropy index, Rank Stability Amplitude and Capability Inconsistency of the
    board's per-discipline scores (10-point scale), over the models scored in every
    discipline of the board.

    ``schemes`` default: ReLE's three (``RELE_SCHEMES``) when the disciplines are the
    LLMEval-Fair ten, none otherwise. Never raises on the board's data: a statistic that
    cannot be computed (fewer than two complete models or two disciplines, a discipline
    every model scores 0 in, no applicable schemes, ...) is None with a human-readable
    reason in ``unavailable``."""
    dims = board.disciplines
    complete = [row for row in board.rows if all(d in row.disciplines for d in dims)]
    return diagnose(
        [row.key for row in complete],
        dims,
        [[row.disciplines[d].score for d in dims] for row in complete],
        schemes=schemes,
        label="discipline",
    )
