"""Per-item health statistics of the question bank, from the sparse response matrix.

Every statistic is one vectorised pass over the observed cells (sorted by item), so a bank
of a million items answered by 60 models takes seconds. Inputs: the graded score
``y = s / 3`` and the correctness ``c = [s >= 2]`` of each observed cell; a missing response is
never imputed. Below ``Minimums.models_per_item`` responding models an item's p, separation,
discrimination and CAS are NaN (its ``n`` is still reported).

Sources: difficulty, CAS and K-fold CAS from Capability Alignment (eqs. 1-2, App. D);
inversions and item CAD from Benchmark² (Qian et al., eqs. 3-6); the separation share is
the per-item reading of Benchmark²'s discriminability (the share of model pairs an item
separates), and the 2PL parameters come from :func:`bank.adaptive.irt.fit_2pl`.

Choices where the papers are silent (stated here because they change numbers):

* Discrimination (point-biserial, Spearman) correlates an item with each model's
  **leave-family-out** ability: the model's mean ``y`` over its cells outside the item's
  family, so neither the item nor its variants score themselves. A model that answered
  nothing outside the family is left out of that item's correlation.
* CAS takes the binary entropy of ``mean(c)`` (the split of correct / incorrect), and keeps
  the graded ``y`` inside the Spearman correlation.
* K-fold CAS splits **families** (never items) into folds, within difficulty quartiles.
* Inversions need both models of a pair to have answered the item (``pairs`` counts only
  such pairs); models without a family or a parameter count form no pair.
* Abilities are rounded to 12 decimals before ranking, so equal means tie.
"""

from __future__ import annotations

import numpy as np

from bank.adaptive.irt import fit_2pl
from bank.health.grouped import (
    TIE_DECIMALS,
    average_ranks,
    fisher_interval,
    group_pearson,
)
from bank.health.responses import BoolArray, FloatArray, IntArray, Responses
from bank.health.results import ItemStatistics, Minimums

CAD_LAMBDA = 12.0
"""lambda of Benchmark² eq. 6: ``CAD = exp(-lambda * inversion rate)``."""
NO_FOLD = -1


def item_statistics(
    responses: Responses,
    *,
    minimums: Minimums = Minimums(),  # noqa: B008 - frozen dataclass, safe as a default
    folds: int = 5,
    quartiles: int = 4,
) -> ItemStatistics:
    """Every per-item statistic of ``responses`` (see :class:`ItemStatistics` for each field).

    Parameters
    ----------
    responses
        The observed cells; ``responses.family`` groups item variants.
    minimums
        ``models_per_item`` gates p, difficulty, separation, discrimination and CAS;
        ``responses_for_irt`` gates the 2PL parameters.
    folds, quartiles
        K and the number of difficulty strata of the K-fold CAS (Capability Alignment,
        App. D: K = 5 within 4 quartiles).
    """
    n = responses.responses_per_item()
    enough = n >= minimums.models_per_item
    p = np.where(enough, _item_means(responses, responses.score), np.nan)
    share_correct = _item_means(responses, responses.correct.astype(np.float64))
    entropy = binary_entropy(share_correct)

    score_ranks = average_ranks(responses.score, responses.item)
    lfo = leave_group_out_abilities(responses, responses.family)
    point_biserial, pb_low, pb_high = _point_biserial(responses, lfo)
    spearman = _spearman(responses, lfo, score_ranks)

    theta = np.round(responses.abilities(), TIE_DECIMALS)[responses.model]
    cas = _cas(entropy, _spearman(responses, theta, score_ranks))

    item_fold = kfold_assignment(responses, p, folds=folds, quartiles=quartiles)
    theta_kfold = leave_group_out_abilities(responses, item_fold)
    cas_kfold = _cas(entropy, _spearman(responses, theta_kfold, score_ranks))

    inversions, pairs = family_inversions(responses)
    with np.errstate(divide="ignore", invalid="ignore"):
        cad = np.where(pairs > 0, np.exp(-CAD_LAMBDA * inversions / pairs), np.nan)
    irt_a, irt_b = _irt(responses, n >= minimums.responses_for_irt)

    def gated(values: FloatArray) -> FloatArray:
        return np.where(enough, values, np.nan)

    return ItemStatistics(
        n=n,
        p=p,
        difficulty=1.0 - p,
        point_biserial=gated(point_biserial),
        point_biserial_low=gated(pb_low),
        point_biserial_high=gated(pb_high),
        spearman=gated(spearman),
        cas=gated(cas),
        cas_kfold=np.where(enough & (item_fold != NO_FOLD), cas_kfold, np.nan),
        inversions=inversions,
        pairs=pairs,
        cad=cad,
        separation=gated(separation(responses)),
        irt_a=irt_a,
        irt_b=irt_b,
    )


