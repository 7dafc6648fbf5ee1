"""Baselines from per-item comparisons: Elo and Bradley-Terry.

LLMEval-Fair compares its relative ranking with an Elo-style ranking built from pairwise
comparisons (§3.1.2, §3.4 Finding 8, figure 5; the Elo system in app. D). We add
that baseline, order-randomised, and the maximum-likelihood Bradley-Terry model that
Elo approximates online.

* :func:`comparisons_from_items`: every pair of models on every item both answered, won
  by the higher item score, tied on equal scores (:class:`Comparison`);
* :func:`elo`: Elo (app. D) averaged over random orders of the comparisons
  (:class:`EloResult`);
* :func:`bradley_terry`: Bradley-Terry strengths by maximum likelihood, with Hunter's
  (2004) MM algorithm (:class:`BradleyTerryResult`).

Outcomes are from the first model's side: 1 a win, 0 a loss, 0.5 a tie (app. D's
``S_A``). Bradley-Terry counts a tie as half a win for each side.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from numbers import Real
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

DEFAULT_K = 32.0
"""Elo's update factor ``K`` (the chess and Chatbot Arena default)."""

DEFAULT_INITIAL = 1500.0
"""Every model's Elo rating before the first comparison."""

DEFAULT_PERMUTATIONS = 100
"""Random orders :func:`elo` averages over."""

ItemId = TypeVar("ItemId", bound=Hashable)

_OUTCOMES = (0.0, 0.5, 1.0)
_CHUNK_ELEMENTS = 4_000_000  # permutations x comparisons held in memory at once
_SeedLike = np.random.Generator | int | np.random.SeedSequence | None
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True)
class Comparison:
    """One pairwise outcome.

    Attributes
    ----------
    model_a, model_b : str
        The two models (different).
    score_a : float
        ``S_A`` of LLMEval-Fair app. D: 1.0 if ``model_a`` won, 0.0 if it lost, 0.5 a tie.
    item : hashable or None
        The item the comparison comes from, if any.
    """

    model_a: str
    model_b: str
    score_a: float
    item: Hashable | None = None


def comparisons_from_items(scores: Mapping[str, Mapping[ItemId, float]]) -> list[Comparison]:
    """Pairwise outcomes of the models on the items they share.

    For every item and every pair of models that both have a score for it, the higher
    score wins and equal scores tie.

    Parameters
    ----------
    scores : mapping of str to mapping of item id to number
        Model -> item id -> the model's score on that item (a 0-3 rubric score, or any
        finite real number).

    Returns
    -------
    list of Comparison
        Items in order of first appearance (walking the models in order); for each item,
        the pairs ``(a, b)`` with ``a`` before ``b`` in the mapping's model order.

    Raises
    ------
    ValueError
        An empty model name, or a score that is not a finite real number (booleans are
        rejected); the message names the model and the item.

    Examples
    --------
    >>> comparisons_from_items({"a": {"q1": 3, "q2": 1}, "b": {"q1": 2, "q2": 1}})
    [Comparison(model_a='a', model_b='b', score_a=1.0, item='q1'), \
Comparison(model_a='a', model_b='b', score_a=0.5, item='q2')]
    """
    models = list(scores)
    by_item: dict[ItemId, list[tuple[int, float]]] = {}
    for index, model in enumerate(models):
        if not isinstance(model, str) or not model:
            raise ValueError(f"model names must be non-empty strings, got {model!r}")
        for item, value in scores[model].items():
            if isinstance(value, bool) or not isinstance(value, Real):
                raise ValueError(f"model {model!r}, item {item!r}: {value!r} is not a number")
            number = float(value)
            if not math.isfinite(number):
                raise ValueError(f"model {model!r}, item {item!r}: {value!r} is not finite")
            by_item.setdefault(item, []).append((index, number))
    out: list[Comparison] = []
    for item, entries in by_item.items():
        for (i, x), (j, y) in combinations(entries, 2):
            outcome = 1.0 if x > y else 0.0 if x < y else 0.5
            out.append(Comparison(models[i], models[j], outcome, item))
    return out


