"""The judge's share of a leaderboard's uncertainty: resampling the judges of a panel.

The session bootstrap (:func:`~judge.ranking.stability.hierarchical_bootstrap`) resamples
sessions and items, taking every item's score as fixed. With a panel of k judges
(:mod:`judge.panel`) the score itself depends on which judges sat on the panel: another
panel of equally good judges would have scored some answers differently, and a harsh
judge is harsh for every model. This module adds that variance as an independent second
stage of a two-stage bootstrap (A. C. Davison & D. V. Hinkley, "Bootstrap Methods and
their Application", 1997, §3.8: resample the units of each stage independently):

1. replicate ``b`` draws k judge columns with replacement, the *same* columns for every
   model (the judges are shared, so their harshness moves every model together and
   largely cancels out of comparisons between models);
2. every answer's verdict under the drawn panel is the panel rule (median or mean) of
   its drawn judges' scores, rounded to a rubric point as
   :func:`judge.panel.answer_verdict` does; an answer none of the drawn judges scored
   falls back to all its judges' scores;
3. the model's offset in replicate ``b`` is its mean verdict under the drawn panel minus
   its mean verdict under the whole panel, on the scale of LLMEval-Fair (Zhang et al.)
   eq. 1 (``/ 3 * 100``), the scale of the session replicates.

:func:`with_judge_variance` adds the offsets to the session replicates (paired by index);
:func:`judge.ranking.leaderboard.build_leaderboard` does so when given panels, so that its
intervals, rank ranges, beat probabilities and tie groups include the judges' variance.
The point estimates are unchanged: they are the scores actually given.

Judges that agree on every answer give offsets of 0. An answer no judge scored (all NaN)
has no verdict and is left out, as :func:`judge.panel.answer_verdict` leaves it out of
every score. An answer a person reviewed counts with the reviewers' score whatever the
judges said: give it the reviewers' score in every column (no judge variance) or leave it
out.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from judge.panel import PanelRule
from judge.ranking.scores import MAX_SCORE
from judge.ranking.stability import DEFAULT_RESAMPLES, BootstrapReplicates

__all__ = ["judge_offsets", "with_judge_variance"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
SeedLike = np.random.Generator | int | np.random.SeedSequence | None

_CHUNK = 1 << 22
"""Answer x panel x judge entries combined at once: bounds the memory."""


def _panel(model: str, scores: npt.ArrayLike) -> FloatArray:
    """The panel as floats, after checking it is (answers, judges) of NaN or 0-3 integers."""
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(
            f"model {model!r}: a panel is an (answers, judges) array, got shape {array.shape}"
        )
    scored = array[~np.isnan(array)]
    bad = (scored < 0) | (scored > MAX_SCORE) | (scored != np.round(scored))
    if bad.any():
        raise ValueError(
            f"model {model!r}: score {scored[bad][0]!r} is not an integer 0-{MAX_SCORE}"
        )
    return array


def _verdicts(scores: FloatArray, rule: PanelRule) -> FloatArray:
    """The rounded ``rule`` over the non-NaN scores of the last axis; NaN where none.

    The median of an even number of scores is the mean of the middle two, and means are
    rounded half to even, as :func:`judge.panel.answer_verdict` does."""
    valid = ~np.isnan(scores)
    count = valid.sum(axis=-1)
    if rule is PanelRule.MEAN:
        total = np.where(valid, scores, 0.0).sum(axis=-1)
        combined = total / np.maximum(count, 1)
    else:
        ordered = np.sort(scores, axis=-1)  # NaN last
        low = np.maximum((count - 1) // 2, 0)[..., None]
        high = np.maximum(count // 2, 0)[..., None]
        middle = np.take_along_axis(ordered, low, -1) + np.take_along_axis(ordered, high, -1)
        combined = middle[..., 0] / 2
    return np.asarray(np.where(count > 0, np.round(combined), np.nan), dtype=np.float64)


def _drawn_means(panel: FloatArray, draws: IntArray, rule: PanelRule) -> tuple[FloatArray, float]:
    """Mean verdict over the scored answers under every distinct drawn panel (rows of
    ``draws``, judge columns) and under the whole panel."""
    full = _verdicts(panel, rule)
    scored = ~np.isnan(full)
    if not scored.any():
        return np.zeros(draws.shape[0]), 0.0
    panel, full = panel[scored], full[scored]
    means = np.empty(draws.shape[0])
    step = max(1, _CHUNK // (panel.shape[0] * draws.shape[1]))
    for start in range(0, draws.shape[0], step):
        chunk = draws[start : start + step]
        drawn = _verdicts(panel[:, chunk], rule)  # (answers, panels in chunk)
        drawn = np.where(np.isnan(drawn), full[:, None], drawn)
        means[start : start + step] = drawn.mean(axis=0)
    return means, float(full.mean())


def judge_offsets(
    panels: Mapping[str, npt.ArrayLike],
    *,
    rule: PanelRule | str = PanelRule.MEDIAN,
    n_resamples: int = DEFAULT_RESAMPLES,
    rng: SeedLike = None,
) -> dict[str, FloatArray]:
    """Per model, how much its score moves when the panel's judges are resampled.

    See the module notes for the procedure (the judge stage of a two-stage bootstrap,
    Davison & Hinkley §3.8).

    Parameters
    ----------
    panels : mapping of str to array_like, shape (n_answers, k)
        Model key -> the 0-3 scores its answers got from the k panel judges (NaN where a
        judge did not score); the same k judges, in the same column order, for every
        model.
    rule : PanelRule or str, default median
        How the drawn judges' scores of an answer become its verdict.
    n_resamples : int, default 2000
        Replicates; pass the session bootstrap's so the offsets pair with its replicates.
    rng : numpy.random.Generator, int, SeedSequence or None
        Randomness of the judge draws. Replicate ``b`` uses the judge columns
        ``default_rng(rng).integers(k, size=(n_resamples, k))[b]``, for every model.

    Returns
    -------
    dict of str to ndarray, shape (n_resamples,)
        Model key -> offsets on the eq. 1 scale (0-100 points), in the order of
        ``panels``; all 0 when the judges agree on every answer.

    Raises
    ------
    ValueError
        A panel that is not two-dimensional, panels with different numbers of judges, a
        score that is not NaN or an integer 0-3, or ``n_resamples`` < 1.
    """
    rule = PanelRule(rule)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    checked = {model: _panel(model, scores) for model, scores in panels.items()}
    widths = {array.shape[1] for array in checked.values()}
    if len(widths) > 1:
        raise ValueError(f"every panel must have the same judges; got widths {sorted(widths)}")
    if not checked:
        return {}
    k = widths.pop()
    picks = np.random.default_rng(rng).integers(k, size=(n_resamples, k))
    # The verdicts depend on the drawn multiset of judges only: combine each distinct one once.
    distinct, which = np.unique(np.sort(picks, axis=1), axis=0, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    scale = 100.0 / MAX_SCORE
    offsets: dict[str, FloatArray] = {}
    for model, panel in checked.items():
        means, full = _drawn_means(panel, np.asarray(distinct, dtype=np.int64), rule)
        offsets[model] = np.asarray((means[which] - full) * scale, dtype=np.float64)
    return offsets


def with_judge_variance(
    boot: BootstrapReplicates,
    panels: Mapping[str, npt.ArrayLike],
    *,
    rule: PanelRule | str = PanelRule.MEDIAN,
    rng: SeedLike = None,
) -> BootstrapReplicates:
    """The session replicates plus each model's judge offsets (:func:`judge_offsets`).

    Replicate ``b`` of model ``m`` becomes ``S*_mb + offset_mb``, clipped to the scale's
    0-100; models without a panel (and panels of models not in ``boot``) add nothing.
    Summaries, beat probabilities and tie groups computed from the result include the
    judges' variance as the second, independent stage of a two-stage bootstrap (Davison &
    Hinkley, "Bootstrap Methods and their Application", §3.8); the point estimates, which
    come from the session scores, are unchanged.

    Raises
    ------
    ValueError
        As :func:`judge_offsets`.
    """
    offsets = judge_offsets(panels, rule=rule, n_resamples=boot.n_resamples, rng=rng)
    shifted = np.array(boot.absolute, dtype=np.float64)
    for m, model in enumerate(boot.models):
        if model in offsets:
            shifted[m] = np.clip(shifted[m] + offsets[model], 0.0, 100.0)
    shifted.flags.writeable = False
    return BootstrapReplicates(runs=boot.runs, absolute=shifted)