def binary_entropy(p: FloatArray) -> FloatArray:
    """``H2(p) = -p log2 p - (1-p) log2(1-p)`` with ``H2(0) = H2(1) = 0``; NaN stays NaN."""
    q = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -q * np.log2(q) - (1.0 - q) * np.log2(1.0 - q)
    return np.where((q <= 0.0) | (q >= 1.0), 0.0, h)


def separation(responses: Responses) -> FloatArray:
    """``d_q = 2 n1 (n - n1) / (n (n - 1))``: the share of pairs of responding models that
    item q separates (one correct, one not), n1 the number correct. A per-item reading of
    Benchmark²'s discriminability (Qian et al., §5.4); NaN below 2 responses."""
    n = responses.responses_per_item().astype(np.float64)
    n1 = np.bincount(responses.item, responses.correct, minlength=responses.n_items)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = 2.0 * n1 * (n - n1) / (n * (n - 1.0))
    return np.where(n >= 2, d, np.nan)


def leave_group_out_abilities(responses: Responses, item_group: IntArray) -> FloatArray:
    """Per cell (item i, model m): m's mean score over its cells whose item is **not** in
    i's group (Capability Alignment eq. 1 on the complement); NaN if m has no such cell.

    ``item_group`` gives a group per item; :data:`NO_FOLD` (-1) means "in no group": such an
    item's cells count for every group and its own cells see m's mean over all its cells.
    Rounded to :data:`~bank.health.grouped.TIE_DECIMALS` so equal means tie."""
    n_models = responses.n_models
    model, score = responses.model, responses.score
    totals = np.bincount(model, score, minlength=n_models)
    counts = np.bincount(model, minlength=n_models).astype(np.float64)
    group = np.asarray(item_group, dtype=np.int64)[responses.item]
    grouped = group != NO_FOLD
    keys = group[grouped] * n_models + model[grouped]
    unique_keys, inverse = np.unique(keys, return_inverse=True)
    inside_sum = np.zeros(score.size)
    inside_count = np.zeros(score.size)
    inside_sum[grouped] = np.bincount(inverse, score[grouped], minlength=unique_keys.size)[inverse]
    inside_count[grouped] = np.bincount(inverse, minlength=unique_keys.size)[inverse]
    rest = counts[model] - inside_count
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = (totals[model] - inside_sum) / rest
    rounded: FloatArray = np.where(rest > 0, theta, np.nan).round(TIE_DECIMALS)
    return rounded


def kfold_assignment(
    responses: Responses, p: FloatArray, *, folds: int = 5, quartiles: int = 4
) -> IntArray:
    """The K-fold of each item, by **family** within difficulty quartiles (Capability
    Alignment App. D, made deterministic and grouped).

    A family's difficulty is the mean ``1 - p`` of its items with a p (rounded to 12
    decimals, so equal means tie). Families are ordered by (difficulty, smallest item
    index), split into ``quartiles`` strata with ``np.array_split``, and a family's fold is
    its position within its stratum mod ``folds``. Every item of a family takes the
    family's fold, including an item without a p (so variants never sit on both sides of a
    split); a family none of whose items has a p gets :data:`NO_FOLD`."""
    labels, first_item, family = np.unique(responses.family, return_index=True, return_inverse=True)
    has_p = np.isfinite(p)
    difficulty_sum = np.bincount(family[has_p], 1.0 - p[has_p], minlength=labels.size)
    rated = np.bincount(family[has_p], minlength=labels.size)
    eligible = np.flatnonzero(rated > 0)
    difficulty = np.round(difficulty_sum[eligible] / rated[eligible], TIE_DECIMALS)
    order = eligible[np.lexsort((first_item[eligible], difficulty))]
    family_fold = np.full(labels.size, NO_FOLD, dtype=np.int64)
    for stratum in np.array_split(order, quartiles):
        family_fold[stratum] = np.arange(stratum.size) % folds
    return family_fold[family]


