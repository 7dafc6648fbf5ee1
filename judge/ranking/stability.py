"""Several sessions per model: mean, variance, bootstrap intervals and tie groups.

LLMEval-Fair evaluates every model in three independent 1,000-item sessions and reports the
mean and the variance of the per-session scores (§3.4 Finding 7, app. F, table 9);
Proctor adds a bootstrap 95% confidence interval, the probability
that one model beats another and groups of models the data cannot separate. This module
computes them from the item scores (integers 0-3, LLMEval-Fair §2.3.1) of every session.

* :class:`RunScores`: the validated item scores, per model a list of sessions, and the
  model's *estimated* sessions (:class:`EstimatedSession`: an adaptive session's unbiased
  estimate of its score, with its variance, instead of item scores);
* :func:`hierarchical_bootstrap`: the replicates of every model's score, drawn once and
  shared by everything below (:class:`BootstrapReplicates`);
* :func:`model_summary`: per model the session scores, their mean and variance and a
  percentile confidence interval (:class:`ModelSummary`);
* :func:`beat_probability`: ``P(A* > B*)`` over paired replicates;
* :func:`tie_groups`: the models in order, in groups the data cannot separate, each with a
  rank range and its interval (:class:`Ranking`).

Every function works on the absolute score ``S`` (LLMEval-Fair (Zhang et al.) eq. 1) or, given an
``anchor``, on the relative score ``R = S / S_anchor * 100`` (eq. 2) computed inside every
bootstrap replicate, so that the anchor's own uncertainty enters the interval of ``R``.

The bootstrap
-------------
One replicate of model ``m`` with sessions ``1..J`` (LLMEval-Fair's design; Davison &
Hinkley 1997, §3.8, "strategy 2"):

1. draw ``J`` sessions from the model's ``J`` sessions, uniformly with replacement;
2. in each drawn session of ``n`` items, draw ``n`` items from that session's items,
   uniformly with replacement, and take eq. 1 of the drawn items;
3. the replicate ``S*`` is the mean of the ``J`` drawn sessions' scores (each session
   weighs the same, as the point estimate does).

Step 2 is carried out exactly but without drawing item indices: a session's score depends
on its items only through how many items scored 0, 1, 2 and 3, and ``n`` items drawn with
replacement give counts distributed ``Multinomial(n, p)`` with ``p`` the session's observed
shares of the four scores. One multinomial draw per (replicate, session) is the same
distribution as ``n`` index draws and costs ``O(1)`` instead of ``O(n)``; 20 models x 3
sessions x 1,000 items x 2,000 replicates take a few tens of milliseconds.

Models are resampled independently of each other (every Proctor session samples its own
items). Replicate ``b`` of every model comes from the
same call, so replicates are *paired* by index: the relative replicate is
``R*_b = S*_b / S*_anchor,b * 100`` and ``P(A beats B)`` counts the replicates ``b`` with
``S*_A,b > S*_B,b``.

Estimated sessions
------------------
An adaptive session does not score its whole pool: it selects items from the scores so
far and estimates the pool's score (an unbiased estimator with an estimated variance),
so its raw item mean is no estimate of anything (the selection is informative) and its
items cannot be resampled. Such a session enters as an :class:`EstimatedSession`
(estimate ``Y``, variance ``V``, in points). A model's sessions, fixed and estimated
mixed, are resampled in step 1 exactly as above; in step 2 a drawn *estimated* session
scores ``Y + sqrt(V) * Z`` with ``Z`` standard normal, a parametric stage in place of the
item stage (a normal approximation to the estimator's sampling distribution), while
drawn fixed sessions keep the item stage. The point estimate ``S`` is the mean over all
the model's sessions of their scores (a fixed session's eq. 1, an estimated session's
``Y``); every session weighs the same, as in step 3. Replicates of a model with an
estimated session may leave ``[0, 100]``; they are not clipped, which would bias them.
Data without estimated sessions draw exactly the same random numbers as before.

Resampling at both stages counts the item-sampling noise twice when sessions differ only
by their items: the bootstrap variance is then about ``(2J - 1) / J`` times the variance
of the mean (5/3 for three sessions, an interval about 29% too wide). The intervals and
tie groups are therefore conservative, which is the safe side for claims that one model
beats another; with a genuine session effect (a model that drifts between sessions) the
session stage is what keeps the interval honest. The parametric stage of an estimated
session counts its estimator's noise twice in the same way, so mixed models are exactly
as conservative as fixed-only ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from judge.numbers import json_float
from judge.ranking.scores import MAX_SCORE

ItemScores = Sequence[int] | npt.NDArray[np.integer[Any]]
"""A session's item scores: integers ``0..3`` (numpy integers accepted, booleans not)."""

