"""The change in Cohen's kappa from one calibration round to the next, with its interval.

LLMEval-Fair (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and
Fair Evaluation of Large Language Models", app. F.2, table 10) compares the judges' kappa
across calibration rounds. :func:`kappa_change` gives the change ``kappa_b - kappa_a`` of
plain and quadratic-weighted kappa (:class:`KappaChanges`) a studentized bootstrap interval
(:mod:`~judge.agreement.resampling`), paired when both rounds scored the same answers.

The change is NaN where either round's kappa is undefined (or a round has no answers);
its bounds are NaN when a resampled round has fewer than two clusters.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from judge.agreement.kappa import KappaWeights
from judge.agreement.resampling import (
    BOTH_KINDS,
    DEFAULT_RESAMPLES,
    IntArray,
    PlainAndWeighted,
    Resampling,
    SeedLike,
    Studentized,
    check_options,
    cluster_ids,
    linear_combination,
    reported_interval,
    score_codes,
)
from judge.agreement.scores import Scores, json_record

__all__ = ["CalibrationRound", "KappaChange", "KappaChanges", "kappa_change"]


@dataclass(frozen=True, slots=True)
class KappaChange:
    """The change of one kind of kappa from calibration round a to round b.

    ``change = kappa_b - kappa_a`` with its studentized bootstrap interval ``[low, high]``
    (within [-2, 2]) and linearized standard error; ``paired`` says whether the answers
    were resampled jointly (both rounds scored the same answers) or each round on its own.
    NaN where either kappa is undefined.
    """

    kappa_a: float
    kappa_b: float
    change: float
    low: float
    high: float
    standard_error: float
    paired: bool
    n_a: int
    n_b: int
    confidence_level: float
    weights: KappaWeights
    n_resamples: int

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict; NaN becomes ``None``."""
        return json_record(self)


@dataclass(frozen=True, slots=True)
class KappaChanges(PlainAndWeighted[KappaChange]):
    """The change in plain and in quadratic-weighted kappa between two rounds."""


@dataclass(frozen=True, slots=True)
class CalibrationRound:
    """One calibration round: reference and rater scores of the same answers.

    ``answer_ids`` (distinct, aligned with the scores) lets :func:`kappa_change` pair two
    rounds that scored the same answers; ``clusters`` (an item-family id per answer, None
    for an answer of no family) resamples whole families.
    """

    reference: Scores
    rater: Scores
    answer_ids: Sequence[Hashable] | None = None
    clusters: Sequence[Hashable] | None = None


def kappa_change(
    round_a: CalibrationRound,
    round_b: CalibrationRound,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence_level: float = 0.95,
    rng: SeedLike = 0,
) -> KappaChanges:
    """How much plain and quadratic-weighted kappa changed from round a to round b.

    LLMEval-Fair (Zhang et al.) app. F.2, table 10 compares the judges' kappa across
    calibration rounds; here the change ``kappa_b - kappa_a`` gets a studentized bootstrap
    interval (see :mod:`~judge.agreement.resampling`).

    * **Paired** when both rounds give ``answer_ids`` and they are the same set of
      answers: one bootstrap draw of answers (or of clusters) feeds both rounds, so what
      the two rounds share cancels out of the change, and the standard error is that of
      the difference's linearization. Round b is aligned to round a by id; the clusters
      are round a's (or round b's when round a has none), and the two must not put the
      same answers in different clusters.
    * **Independent** otherwise: each round is resampled on its own (with its own
      clusters); the change's replicate is the difference of the rounds' replicates and
      its variance the sum of theirs.

    Parameters
    ----------
    round_a, round_b : CalibrationRound
    n_resamples, confidence_level, rng
        As in :func:`judge.agreement.intervals.kappa_interval`.

    Returns
    -------
    KappaChanges
        NaN where either round's kappa is undefined (or a round has no answers); bounds
        NaN when a resampled round has fewer than two clusters.

    Raises
    ------
    ValueError
        As :func:`judge.agreement.intervals.kappa_interval`; answer ids repeated within a
        round or not one per answer; paired rounds whose clusters contradict each other.
    """
    check_options(n_resamples, confidence_level)
    codes_a = score_codes(round_a.reference, round_a.rater)
    codes_b = score_codes(round_b.reference, round_b.rater)
    order_b = _pairing(round_a, round_b, codes_a.size, codes_b.size)
    gen = np.random.default_rng(rng)
    if order_b is not None:
        stats = _paired_changes(
            round_a, round_b, codes_a, codes_b[order_b], order_b, n_resamples, gen
        )
    else:
        stats = _independent_changes(round_a, round_b, codes_a, codes_b, n_resamples, gen)
    plain, weighted = (
        _change(
            kappas,
            change,
            resampled,
            confidence_level,
            kind,
            paired=order_b is not None,
            n_a=int(codes_a.size),
            n_b=int(codes_b.size),
            n_resamples=n_resamples,
        )
        for kind, (kappas, change, resampled) in zip(BOTH_KINDS, stats, strict=True)
    )
    return KappaChanges(plain, weighted)