def family_inversions(responses: Responses) -> tuple[IntArray, IntArray]:
    """Per item, (inversions, pairs) over within-family model pairs (Benchmark², eqs. 3-5).

    For every registered model family, every pair of its models with known and **different**
    parameter counts that both answered the item is a pair (``comp_q``, counted on observed
    pairs only); it is an inversion when the larger model is incorrect and the smaller one
    correct (``c = [s >= 2]``). Models of equal size form no pair; models without a family
    or a parameter count take no part. Vectorised over cells: within each (item, family),
    cells are ordered by size, and each cell counts the larger cells before it."""
    family_of, size_rank_of = _model_families(responses)
    cells = family_of[responses.model] >= 0
    item = responses.item[cells]
    family = family_of[responses.model[cells]]
    size = size_rank_of[responses.model[cells]]
    correct = responses.correct[cells]
    order = _item_family_size_order(item, family, size)
    item, family, size, correct = item[order], family[order], size[order], correct[order]
    new_group = np.ones(item.size, bool)
    new_group[1:] = (item[1:] != item[:-1]) | (family[1:] != family[:-1])
    new_run = new_group.copy()
    new_run[1:] |= size[1:] != size[:-1]
    index = np.arange(item.size)
    group_first = np.maximum.accumulate(np.where(new_group, index, 0))
    run_first = np.maximum.accumulate(np.where(new_run, index, 0))
    wrong = (~correct).astype(np.int64)
    wrong_before: IntArray = np.cumsum(wrong) - wrong
    larger = run_first - group_first
    larger_wrong: IntArray = wrong_before[run_first] - wrong_before[group_first]
    pairs = np.bincount(item, larger, minlength=responses.n_items)
    inversions = np.bincount(item, np.where(correct, larger_wrong, 0), minlength=responses.n_items)
    return inversions.astype(np.int64), pairs.astype(np.int64)


def _item_family_size_order(item: IntArray, family: IntArray, size_rank: IntArray) -> IntArray:
    """The permutation sorting cells by (item, family, size rank): one integer key sorted
    stably (timsort runs along the cells, which arrive grouped by item)."""
    if item.size == 0:
        return np.zeros(0, dtype=np.int64)
    families, ranks = int(family.max()) + 1, int(size_rank.max()) + 1
    if (int(item.max()) + 1) * families * ranks >= 2**62:
        return np.lexsort((size_rank, family, item)).astype(np.int64)
    key = (item * families + family) * ranks + size_rank
    return np.argsort(key, kind="stable").astype(np.int64)


def family_statistics(responses: Responses, stats: ItemStatistics) -> dict[str, FloatArray]:
    """Item statistics aggregated per item family (variants of one question), indexed by
    the sorted distinct values of ``responses.family`` (key ``"family"``).

    ``items``: items in the family; ``p`` and ``cas``: means over its items where defined
    (NaN if none); ``inversions`` and ``pairs``: sums, with ``cad`` = exp(-12 * sum inv /
    sum pairs) pooled as Benchmark² eq. 4 pools over items (NaN without a pair)."""
    labels, family = np.unique(responses.family, return_inverse=True)
    size = labels.size

    def mean_defined(values: FloatArray) -> FloatArray:
        ok = np.isfinite(values)
        total = np.bincount(family[ok], values[ok], minlength=size)
        count = np.bincount(family[ok], minlength=size)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(count > 0, total / count, np.nan)

    inversions = np.bincount(family, stats.inversions, minlength=size)
    pairs = np.bincount(family, stats.pairs, minlength=size)
    with np.errstate(divide="ignore", invalid="ignore"):
        cad = np.where(pairs > 0, np.exp(-CAD_LAMBDA * inversions / pairs), np.nan)
    return {
        "family": labels.astype(np.float64),
        "items": np.bincount(family, minlength=size).astype(np.float64),
        "p": mean_defined(stats.p),
        "cas": mean_defined(stats.cas),
        "inversions": inversions,
        "pairs": pairs,
        "cad": cad,
    }


