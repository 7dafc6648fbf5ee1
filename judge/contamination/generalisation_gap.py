"""Generalisation gap: does a model score better on public items than on private ones?

"ReLE: A Scalable System and Structured Benchmark for Diagnosing Capability Anisotropy in
Chinese LLMs" (§4.3, "Private Held-out Validation"): a private anchor set, never served
in ordinary sessions, is scored next to the public item set; ``gap = score(public) -
score(anchor)``, models whose gap exceeds a threshold are flagged for potential
overfitting, and a flagged model reports the lower bound of its performance interval
(:func:`generalisation_gap`, :class:`GapReport`). Because the two sets differ in
difficulty for *every* model, the flag is raised on the gap in excess of the median gap
over all models, not on the raw gap.

Every function is pure: no I/O, no randomness, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist, median

from judge.contamination.arguments import check_finite, check_fraction

__all__ = [
    "MIN_MODELS_FOR_MEDIAN",
    "GapReport",
    "ModelGap",
    "ScoreEstimate",
    "generalisation_gap",
]

MIN_MODELS_FOR_MEDIAN = 3
""":func:`generalisation_gap` measures gaps against the median gap from this many models."""


def _z(confidence_level: float) -> float:
    """The two-sided normal quantile: 1.96 for 0.95."""
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence_level) / 2.0)


@dataclass(frozen=True, slots=True)
class ScoreEstimate:
    """A model's score on one item set and its standard error, on the 0-100 scale.

    Attributes
    ----------
    mean : float
        The score (e.g. the absolute score ``S`` of LLMEval-Fair, eq. 1); finite.
    standard_error : float
        Its standard error, finite and at least 0 (e.g. from the bootstrap of
        :mod:`judge.ranking.stability`).

    Raises
    ------
    ValueError
        A value that is not a finite number, or a negative standard error.
    """

    mean: float
    standard_error: float

    def __post_init__(self) -> None:
        mean = check_finite(self.mean, "ScoreEstimate.mean")
        error = check_finite(self.standard_error, "ScoreEstimate.standard_error")
        if error < 0:
            raise ValueError(f"ScoreEstimate.standard_error must be at least 0, got {error!r}")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "standard_error", error)


@dataclass(frozen=True, slots=True)
class ModelGap:
    """One model's generalisation gap (ReLE §4.3).

    Attributes
    ----------
    model : str
    public, anchor : ScoreEstimate
        Its scores on the public item set and on the private anchor set.
    gap : float
        ``public.mean - anchor.mean``.
    standard_error : float
        ``sqrt(public.standard_error**2 + anchor.standard_error**2)`` (the two sets are
        scored independently).
    excess : float
        ``gap - median gap`` (or ``gap`` with fewer than :data:`MIN_MODELS_FOR_MEDIAN`
        models, see :attr:`GapReport.relative_to_median`).
    excess_lower : float
        ``excess - z * standard_error``, the lower confidence bound of the excess.
    flagged : bool
        ``excess > threshold`` and ``excess_lower > 0``: potential overfitting.
    reported_score : float
        ``public.mean - z * public.standard_error`` (the lower bound of the public score's
        interval) if flagged, else ``public.mean``.
    """

    model: str
    public: ScoreEstimate
    anchor: ScoreEstimate
    gap: float
    standard_error: float
    excess: float
    excess_lower: float
    flagged: bool
    reported_score: float


@dataclass(frozen=True, slots=True)
class GapReport:
    """Generalisation gaps of all models (ReLE §4.3).

    Attributes
    ----------
    models : tuple of ModelGap
        Models present in both maps, in the order of the public map.
    median_gap : float or None
        Median of the gaps of ``models``; None when no model is in both maps.
    relative_to_median : bool
        True if ``excess`` is measured from ``median_gap`` (at least
        :data:`MIN_MODELS_FOR_MEDIAN` models); False if ``excess`` is the raw gap, too few
        models being available to estimate the difference in difficulty of the two sets.
    missing : tuple of str
        Models present in only one map (public-map order, then anchor-map order); they
        get no gap and no flag.
    threshold : float
        The flagging threshold, in points of the 0-100 scale.
    confidence_level : float
    z : float
        The two-sided normal quantile of ``confidence_level`` (1.96 for 0.95).
    """

    models: tuple[ModelGap, ...]
    median_gap: float | None
    relative_to_median: bool
    missing: tuple[str, ...]
    threshold: float
    confidence_level: float
    z: float

    @property
    def flagged(self) -> tuple[str, ...]:
        """The flagged models, in report order."""
        return tuple(m.model for m in self.models if m.flagged)

    def get(self, model: str) -> ModelGap:
        """The entry of ``model``; KeyError if it is not in both maps."""
        for entry in self.models:
            if entry.model == model:
                return entry
        raise KeyError(model)


def _check_estimates(
    estimates: Mapping[str, ScoreEstimate], name: str
) -> Mapping[str, ScoreEstimate]:
    if not isinstance(estimates, Mapping):
        raise ValueError(f"{name} must be a mapping of model to ScoreEstimate")
    for model, estimate in estimates.items():
        if not isinstance(model, str) or not model:
            raise ValueError(f"{name}: model names must be non-empty strings, got {model!r}")
        if not isinstance(estimate, ScoreEstimate):
            raise ValueError(
                f"{name}[{model!r}] must be a ScoreEstimate, got {type(estimate).__name__}"
            )
    return estimates


def generalisation_gap(
    public: Mapping[str, ScoreEstimate],
    private_anchor: Mapping[str, ScoreEstimate],
    *,
    threshold: float = 5.0,
    confidence_level: float = 0.95,
) -> GapReport:
    """Generalisation gap against a private anchor set (ReLE §4.3).

    ReLE scores every model on a Private Anchor Set that is never published,
    computes the generalisation gap ``gap = score(public) - score(anchor)``, flags models
    whose gap exceeds a threshold for potential overfitting and reports the lower bound of
    their performance interval. Here, for each model in both maps:

    * ``gap = public.mean - anchor.mean`` and
      ``se = sqrt(public.standard_error**2 + anchor.standard_error**2)``;
    * ``excess = gap - median(gap over all models)``: the two sets differ in difficulty
      for every model, so a gap shared by all models is no sign of contamination, and
      only what a model gains beyond the typical gap is. With fewer than
      :data:`MIN_MODELS_FOR_MEDIAN` models the median says nothing and
      ``excess = gap`` (``GapReport.relative_to_median`` is False);
    * ``flagged = excess > threshold and excess - z * se > 0``, ``z`` the two-sided
      normal quantile of ``confidence_level``: the excess must be both large and
      significant. The uncertainty of the median itself is neglected;
    * ``reported_score = public.mean - z * public.standard_error`` for a flagged model
      (the lower bound of its public score's interval), ``public.mean`` otherwise.

    Parameters
    ----------
    public : mapping of str to ScoreEstimate
        Model -> score on the public (served) item set, 0-100 scale.
    private_anchor : mapping of str to ScoreEstimate
        Model -> score on the private anchor set, same scale.
    threshold : float, default 5.0
        Excess, in points, above which a model may be flagged; finite and at least 0.
    confidence_level : float, default 0.95
        In (0, 1); sets ``z``.

    Returns
    -------
    GapReport
        Models in both maps, in ``public`` order, and those in only one map under
        ``missing``.

    Raises
    ------
    ValueError
        A map that is not a mapping of non-empty model names to :class:`ScoreEstimate`,
        a ``threshold`` that is negative or not finite, or a ``confidence_level`` outside
        (0, 1).

    Examples
    --------
    >>> public = {"a": ScoreEstimate(70, 1), "b": ScoreEstimate(60, 1), "c": ScoreEstimate(80, 1)}
    >>> anchor = {"a": ScoreEstimate(65, 1), "b": ScoreEstimate(55, 1), "c": ScoreEstimate(60, 1)}
    >>> report = generalisation_gap(public, anchor)
    >>> report.median_gap, report.flagged, round(report.get("c").reported_score, 2)
    (5.0, ('c',), 78.04)
    """
    _check_estimates(public, "public")
    _check_estimates(private_anchor, "private_anchor")
    limit = check_finite(threshold, "threshold")
    if limit < 0:
        raise ValueError(f"threshold must be at least 0, got {limit!r}")
    level = check_fraction(confidence_level, "confidence_level")
    z = _z(level)
    common = [m for m in public if m in private_anchor]
    missing = tuple(m for m in public if m not in private_anchor) + tuple(
        m for m in private_anchor if m not in public
    )
    gaps = {m: public[m].mean - private_anchor[m].mean for m in common}
    median_gap = median(gaps.values()) if gaps else None
    relative = median_gap is not None and len(gaps) >= MIN_MODELS_FOR_MEDIAN
    entries: list[ModelGap] = []
    for model in common:
        pub, anchor = public[model], private_anchor[model]
        gap = gaps[model]
        error = math.hypot(pub.standard_error, anchor.standard_error)
        excess = gap - median_gap if relative and median_gap is not None else gap
        excess_lower = excess - z * error
        flagged = excess > limit and excess_lower > 0
        entries.append(
            ModelGap(
                model=model,
                public=pub,
                anchor=anchor,
                gap=gap,
                standard_error=error,
                excess=excess,
                excess_lower=excess_lower,
                flagged=flagged,
                reported_score=pub.mean - z * pub.standard_error if flagged else pub.mean,
            )
        )
    return GapReport(
        models=tuple(entries),
        median_gap=median_gap,
        relative_to_median=relative,
        missing=missing,
        threshold=limit,
        confidence_level=level,
        z=z,
    )
