"""Cohen's kappa with a cluster-bootstrap interval, overall and per group of answers.

LLMEval-Fair (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and
Fair Evaluation of Large Language Models", §3.4 and app. F.2, table 10) picks its judge by
Cohen's kappa against human labels on a few hundred answers; a kappa from a few hundred
answers is uncertain by several hundredths, so every kappa here comes with an interval.

* :func:`kappa_interval`: plain or quadratic-weighted kappa on the fixed categories 0-3
  and its interval (:class:`KappaInterval`);
* :func:`kappa_intervals`: both kinds from one set of bootstrap draws
  (:class:`KappaIntervals`);
* :func:`grouped_kappa_intervals`: both kinds per group of answers (judge, discipline,
  model family: whatever key the caller gives each answer).

The bootstrap (whole item families resampled) and the studentized interval with its
delta-method standard error are :mod:`~judge.agreement.resampling`'s, which also says why
studentized. Degenerate data never raise: with no answers, or when kappa is undefined
(both raters gave every answer one and the same score), the estimate and the bounds are
NaN; with fewer than two clusters the bounds are NaN. Perfect agreement on every answer
gives kappa 1 with standard error 0 and the interval [1, 1].
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from judge.agreement.kappa import KappaWeights
from judge.agreement.resampling import (
    BOTH_KINDS,
    DEFAULT_RESAMPLES,
    IntArray,
    PlainAndWeighted,
    Resampling,
    SeedLike,
    check_options,
    linear_combination,
    reported_interval,
    score_codes,
)
from judge.agreement.scores import Scores, json_record

__all__ = [
    "KappaInterval",
    "KappaIntervals",
    "ScorePair",
    "grouped_kappa_intervals",
    "kappa_interval",
    "kappa_intervals",
]

GroupKey = TypeVar("GroupKey", bound=Hashable)


@dataclass(frozen=True, slots=True)
class KappaInterval:
    """Cohen's kappa of two raters and its studentized bootstrap interval.

    Attributes
    ----------
    estimate : float
        Kappa of all answers (``sklearn.metrics.cohen_kappa_score`` with labels 0-3);
        NaN when undefined or when there are no answers.
    low, high : float
        The interval's bounds at ``confidence_level``, within [-1, 1]; NaN when the
        estimate is, or with fewer than two clusters.
    standard_error : float
        The linearized standard error (Fleiss, Cohen & Everitt 1969; cluster-robust with
        clusters); NaN when the estimate is.
    n : int
        Answers.
    n_clusters : int
        Clusters resampled (``n`` when every answer is its own cluster).
    confidence_level : float
    weights : {None, "linear", "quadratic"}
        Disagreement weighting: None is plain kappa.
    n_resamples : int
    """

    estimate: float
    low: float
    high: float
    standard_error: float
    n: int
    n_clusters: int
    confidence_level: float
    weights: KappaWeights
    n_resamples: int

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict; NaN becomes ``None``."""
        return json_record(self)


@dataclass(frozen=True, slots=True)
class KappaIntervals(PlainAndWeighted[KappaInterval]):
    """Plain and quadratic-weighted kappa with intervals, from the same bootstrap draws."""


@dataclass(frozen=True, slots=True)
class ScorePair:
    """One answer scored by the reference (e.g. a human expert) and by a rater (a judge).

    ``cluster`` is the answer's item family, or None to make the answer a cluster of its
    own (see :func:`grouped_kappa_intervals`).
    """

    reference: int
    rater: int
    cluster: Hashable | None = None


def _intervals_of(
    codes: IntArray,
    clusters: Sequence[Hashable] | None,
    kinds: Sequence[KappaWeights],
    n_resamples: int,
    confidence_level: float,
    rng: SeedLike,
) -> list[KappaInterval]:
    check_options(n_resamples, confidence_level, kinds)
    resampling = Resampling.of(codes[None, :], clusters)
    draws, boot = resampling.draw(n_resamples, np.random.default_rng(rng))
    out = []
    for kind in kinds:
        stat = linear_combination(resampling, draws, boot, kind, [1])
        low, high, standard_error = reported_interval(
            stat, confidence_level, 1.0, resampled=resampling.n_clusters >= 2
        )
        out.append(
            KappaInterval(
                estimate=stat.estimate,
                low=low,
                high=high,
                standard_error=standard_error,
                n=int(codes.size),
                n_clusters=resampling.n_clusters,
                confidence_level=confidence_level,
                weights=kind,
                n_resamples=n_resamples,
            )
        )
    return out