Scale = Literal["absolute", "relative"]

DEFAULT_RESAMPLES = 2000
"""Bootstrap replicates drawn when the caller does not say."""

FloatArray = npt.NDArray[np.float64]
_SeedLike = np.random.Generator | int | np.random.SeedSequence | None


class ConfidenceInterval(NamedTuple):
    """A two-sided interval, as ``scipy.stats.bootstrap`` gives one."""

    low: float
    high: float


class DisciplineEstimate(NamedTuple):
    """An estimated session's score in one discipline: points (0-100), variance
    (points squared) and the scored items behind it."""

    score: float
    variance: float
    n_items: int


@dataclass(frozen=True, slots=True)
class EstimatedSession:
    """A session known by an unbiased estimate of its score rather than by item scores.

    An adaptive session selects its items from the scores so far, so its raw item mean
    is biased; its estimator (of the score of the session's whole pool, drawn from the
    bank as a fixed session's sample is) is not, and comes with an estimated variance.

    Attributes
    ----------
    score : float
        The estimate of the session's score ``S`` (LLMEval-Fair eq. 1), in points 0-100.
    variance : float
        The estimate's variance, in points squared (finite, at least 0).
    disciplines : mapping of str to DisciplineEstimate
        Per discipline ``(points, variance, items)``; a variance may be NaN (too few
        items). May be empty. Tuples are accepted and converted.
    n_items : int
        Items scored in the session (reported as its size; 0 if unknown).

    Raises
    ------
    ValueError
        A score that is not finite, a variance that is negative or not finite, a negative
        item count, or a discipline estimate with a score that is not finite, a negative
        or infinite variance or a negative item count.
    """

    score: float
    variance: float
    disciplines: Mapping[str, DisciplineEstimate] = field(default_factory=dict)
    n_items: int = 0

    def __post_init__(self) -> None:
        if not math.isfinite(self.score):
            raise ValueError(f"an estimated session's score must be finite, got {self.score!r}")
        if not (math.isfinite(self.variance) and self.variance >= 0):
            raise ValueError(
                f"an estimated session's variance must be finite and >= 0, got {self.variance!r}"
            )
        if self.n_items < 0:
            raise ValueError(f"n_items must be at least 0, got {self.n_items!r}")
        checked: dict[str, DisciplineEstimate] = {}
        for name, value in self.disciplines.items():
            estimate = DisciplineEstimate(float(value[0]), float(value[1]), int(value[2]))
            if (
                not math.isfinite(estimate.score)
                or estimate.variance < 0
                or math.isinf(estimate.variance)
                or estimate.n_items < 0
            ):
                raise ValueError(f"discipline {name!r}: invalid estimate {tuple(value)!r}")
            checked[name] = estimate
        object.__setattr__(self, "disciplines", checked)


def _as_session(scores: ItemScores, where: str) -> npt.NDArray[np.int64]:
    if not isinstance(scores, np.ndarray):
        flagged = next((s for s in scores if isinstance(s, bool)), None)
        if flagged is not None:
            raise ValueError(f"{where}: {flagged!r} is not an integer score 0-{MAX_SCORE}")
    array = np.asarray(scores)
    if array.ndim != 1:
        raise ValueError(f"{where}: item scores must be a flat sequence, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{where}: a session needs at least one item score")
    if array.dtype.kind not in "iu":
        values = array.tolist() if isinstance(scores, np.ndarray) else list(scores)
        bad = next(
            (v for v in values if isinstance(v, bool) or not isinstance(v, int | np.integer)),
            values[0],
        )
        raise ValueError(f"{where}: {bad!r} is not an integer score 0-{MAX_SCORE}")
    outside = (array < 0) | (array > MAX_SCORE)
    if outside.any():
        index = int(np.argmax(outside))
        raise ValueError(f"{where}: item {index} scores {int(array[index])}, outside 0-{MAX_SCORE}")
    session = array.astype(np.int64)
    session.flags.writeable = False
    return session