def _encode(
    comparisons: Iterable[Comparison],
) -> tuple[tuple[str, ...], IntArray, IntArray, FloatArray]:
    """Models in order of first appearance and the comparisons as index arrays."""
    index: dict[str, int] = {}
    a: list[int] = []
    b: list[int] = []
    s: list[float] = []
    for n, c in enumerate(comparisons):
        for name in (c.model_a, c.model_b):
            if not isinstance(name, str) or not name:
                raise ValueError(f"comparison {n}: model names must be non-empty strings")
        if c.model_a == c.model_b:
            raise ValueError(f"comparison {n}: model {c.model_a!r} is compared with itself")
        if isinstance(c.score_a, bool) or c.score_a not in _OUTCOMES:
            raise ValueError(
                f"comparison {n} ({c.model_a!r} vs {c.model_b!r}): score_a {c.score_a!r} "
                "must be 1 (win), 0 (loss) or 0.5 (tie)"
            )
        a.append(index.setdefault(c.model_a, len(index)))
        b.append(index.setdefault(c.model_b, len(index)))
        s.append(float(c.score_a))
    if not s:
        raise ValueError("no comparisons")
    return (
        tuple(index),
        np.asarray(a, dtype=np.intp),
        np.asarray(b, dtype=np.intp),
        np.asarray(s, dtype=np.float64),
    )


def _check_elo_parameters(k: float, initial: float) -> None:
    if not (math.isfinite(k) and k > 0):
        raise ValueError(f"k must be a positive finite number, got {k!r}")
    if not math.isfinite(initial):
        raise ValueError(f"initial must be a finite number, got {initial!r}")


def expected_score(rating_a: float, rating_b: float) -> float:
    """Elo's expected score of A against B (LLMEval-Fair (Zhang et al.) app. D, eq. 3).

    .. math:: E_A = \\frac{1}{1 + 10^{(R_B - R_A)/400}}

    Examples
    --------
    >>> expected_score(1500, 1500)
    0.5
    """
    return 1.0 / (1.0 + math.pow(10.0, (rating_b - rating_a) / 400.0))


def _highest_first(values: Mapping[str, float]) -> tuple[str, ...]:
    """The keys of ``values`` by value, highest first; a stable sort keeps ties in order."""
    return tuple(sorted(values, key=lambda key: -values[key]))