def kappa_interval(
    reference: Scores,
    rater: Scores,
    *,
    clusters: Sequence[Hashable] | None = None,
    weights: KappaWeights = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence_level: float = 0.95,
    rng: SeedLike = 0,
) -> KappaInterval:
    """Cohen's kappa of two raters on the scores 0-3, with a cluster-bootstrap interval.

    Parameters
    ----------
    reference, rater : sequence of int
        Scores 0-3 of the same answers, aligned by position (the reference, usually human
        experts, first; kappa is symmetric in the two).
    clusters : sequence of hashable or None, optional
        An item-family id per answer: the bootstrap resamples whole families with
        replacement. None (the whole argument, or one answer's id): every answer (that
        answer) is its own cluster.
    weights : {None, "quadratic", "linear"}
        Plain kappa (LLMEval-Fair §3.4, app. F.2) or the quadratic-weighted one (app. L,
        table 13).
    n_resamples : int, default 2000
        Bootstrap replicates.
    confidence_level : float, default 0.95
    rng : numpy.random.Generator, int, SeedSequence or None
        Randomness of the bootstrap; the default seed makes the interval reproducible.

    Returns
    -------
    KappaInterval
        The estimate equals ``sklearn.metrics.cohen_kappa_score(reference, rater,
        labels=[0, 1, 2, 3], weights=weights)``; the interval is the studentized bootstrap
        one (see :mod:`~judge.agreement.resampling`; the module notes give the NaN cases).

    Raises
    ------
    ValueError
        A score that is not an integer 0-3, sequences (or cluster ids) of different
        lengths, unknown ``weights``, ``n_resamples`` < 1 or a level outside (0, 1).
    """
    codes = score_codes(reference, rater)
    return _intervals_of(codes, clusters, [weights], n_resamples, confidence_level, rng)[0]


def kappa_intervals(
    reference: Scores,
    rater: Scores,
    *,
    clusters: Sequence[Hashable] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence_level: float = 0.95,
    rng: SeedLike = 0,
) -> KappaIntervals:
    """Plain and quadratic-weighted kappa with their intervals, from one set of draws.

    Parameters and errors as :func:`kappa_interval`.
    """
    codes = score_codes(reference, rater)
    plain, weighted = _intervals_of(codes, clusters, BOTH_KINDS, n_resamples, confidence_level, rng)
    return KappaIntervals(plain, weighted)


def grouped_kappa_intervals(
    records: Sequence[ScorePair],
    by: Sequence[GroupKey] | Callable[[ScorePair], GroupKey],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence_level: float = 0.95,
    rng: SeedLike = 0,
) -> dict[GroupKey, KappaIntervals]:
    """Plain and weighted kappa with intervals for every group of answers.

    Parameters
    ----------
    records : sequence of ScorePair
        The answers: reference and rater score, and the item family (``cluster``; None
        makes the answer a cluster of its own).
    by : sequence of keys, or callable
        The group of each record (a judge, a discipline, a model family, ...): a key per
        record, aligned with ``records``, or a function of the record.
    n_resamples, confidence_level
        As in :func:`kappa_interval`.
    rng : numpy.random.Generator, int, SeedSequence or None
        Every group gets its own independent stream spawned from this one, in the order
        of the sorted keys.

    Returns
    -------
    dict
        Group key -> :class:`KappaIntervals`, sorted by key (keys must be orderable).

    Raises
    ------
    ValueError
        As :func:`kappa_interval`, or ``by`` of another length than ``records``.
    """
    keys = [by(r) for r in records] if callable(by) else list(by)
    if len(keys) != len(records):
        raise ValueError(f"{len(keys)} group keys for {len(records)} records")
    groups: dict[GroupKey, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    ordered = sorted(groups)  # type: ignore[type-var]
    out: dict[GroupKey, KappaIntervals] = {}
    for key, stream in zip(ordered, _spawn(rng, len(ordered)), strict=True):
        members = groups[key]
        out[key] = kappa_intervals(
            [records[i].reference for i in members],
            [records[i].rater for i in members],
            clusters=[records[i].cluster for i in members],
            n_resamples=n_resamples,
            confidence_level=confidence_level,
            rng=stream,
        )
    return out


def _spawn(rng: SeedLike, n: int) -> list[np.random.Generator]:
    """``n`` independent generators spawned from ``rng``."""
    if isinstance(rng, np.random.Generator):
        return list(rng.spawn(n))
    seed = rng if isinstance(rng, np.random.SeedSequence) else np.random.SeedSequence(rng)
    return [np.random.default_rng(child) for child in seed.spawn(n)]