class RunScores(Mapping[str, tuple[npt.NDArray[np.int64], ...]]):
    """Item scores of every session of every model, and the estimated sessions.

    A read-only mapping ``model -> (session, ...)``, each session a read-only integer
    array of item scores ``0..3`` (LLMEval-Fair §2.3.1). Sessions of one model may hold
    different numbers of items. A model's estimated sessions (:meth:`estimated`) are not
    among the mapping's values; :meth:`session_scores` lists them after the fixed ones.

    Parameters
    ----------
    sessions : mapping of str to sequence of item scores
        Model -> its sessions (three by default), each a
        non-empty sequence of integer item scores in ``0..3``. A model with estimated
        sessions may have none here (an empty sequence, or no key).
    estimated : mapping of str to sequence of EstimatedSession, optional
        Model -> its estimated sessions (see the module notes). Models that appear only
        here follow those of ``sessions``, in order.

    Raises
    ------
    ValueError
        No models, an empty model name, a model without sessions of either kind, an empty
        session, or an item score that is not an integer in ``0..3``; the message names
        the model and the session.

    Examples
    --------
    >>> runs = RunScores({"a": [[3, 2, 3], [3, 3, 1]], "b": [[0, 1, 2], [1, 1, 1]]})
    >>> runs.session_scores("a").round(2).tolist()
    [88.89, 77.78]
    """

    def __init__(
        self,
        sessions: Mapping[str, Sequence[ItemScores]],
        estimated: Mapping[str, Sequence[EstimatedSession]] | None = None,
    ) -> None:
        estimated = estimated or {}
        if not sessions and not estimated:
            raise ValueError("no models: RunScores needs at least one model")
        data: dict[str, tuple[npt.NDArray[np.int64], ...]] = {}
        extra: dict[str, tuple[EstimatedSession, ...]] = {}
        no_sessions: Sequence[ItemScores] = ()
        for model in [*sessions, *(m for m in estimated if m not in sessions)]:
            if not isinstance(model, str) or not model:
                raise ValueError(f"model names must be non-empty strings, got {model!r}")
            model_sessions = sessions.get(model, no_sessions)
            model_estimated = tuple(estimated.get(model, ()))
            if isinstance(model_sessions, str | bytes) or (
                len(model_sessions) == 0 and not model_estimated
            ):
                raise ValueError(f"model {model!r} has no sessions")
            if not all(isinstance(e, EstimatedSession) for e in model_estimated):
                raise ValueError(f"model {model!r}: estimated sessions must be EstimatedSession")
            data[model] = tuple(
                _as_session(scores, f"model {model!r}, session {k}")
                for k, scores in enumerate(model_sessions)
            )
            if model_estimated:
                extra[model] = model_estimated
        self._data = data
        self._estimated = extra
        self._counts = {
            model: np.stack([np.bincount(s, minlength=MAX_SCORE + 1) for s in model_sessions])
            if model_sessions
            else np.zeros((0, MAX_SCORE + 1), dtype=np.int64)
            for model, model_sessions in data.items()
        }

    def __getitem__(self, model: str) -> tuple[npt.NDArray[np.int64], ...]:
        return self._data[model]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunScores):
            return NotImplemented
        return self.models == other.models and all(
            len(self[m]) == len(other[m])
            and all(np.array_equal(x, y) for x, y in zip(self[m], other[m], strict=True))
            and self.estimated(m) == other.estimated(m)
            for m in self.models
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shape = ", ".join(f"{m!r}: {[len(s) for s in ss]}" for m, ss in self._data.items())
        if not self._estimated:
            return f"RunScores({{{shape}}})"
        counts = ", ".join(f"{m!r}: {len(e)}" for m, e in self._estimated.items())
        return f"RunScores({{{shape}}}, estimated={{{counts}}})"

    @property
    def models(self) -> tuple[str, ...]:
        """The models, in the order they were given."""
        return tuple(self._data)

    def score_counts(self, model: str) -> npt.NDArray[np.int64]:
        """How many items of each fixed session scored 0, 1, 2 and 3: shape
        ``(sessions, 4)`` (no rows for estimated sessions)."""
        return self._counts[model].copy()

    def estimated(self, model: str) -> tuple[EstimatedSession, ...]:
        """The model's estimated sessions (empty when it has none)."""
        if model not in self._data:
            raise KeyError(model)
        return self._estimated.get(model, ())

    def session_sizes(self, model: str) -> tuple[int, ...]:
        """Items per session: the fixed sessions', then the estimated sessions'
        ``n_items``."""
        return tuple(len(s) for s in self._data[model]) + tuple(
            e.n_items for e in self.estimated(model)
        )

    def session_scores(self, model: str) -> FloatArray:
        """Absolute score ``S`` of each of the model's sessions (LLMEval-Fair eq. 1).

        ``S = sum(s_i) / (N * 3) * 100`` over a fixed session's ``N`` item scores; then,
        after the fixed sessions, each estimated session's estimate.
        """
        counts = self._counts[model]
        totals = counts @ np.arange(MAX_SCORE + 1)
        sizes = counts.sum(axis=1)
        fixed = np.asarray(totals / (sizes * MAX_SCORE) * 100, dtype=np.float64)
        estimated = self.estimated(model)
        if not estimated:
            return fixed
        return np.concatenate([fixed, np.array([e.score for e in estimated], dtype=np.float64)])

    def mean_score(self, model: str) -> float:
        """Mean over all the model's sessions (fixed and estimated) of their scores ``S``."""
        return float(self.session_scores(model).mean())


def _coerce_runs(data: RunScores | Mapping[str, Sequence[ItemScores]]) -> RunScores:
    return data if isinstance(data, RunScores) else RunScores(data)


def _check_resamples(n_resamples: int) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer):
        raise ValueError(f"n_resamples must be an integer, got {n_resamples!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")