_RoundChange = tuple[tuple[float, float], Studentized, bool]
"""(kappa of round a, of round b), the change, whether it was resampled."""


def _paired_changes(
    round_a: CalibrationRound,
    round_b: CalibrationRound,
    codes_a: IntArray,
    aligned_b: IntArray,
    order_b: IntArray,
    n_resamples: int,
    gen: np.random.Generator,
) -> list[_RoundChange]:
    """Both rounds' cells side by side, resampled by one draw of answers (or clusters)."""
    clusters = _paired_clusters(round_a, round_b, order_b)
    resampling = Resampling.of(np.stack([codes_a, aligned_b]), clusters)
    draws, boot = resampling.draw(n_resamples, gen)
    out: list[_RoundChange] = []
    for kind in BOTH_KINDS:
        change = linear_combination(resampling, draws, boot, kind, [-1, 1])
        kappas = (resampling.kappa(kind, 0), resampling.kappa(kind, 1))
        out.append((kappas, change, resampling.n_clusters >= 2))
    return out


def _independent_changes(
    round_a: CalibrationRound,
    round_b: CalibrationRound,
    codes_a: IntArray,
    codes_b: IntArray,
    n_resamples: int,
    gen: np.random.Generator,
) -> list[_RoundChange]:
    """Each round resampled on its own; the change's replicates are differences."""
    sides = []
    for codes, round_ in ((codes_a, round_a), (codes_b, round_b)):
        resampling = Resampling.of(codes[None, :], round_.clusters)
        sides.append((resampling, *resampling.draw(n_resamples, gen)))
    resampled = min(side[0].n_clusters for side in sides) >= 2
    out: list[_RoundChange] = []
    for kind in BOTH_KINDS:
        a, b = (linear_combination(res, draws, boot, kind, [1]) for res, draws, boot in sides)
        out.append(((a.estimate, b.estimate), b.minus(a), resampled))
    return out


def _change(
    kappas: tuple[float, float],
    change: Studentized,
    resampled: bool,
    confidence_level: float,
    weights: KappaWeights,
    *,
    paired: bool,
    n_a: int,
    n_b: int,
    n_resamples: int,
) -> KappaChange:
    low, high, standard_error = reported_interval(
        change, confidence_level, 2.0, resampled=resampled
    )
    return KappaChange(
        kappa_a=kappas[0],
        kappa_b=kappas[1],
        change=change.estimate,
        low=low,
        high=high,
        standard_error=standard_error,
        paired=paired,
        n_a=n_a,
        n_b=n_b,
        confidence_level=confidence_level,
        weights=weights,
        n_resamples=n_resamples,
    )


def _ids(round_: CalibrationRound, n: int) -> list[Hashable] | None:
    if round_.answer_ids is None:
        return None
    ids = list(round_.answer_ids)
    if len(ids) != n:
        raise ValueError(f"{len(ids)} answer ids for {n} answers")
    if len(set(ids)) != len(ids):
        raise ValueError("answer ids repeat within a round")
    return ids


def _pairing(
    round_a: CalibrationRound, round_b: CalibrationRound, n_a: int, n_b: int
) -> IntArray | None:
    """Positions in round b of round a's answers when both rounds scored the same ones."""
    ids_a, ids_b = _ids(round_a, n_a), _ids(round_b, n_b)
    if ids_a is None or ids_b is None or n_a == 0 or set(ids_a) != set(ids_b):
        return None
    where = {answer: i for i, answer in enumerate(ids_b)}
    return np.asarray([where[answer] for answer in ids_a], dtype=np.int64)


def _paired_clusters(
    round_a: CalibrationRound, round_b: CalibrationRound, order_b: IntArray
) -> list[Hashable] | None:
    """One cluster id per answer for paired rounds (in round a's order), or None."""
    n = order_b.size
    from_a = None if round_a.clusters is None else list(round_a.clusters)
    from_b = None if round_b.clusters is None else list(round_b.clusters)
    for given in (from_a, from_b):
        if given is not None and len(given) != n:
            raise ValueError(f"{len(given)} cluster ids for {n} answers")
    if from_b is not None:
        from_b = [from_b[i] for i in order_b]
    if from_a is not None and from_b is not None:
        ids_a, _ = cluster_ids(from_a, n)
        ids_b, _ = cluster_ids(from_b, n)
        if not np.array_equal(ids_a, ids_b):
            raise ValueError("the paired rounds put the same answers in different clusters")
    return from_a if from_a is not None else from_b