@dataclass(frozen=True, slots=True)
class EloResult:
    """Elo ratings averaged over random orders of the comparisons.

    Attributes
    ----------
    ratings : dict of str to float
        Model -> mean final rating over the permutations, models in order of first
        appearance. The ratings sum to ``n_models * initial``.
    std : dict of str to float
        Model -> standard deviation (``ddof=1``) of the final rating across the
        permutations: how much the order alone moves it. NaN for one permutation.
    k : float
    initial : float
    permutations : int
    n_comparisons : int
    """

    ratings: dict[str, float]
    std: dict[str, float]
    k: float
    initial: float
    permutations: int
    n_comparisons: int

    @property
    def order(self) -> tuple[str, ...]:
        """Models by rating, highest first (equal ratings keep their order)."""
        return _highest_first(self.ratings)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; NaN becomes ``None``."""
        return {
            "ratings": dict(self.ratings),
            "std": {m: None if math.isnan(v) else v for m, v in self.std.items()},
            "k": self.k,
            "initial": self.initial,
            "permutations": self.permutations,
            "n_comparisons": self.n_comparisons,
        }


def elo(
    comparisons: Sequence[Comparison],
    *,
    k: float = DEFAULT_K,
    initial: float = DEFAULT_INITIAL,
    permutations: int = DEFAULT_PERMUTATIONS,
    rng: _SeedLike = None,
) -> EloResult:
    """Order-randomised Elo ratings (LLMEval-Fair app. D).

    Online Elo depends on the order of the comparisons, which here carries no meaning
    (items are not played in time). The comparisons are therefore processed in
    ``permutations`` random orders with a fixed ``K``, and the final ratings averaged.
    Order ``p`` is ``gen.permutation(len(comparisons))`` for ``p = 0, 1, ...`` in turn
    with ``gen = numpy.random.default_rng(rng)``. In one order every model starts at
    ``initial`` and each comparison, with ``E_A`` from :func:`expected_score` of the current
    ratings, moves ``R_A' = R_A + K (S_A - E_A)`` and ``R_B' = R_B - K (S_A - E_A)`` (B's
    own update, since ``S_B = 1 - S_A`` and ``E_B = 1 - E_A``), so the sum of the ratings
    never changes. The permutations are run side by side with numpy, one comparison step
    at a time.

    Parameters
    ----------
    comparisons : sequence of Comparison
    k : float, default 32
        The fixed update factor ``K``.
    initial : float, default 1500
        The starting rating.
    permutations : int, default 100
        How many random orders to average over.
    rng : numpy.random.Generator, int, SeedSequence or None
        Randomness for the orders.

    Returns
    -------
    EloResult

    Raises
    ------
    ValueError
        No comparisons, an invalid comparison, a non-positive ``k`` or ``permutations``
        below 1.
    """
    _check_elo_parameters(k, initial)
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise ValueError(f"permutations must be a positive integer, got {permutations!r}")
    models, a, b, s = _encode(comparisons)
    gen = np.random.default_rng(rng)
    m = len(s)
    finals = np.empty((permutations, len(models)), dtype=np.float64)
    chunk = max(1, min(permutations, _CHUNK_ELEMENTS // m))
    for start in range(0, permutations, chunk):
        rows = min(chunk, permutations - start)
        orders = np.stack([gen.permutation(m) for _ in range(rows)], axis=1)  # (m, rows)
        ia, ib, outcome = a[orders], b[orders], s[orders]
        ratings = np.full((rows, len(models)), float(initial))
        row = np.arange(rows)
        for t in range(m):
            i, j = ia[t], ib[t]
            ri, rj = ratings[row, i], ratings[row, j]
            delta = k * (outcome[t] - 1.0 / (1.0 + 10.0 ** ((rj - ri) / 400.0)))
            ratings[row, i] = ri + delta
            ratings[row, j] = rj - delta
        finals[start : start + rows] = ratings
    mean = finals.mean(axis=0)
    std = finals.std(axis=0, ddof=1) if permutations > 1 else np.full(len(models), math.nan)
    return EloResult(
        ratings={model: float(v) for model, v in zip(models, mean, strict=True)},
        std={model: float(v) for model, v in zip(models, std, strict=True)},
        k=float(k),
        initial=float(initial),
        permutations=permutations,
        n_comparisons=m,
    )


class BradleyTerryError(ValueError):
    """The comparisons admit no finite maximum-likelihood Bradley-Terry strengths."""


@dataclass(frozen=True, slots=True)
class BradleyTerryResult:
    """Maximum-likelihood Bradley-Terry strengths.

    The model: ``P(i beats j) = pi_i / (pi_i + pi_j)``, ``pi_i = exp(theta_i)``.

    Attributes
    ----------
    log_strengths : dict of str to float
        Model -> ``theta_i``, normalised so that they sum to 0 (the strengths' geometric
        mean is 1); models in order of first appearance.
    log_likelihood : float
        At the estimate, ties counted as half a win for each side.
    n_iter : int
        MM iterations run.
    converged : bool
        Whether the largest change of a ``theta_i`` in the last iteration fell below the
        tolerance.
    n_comparisons : int
    """

    log_strengths: dict[str, float]
    log_likelihood: float
    n_iter: int
    converged: bool
    n_comparisons: int

    @property
    def order(self) -> tuple[str, ...]:
        """Models by strength, strongest first (equal strengths keep their order)."""
        return _highest_first(self.log_strengths)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "log_strengths": dict(self.log_strengths),
            "log_likelihood": self.log_likelihood,
            "n_iter": self.n_iter,
            "converged": self.converged,
            "n_comparisons": self.n_comparisons,
        }


def _check_connected(models: tuple[str, ...], wins: FloatArray) -> None:
    """Hunter (2004) assumption 1: every split of the models has a win across, both ways."""
    n_components, labels = connected_components(
        csr_matrix(wins > 0), directed=True, connection="strong"
    )
    if n_components == 1:
        return
    for c in range(n_components):
        inside = labels == c
        if wins[np.ix_(~inside, inside)].sum() > 0:
            continue  # some outside model beats or ties a model of this component
        group = ", ".join(repr(m) for m, x in zip(models, inside, strict=True) if x)
        compared = wins[np.ix_(inside, ~inside)].sum() > 0
        what = "never lose or tie against" if compared else "are never compared with"
        raise BradleyTerryError(
            f"no finite maximum-likelihood strengths: models {group} {what} the other "
            f"models (every split of the models needs a win or tie across it both ways)"
        )
    raise AssertionError("unreachable: a condensation graph always has a source")


def bradley_terry(
    comparisons: Iterable[Comparison],
    *,
    tol: float = 1e-10,
    max_iter: int = 100_000,
) -> BradleyTerryResult:
    """Bradley-Terry strengths by maximum likelihood (Hunter 2004, MM algorithm).

    With ``W_ij`` the wins of ``i`` over ``j`` (a tie adds 0.5 to both ``W_ij`` and
    ``W_ji``) the log-likelihood is ``sum_ij W_ij log(pi_i / (pi_i + pi_j))``. Starting
    from equal strengths, each MM step sets
    ``pi_i <- W_i / sum_j N_ij / (pi_i + pi_j)`` with ``W_i`` the wins of ``i`` and
    ``N_ij = W_ij + W_ji`` the comparisons of ``i`` and ``j``, then rescales the
    strengths to geometric mean 1 (``sum theta_i = 0``), which fixes the model's one free
    constant. Every step increases the likelihood; the iteration stops when no
    ``theta_i = log pi_i`` moves by more than ``tol``.

    Counting a tie as half a win is the usual choice (e.g. Chatbot Arena) and keeps the
    plain Bradley-Terry model; a tie-aware model (Rao-Kupper, Davidson) would need an
    extra parameter.

    Parameters
    ----------
    comparisons : iterable of Comparison
    tol : float, default 1e-10
        Convergence tolerance on the log-strengths.
    max_iter : int, default 100000
        Iteration limit; the result says whether it converged.

    Returns
    -------
    BradleyTerryResult

    Raises
    ------
    ValueError
        No comparisons, an invalid comparison or fewer than two models.
    BradleyTerryError
        The comparisons leave the maximum likelihood at infinity: some group of models
        never loses (nor ties) against the rest, or is never compared with it (Hunter
        2004, assumption 1).

    References
    ----------
    D. R. Hunter, "MM algorithms for generalized Bradley-Terry models", *The Annals of
    Statistics* 32(1), 2004, pp. 384-406.
    """
    if not (tol > 0 and math.isfinite(tol)):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    models, a, b, s = _encode(comparisons)
    n = len(models)
    if n < 2:
        raise ValueError("Bradley-Terry needs at least two models")
    wins = np.zeros((n, n), dtype=np.float64)
    np.add.at(wins, (a, b), s)
    np.add.at(wins, (b, a), 1.0 - s)
    _check_connected(models, wins)
    games = wins + wins.T
    log_wins = np.log(wins.sum(axis=1))
    theta = np.zeros(n, dtype=np.float64)
    converged = False
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        # sum_j N_ij / (pi_i + pi_j), in logs so large strengths do not overflow
        pair = np.logaddexp(theta[:, None], theta[None, :])
        new = log_wins - np.log((games * np.exp(-pair)).sum(axis=1))
        new -= new.mean()
        step = float(np.max(np.abs(new - theta)))
        theta = new
        if step < tol:
            converged = True
            break
    pair = np.logaddexp(theta[:, None], theta[None, :])
    log_likelihood = float((wins * (theta[:, None] - pair)).sum())
    return BradleyTerryResult(
        log_strengths={m: float(t) for m, t in zip(models, theta, strict=True)},
        log_likelihood=log_likelihood,
        n_iter=n_iter,
        converged=converged,
        n_comparisons=len(s),
    )