def _check_probability(name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")


@dataclass(frozen=True, eq=False)
class BootstrapReplicates:
    """Bootstrap replicates of every model's score, paired by replicate index.

    Made by :func:`hierarchical_bootstrap`; pass it to :func:`model_summary` and
    :func:`tie_groups` so that intervals, beat probabilities and groups come from the same
    draws.

    Attributes
    ----------
    runs : RunScores
        The data resampled.
    absolute : ndarray, shape (n_models, n_resamples)
        Row ``m`` holds the replicates ``S*`` of ``runs.models[m]`` (read-only).
    """

    runs: RunScores
    absolute: FloatArray = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = np.shape(self.absolute)
        if len(shape) != 2 or shape[0] != len(self.runs) or shape[1] < 1:
            raise ValueError(
                f"replicates must have shape ({len(self.runs)}, n_resamples >= 1), got {shape}"
            )

    @property
    def models(self) -> tuple[str, ...]:
        """The models, in the order of :attr:`runs`."""
        return self.runs.models

    @property
    def n_resamples(self) -> int:
        """Number of replicates per model."""
        return int(self.absolute.shape[1])

    def _index(self, model: str) -> int:
        try:
            return self.models.index(model)
        except ValueError:
            raise ValueError(
                f"model {model!r} is not among the {len(self.models)} models"
            ) from None

    def _anchor_row(self, anchor: str) -> FloatArray:
        row: FloatArray = self.absolute[self._index(anchor)]
        sessions = self.runs.session_scores(anchor)
        # An estimated session's estimate or replicate can fall below 0, not only on it.
        if np.any(sessions <= 0) or np.any(row <= 0):
            raise ValueError(
                f"anchor model {anchor!r} scores 0 in a session or a bootstrap replicate; "
                "relative scores need a positive anchor score"
            )
        return row

    def matrix(self, anchor: str | None = None) -> FloatArray:
        """All replicates, shape ``(n_models, n_resamples)``.

        Parameters
        ----------
        anchor : str or None
            ``None`` for the absolute scores ``S*``; a model for the relative scores
            ``R*_b = S*_b / S*_anchor,b * 100`` (LLMEval-Fair eq. 2 inside replicate ``b``).

        Raises
        ------
        ValueError
            An unknown anchor, or an anchor scoring 0 in a session or a replicate.
        """
        if anchor is None:
            return self.absolute.copy()
        return np.asarray(self.absolute / self._anchor_row(anchor) * 100, dtype=np.float64)

    def replicates(self, model: str, anchor: str | None = None) -> FloatArray:
        """The replicates of one model (absolute, or relative to ``anchor``)."""
        row: FloatArray = self.absolute[self._index(model)]
        if anchor is None:
            return row.copy()
        return np.asarray(row / self._anchor_row(anchor) * 100, dtype=np.float64)

    def beat_probability(self, model_a: str, model_b: str) -> float:
        """``P(S*_A > S*_B)`` over the paired replicates, ties counting half.

        The same for relative scores: within a replicate both are divided by the same
        positive anchor score, which keeps their order.
        """
        return beat_probability(
            self.absolute[self._index(model_a)], self.absolute[self._index(model_b)]
        )

    def beat_matrix(self) -> FloatArray:
        """``P[i, j] = P(model i beats model j)``; ``P + P.T == 1``, diagonal 0.5."""
        x = self.absolute
        wins = (x[:, None, :] > x[None, :, :]).mean(axis=2)
        ties = (x[:, None, :] == x[None, :, :]).mean(axis=2)
        return np.asarray(wins + 0.5 * ties, dtype=np.float64)


def hierarchical_bootstrap(
    data: RunScores | Mapping[str, Sequence[ItemScores]],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    rng: _SeedLike = None,
) -> BootstrapReplicates:
    """Draw hierarchical bootstrap replicates of every model's mean session score.

    Sessions are resampled within the model with replacement, then items within each
    drawn session with replacement; a replicate is the mean of the drawn sessions' scores
    (LLMEval-Fair eq. 1). A drawn estimated session scores its estimate plus a normal draw
    with its variance instead (a parametric stage). See the module notes for the
    multinomial shortcut, which is exact, for estimated sessions and for why the interval
    is conservative.

    Parameters
    ----------
    data : RunScores or mapping of str to sequence of item scores
        Per model its sessions' item scores (a mapping is validated by
        :class:`RunScores`); estimated sessions come in a :class:`RunScores`.
    n_resamples : int, default 2000
        Replicates per model.
    rng : numpy.random.Generator, int, SeedSequence or None
        Source of randomness, passed to ``numpy.random.default_rng``; a seed makes the
        replicates reproducible. Models are drawn in order, so the same seed and data give
        the same replicates.

    Returns
    -------
    BootstrapReplicates

    Raises
    ------
    ValueError
        Invalid scores (see :class:`RunScores`) or ``n_resamples`` below 1.

    References
    ----------
    A. C. Davison and D. V. Hinkley, *Bootstrap Methods and their Application*, 1997,
    §3.8 (multi-stage sampling).
    """
    runs = _coerce_runs(data)
    _check_resamples(n_resamples)
    gen = np.random.default_rng(rng)
    values = np.arange(MAX_SCORE + 1)
    out = np.empty((len(runs), int(n_resamples)), dtype=np.float64)
    for m, model in enumerate(runs.models):
        counts = runs.score_counts(model)
        sizes = counts.sum(axis=1)
        shares = counts / np.maximum(sizes, 1)[:, None]
        estimated = runs.estimated(model)
        if estimated:
            out[m] = _mixed_replicates(gen, sizes, shares, estimated, int(n_resamples))
            continue
        n_sessions = len(sizes)
        picked = gen.integers(n_sessions, size=(int(n_resamples), n_sessions))
        drawn = gen.multinomial(sizes[picked], shares[picked])  # (B, J, 4) item counts
        session_scores = (drawn @ values) / (sizes[picked] * MAX_SCORE) * 100
        out[m] = session_scores.mean(axis=1)
    out.flags.writeable = False
    return BootstrapReplicates(runs=runs, absolute=out)


def _mixed_replicates(
    gen: np.random.Generator,
    sizes: npt.NDArray[np.int64],
    shares: FloatArray,
    estimated: Sequence[EstimatedSession],
    n_resamples: int,
) -> FloatArray:
    """Replicates of a model with estimated sessions: draw ``J`` of its ``J`` sessions
    (fixed ones first, then estimated), then each drawn fixed session's items
    (multinomial, as for fixed-only models) and each drawn estimated session's
    ``Y + sqrt(V) * Z``; the replicate is the mean of the ``J`` drawn scores."""
    n_fixed = len(sizes)
    n_sessions = n_fixed + len(estimated)
    picked = gen.integers(n_sessions, size=(n_resamples, n_sessions))
    scores = np.empty((n_resamples, n_sessions), dtype=np.float64)
    is_fixed = picked < n_fixed
    if n_fixed:
        chosen = picked[is_fixed]
        drawn = gen.multinomial(sizes[chosen], shares[chosen])  # (k, 4) item counts
        points = drawn @ np.arange(MAX_SCORE + 1)
        scores[is_fixed] = points / (sizes[chosen] * MAX_SCORE) * 100
    which = picked[~is_fixed] - n_fixed
    centre = np.array([e.score for e in estimated], dtype=np.float64)
    spread = np.sqrt(np.array([e.variance for e in estimated], dtype=np.float64))
    scores[~is_fixed] = centre[which] + spread[which] * gen.standard_normal(which.size)
    return np.asarray(scores.mean(axis=1), dtype=np.float64)


def _bootstrapped(
    data: BootstrapReplicates | RunScores | Mapping[str, Sequence[ItemScores]],
    n_resamples: int | None,
    rng: _SeedLike,
) -> BootstrapReplicates:
    if isinstance(data, BootstrapReplicates):
        if n_resamples is not None or rng is not None:
            raise ValueError(
                "n_resamples and rng apply when drawing replicates; the data are already "
                "bootstrap replicates"
            )
        return data
    return hierarchical_bootstrap(
        data, n_resamples=DEFAULT_RESAMPLES if n_resamples is None else n_resamples, rng=rng
    )


def beat_probability(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Probability that A beats B over paired bootstrap replicates.

    ``P = mean(a_b > b_b) + 0.5 * mean(a_b == b_b)``: the share of replicates in which A
    scores higher, ties counting half, so that ``P(A, B) + P(B, A) == 1``.

    Parameters
    ----------
    a, b : array_like, shape (n_resamples,)
        Replicates of the two models' scores, paired by index (replicate ``b`` of both
        from the same bootstrap draw, as :func:`hierarchical_bootstrap` makes them).

    Returns
    -------
    float
        In ``[0, 1]``.

    Raises
    ------
    ValueError
        Arrays of different shapes, not one-dimensional, empty, or holding NaN.

    Examples
    --------
    >>> beat_probability([2.0, 3.0, 1.0, 5.0], [1.0, 3.0, 2.0, 4.0])
    0.625
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"replicates differ in shape or are not flat: {x.shape} and {y.shape}")
    if x.size == 0:
        raise ValueError("no replicates")
    if np.isnan(x).any() or np.isnan(y).any():
        raise ValueError("replicates hold NaN")
    return float(np.mean(x > y) + 0.5 * np.mean(x == y))


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """One model's score over its sessions (LLMEval-Fair app. F, table 9).

    Attributes
    ----------
    model : str
    scale : {"absolute", "relative"}
        ``S`` (eq. 1) or ``R = S / S_anchor * 100`` (eq. 2).
    anchor : str or None
        The anchor of a relative summary.
    session_values : tuple of float
        The score of each session: the fixed sessions' (eq. 1), then the estimated
        sessions' estimates (see :class:`EstimatedSession`). Relative:
        ``S_k / S_anchor,k * 100`` pairing session ``k`` with the anchor's session ``k``
        (as table 9 pairs trials) when the model and the anchor have the same number of
        sessions (``paired_sessions``), otherwise ``S_k / mean(S_anchor) * 100``.
    mean : float
        Absolute: the mean of the session scores. Relative: ``mean(S) / mean(S_anchor) *
        100``, the estimate the bootstrap replicates ``R*`` scatter around; it can differ
        in the last digits from the mean of ``session_values``.
    variance : float
        Sample variance of ``session_values`` with ``ddof=1`` (divisor ``J - 1``); NaN for
        a single session. LLMEval-Fair table 9 uses the same estimator but over five values
        (its three 1,000-item trials and the 2,000- and 4,000-item runs: GPT-4o's five
        values give 1.626, printed 1.63); over its three trials alone GPT-4o's is 2.98.
    standard_error : float
        Standard deviation (``ddof=1``) of the bootstrap replicates.
    confidence_interval : ConfidenceInterval
        Percentile interval of the replicates (``numpy.quantile``, linear interpolation)
        at ``confidence_level``.
    confidence_level : float
    n_items : tuple of int
        Items per session (``RunScores.session_sizes``).
    paired_sessions : bool
        Whether relative ``session_values`` pair sessions by position (always False for
        absolute summaries).
    n_resamples : int
    """

    model: str
    scale: Scale
    anchor: str | None
    session_values: tuple[float, ...]
    mean: float
    variance: float
    standard_error: float
    confidence_interval: ConfidenceInterval
    confidence_level: float
    n_items: tuple[int, ...]
    paired_sessions: bool
    n_resamples: int

    @property
    def n_sessions(self) -> int:
        """How many sessions the model ran."""
        return len(self.session_values)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; NaN becomes ``None``."""
        return {
            "model": self.model,
            "scale": self.scale,
            "anchor": self.anchor,
            "session_values": [float(v) for v in self.session_values],
            "mean": json_float(self.mean),
            "variance": json_float(self.variance),
            "standard_error": json_float(self.standard_error),
            "ci_low": json_float(self.confidence_interval.low),
            "ci_high": json_float(self.confidence_interval.high),
            "confidence_level": self.confidence_level,
            "n_items": list(self.n_items),
            "paired_sessions": self.paired_sessions,
            "n_resamples": self.n_resamples,
        }


def _interval(replicates: FloatArray, confidence_level: float) -> ConfidenceInterval:
    alpha = 1 - confidence_level
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2])
    return ConfidenceInterval(float(low), float(high))


def _summaries(
    boot: BootstrapReplicates, anchor: str | None, confidence_level: float
) -> dict[str, ModelSummary]:
    _check_probability("confidence_level", confidence_level)
    runs = boot.runs
    reps = boot.matrix(anchor)  # validates the anchor
    anchor_sessions = None if anchor is None else runs.session_scores(anchor)
    out: dict[str, ModelSummary] = {}
    for m, model in enumerate(runs.models):
        sessions = runs.session_scores(model)
        paired = False
        if anchor_sessions is None:
            values = sessions
            mean = float(sessions.mean())
        else:
            paired = len(sessions) == len(anchor_sessions)
            base = anchor_sessions if paired else anchor_sessions.mean()
            values = sessions / base * 100
            mean = float(sessions.mean() / anchor_sessions.mean() * 100)
        variance = float(np.var(values, ddof=1)) if len(values) > 1 else math.nan
        row = reps[m]
        out[model] = ModelSummary(
            model=model,
            scale="absolute" if anchor is None else "relative",
            anchor=anchor,
            session_values=tuple(float(v) for v in values),
            mean=mean,
            variance=variance,
            standard_error=float(np.std(row, ddof=1)) if row.size > 1 else math.nan,
            confidence_interval=_interval(row, confidence_level),
            confidence_level=confidence_level,
            n_items=runs.session_sizes(model),
            paired_sessions=paired,
            n_resamples=boot.n_resamples,
        )
    return out


def model_summary(
    data: BootstrapReplicates | RunScores | Mapping[str, Sequence[ItemScores]],
    *,
    anchor: str | None = None,
    confidence_level: float = 0.95,
    n_resamples: int | None = None,
    rng: _SeedLike = None,
) -> dict[str, ModelSummary]:
    """Mean, variance and bootstrap interval of every model's score over its sessions.

    LLMEval-Fair §3.4 (Finding 7) and app. F, table 9 report the mean and variance of three
    1,000-item trials and two larger runs (see ``ModelSummary.variance``); Proctor adds a
    hierarchical bootstrap interval (sessions within the model, then items within each
    session; see :func:`hierarchical_bootstrap`).

    Parameters
    ----------
    data : BootstrapReplicates, RunScores or mapping
        Replicates already drawn, or the item scores to draw them from.
    anchor : str or None
        ``None`` summarises the absolute score ``S`` (eq. 1); a model name summarises
        ``R = S / S_anchor * 100`` (eq. 2), with ``R`` computed inside every replicate.
    confidence_level : float, default 0.95
        Two-sided level of the percentile interval.
    n_resamples : int or None
        Replicates to draw (default 2000); only when ``data`` holds item scores.
    rng : numpy.random.Generator, int, SeedSequence or None
        Randomness for the draw; only when ``data`` holds item scores.

    Returns
    -------
    dict of str to ModelSummary
        In the order of the models in ``data``.

    Raises
    ------
    ValueError
        Invalid scores, an unknown anchor or one scoring 0, a confidence level outside
        ``(0, 1)``, or ``n_resamples`` / ``rng`` given with replicates already drawn.
    """
    boot = _bootstrapped(data, n_resamples, rng)
    return _summaries(boot, anchor, confidence_level)


@dataclass(frozen=True, slots=True)
class RankedModel:
    """One row of a :class:`Ranking`.

    Attributes
    ----------
    model : str
    position : int
        1 for the highest point estimate.
    group : int
        1-based tie group (see :func:`tie_groups`).
    rank_range : tuple of (int, int)
        ``(best, worst)`` rank the data allow: best is 1 plus the number of models that
        beat this one with probability at least the threshold, worst is the number of
        models minus the number this one beats with that probability (widened, if ever
        needed, to contain ``position``).
    summary : ModelSummary
        The model's mean, variance and confidence interval on the ranking's scale.
    """

    model: str
    position: int
    group: int
    rank_range: tuple[int, int]
    summary: ModelSummary

    @property
    def estimate(self) -> float:
        """The point estimate the ranking orders by (``summary.mean``)."""
        return self.summary.mean

    @property
    def confidence_interval(self) -> ConfidenceInterval:
        """The model's bootstrap interval (``summary.confidence_interval``)."""
        return self.summary.confidence_interval

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the row's fields and its summary's."""
        return {
            "position": self.position,
            "group": self.group,
            "rank_low": self.rank_range[0],
            "rank_high": self.rank_range[1],
            **self.summary.to_json(),
        }


@dataclass(frozen=True, eq=False)
class Ranking:
    """Models in order of their point estimate, in groups the data cannot separate.

    Attributes
    ----------
    entries : tuple of RankedModel
        Best first.
    groups : tuple of tuple of str
        The tie groups, best first, each in ranking order.
    threshold : float
        The beat probability that separates two neighbours.
    scale : {"absolute", "relative"}
    anchor : str or None
    beat_matrix : ndarray, shape (n_models, n_models)
        ``beat_matrix[i, j] = P(entries[i] beats entries[j])``, in ranking order.
    """

    entries: tuple[RankedModel, ...]
    groups: tuple[tuple[str, ...], ...]
    threshold: float
    scale: Scale
    anchor: str | None
    beat_matrix: FloatArray = field(repr=False, compare=False)

    @property
    def order(self) -> tuple[str, ...]:
        """The models, best first."""
        return tuple(e.model for e in self.entries)

    def entry(self, model: str) -> RankedModel:
        """The row of ``model``."""
        for e in self.entries:
            if e.model == model:
                return e
        raise KeyError(model)

    def to_json(self) -> dict[str, Any]:
        """``{"scale", "anchor", "threshold", "groups", "models": [row, ...]}``."""
        return {
            "scale": self.scale,
            "anchor": self.anchor,
            "threshold": self.threshold,
            "groups": [list(g) for g in self.groups],
            "models": [e.to_json() for e in self.entries],
        }


def tie_groups(
    data: BootstrapReplicates | RunScores | Mapping[str, Sequence[ItemScores]],
    *,
    anchor: str | None = None,
    threshold: float = 0.95,
    confidence_level: float = 0.95,
    n_resamples: int | None = None,
    rng: _SeedLike = None,
) -> Ranking:
    """Rank the models and group those the data cannot separate.

    Definitions ("groups of models the data cannot separate"):

    * **order**: by point estimate (:attr:`ModelSummary.mean`), highest first; equal
      estimates keep the input order.
    * **groups**: consecutive models are chained. Walking down the order, a new group
      starts at model ``i + 1`` exactly when the model above it beats it with
      probability ``P(i beats i + 1) >= threshold`` (:func:`beat_probability` over the
      paired replicates); otherwise the two share a group. Groups are therefore runs of
      consecutive models, and two models in different groups are separated by at least
      one confident step between neighbours. Chaining is conservative: a long run of
      near-equal models forms one group even when its ends differ clearly; the rank
      range shows that.
    * **rank range** of a model: ``(1 + #{models beating it with P >= threshold},
      n - #{models it beats with P >= threshold})``, from all pairs, not only neighbours
      (the style of Chatbot Arena's rank bounds).

    With an anchor, the order, groups and rank ranges are those of the absolute scores
    (a replicate's ``R*`` values are its ``S*`` values divided by the same positive number)
    and the summaries and intervals are relative.

    Parameters
    ----------
    data : BootstrapReplicates, RunScores or mapping
        Replicates already drawn, or item scores to draw them from.
    anchor : str or None
        Rank on ``R`` relative to this model (intervals of ``R``), or on ``S`` if None.
    threshold : float, default 0.95
        One-sided beat probability at which a model counts as better than another.
    confidence_level : float, default 0.95
        Level of the intervals reported with every model.
    n_resamples, rng
        As in :func:`model_summary`; only when ``data`` holds item scores.

    Returns
    -------
    Ranking

    Raises
    ------
    ValueError
        As :func:`model_summary`, or a threshold outside ``(0.5, 1)``.
    """
    if not 0.5 < threshold < 1:
        raise ValueError(f"threshold must lie strictly between 0.5 and 1, got {threshold!r}")
    boot = _bootstrapped(data, n_resamples, rng)
    summaries = _summaries(boot, anchor, confidence_level)
    models = boot.models
    # Sort on the absolute means so the order does not depend on the anchor's rounding.
    means = [boot.runs.mean_score(m) for m in models]
    order = sorted(range(len(models)), key=lambda i: -means[i])  # stable: input order
    beats = boot.beat_matrix()[np.ix_(order, order)]
    n = len(order)
    group_of: list[int] = []
    group = 1
    for pos in range(n):
        if pos > 0 and beats[pos - 1, pos] >= threshold:
            group += 1
        group_of.append(group)
    confident = beats >= threshold
    np.fill_diagonal(confident, False)
    entries = []
    for pos, index in enumerate(order):
        best = 1 + int(confident[:, pos].sum())
        worst = n - int(confident[pos, :].sum())
        entries.append(
            RankedModel(
                model=models[index],
                position=pos + 1,
                group=group_of[pos],
                rank_range=(min(best, pos + 1), max(worst, pos + 1)),
                summary=summaries[models[index]],
            )
        )
    groups = tuple(
        tuple(e.model for e in entries if e.group == g) for g in range(1, group_of[-1] + 1)
    )
    beats.flags.writeable = False
    return Ranking(
        entries=tuple(entries),
        groups=groups,
        threshold=threshold,
        scale="absolute" if anchor is None else "relative",
        anchor=anchor,
        beat_matrix=beats,
    )