def _item_means(responses: Responses, values: FloatArray) -> FloatArray:
    """Per item, the mean of ``values`` over its cells; NaN for an item without a cell."""
    totals = np.bincount(responses.item, values, minlength=responses.n_items)
    counts = responses.responses_per_item()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(counts > 0, totals / counts, np.nan)


def _point_biserial(
    responses: Responses, theta: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(Pearson r of c against the per-cell ability ``theta``, its 95% Fisher-z interval),
    over the cells with a finite ability."""
    keep = np.isfinite(theta)
    item, n_items = responses.item[keep], responses.n_items
    correct = responses.correct[keep].astype(np.float64)
    r, count = group_pearson(correct, theta[keep], item, n_items)
    low, high = fisher_interval(r, count)
    return r, low, high


def _spearman(responses: Responses, theta: FloatArray, score_ranks: FloatArray) -> FloatArray:
    """Per item, Spearman rho of ``y`` against the per-cell ability ``theta`` over the cells
    with a finite ability (``score_ranks``: the ranks of y over all cells, reused when every
    cell has one); NaN where undefined."""
    keep: BoolArray = np.isfinite(theta)
    item = responses.item[keep]
    ranks = score_ranks if keep.all() else average_ranks(responses.score[keep], item)
    rho, _ = group_pearson(ranks, average_ranks(theta[keep], item), item, responses.n_items)
    return rho


def _cas(entropy: FloatArray, rho: FloatArray) -> FloatArray:
    """``CAS_i = H2(mean c_i) * max(0, rho_i)`` (Capability Alignment eq. 2); an undefined
    rho (a constant side, fewer than two models) counts as 0, as a constant outcome does
    through H2."""
    return np.asarray(entropy * np.maximum(np.nan_to_num(rho, nan=0.0), 0.0), dtype=np.float64)


def _model_families(responses: Responses) -> tuple[IntArray, IntArray]:
    """Per model, a family index (-1: no family or no parameter count) and the rank of its
    parameter count among the distinct known counts, 0 for the largest."""
    names: dict[str, int] = {}
    family_of = np.full(responses.n_models, -1, dtype=np.int64)
    size_of = np.full(responses.n_models, np.nan)
    for index, info in enumerate(responses.models):
        if info.family is None or info.params_b is None or not np.isfinite(info.params_b):
            continue
        family_of[index] = names.setdefault(info.family, len(names))
        size_of[index] = info.params_b
    known = family_of >= 0
    size_rank = np.zeros(responses.n_models, dtype=np.int64)
    size_rank[known] = np.unique(-size_of[known], return_inverse=True)[1].reshape(-1)
    return family_of, size_rank


def _irt(responses: Responses, eligible: BoolArray) -> tuple[FloatArray, FloatArray]:
    """2PL (a, b) of the eligible items, fitted jointly to their correctness ``c`` (models ×
    items, NaN unanswered) by :func:`bank.adaptive.irt.fit_2pl`; NaN elsewhere, and
    everywhere when fewer than two items or two models qualify."""
    a = np.full(responses.n_items, np.nan)
    b = np.full(responses.n_items, np.nan)
    items = np.flatnonzero(eligible)
    if items.size < 2:
        return a, b
    column = np.full(responses.n_items, -1, dtype=np.int64)
    column[items] = np.arange(items.size)
    cells = eligible[responses.item]
    models = np.unique(responses.model[cells])
    if models.size < 2:
        return a, b
    row = np.full(responses.n_models, -1, dtype=np.int64)
    row[models] = np.arange(models.size)
    matrix = np.full((models.size, items.size), np.nan)
    matrix[row[responses.model[cells]], column[responses.item[cells]]] = responses.correct[
        cells
    ].astype(np.float64)
    fit = fit_2pl(matrix)
    a[items], b[items] = fit.items.a, fit.items.b
    return a, b
