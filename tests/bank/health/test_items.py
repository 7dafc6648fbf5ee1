"""Per-item health statistics: the worked test vector, a per-item reference loop with
scipy on random sparse matrices, the minimums, the inversion rules and the 2PL hand-off."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import stats

from bank.adaptive.irt import fit_2pl
from bank.health.grouped import average_ranks, fisher_interval, group_pearson, group_spearman
from bank.health.items import (
    binary_entropy,
    family_statistics,
    item_statistics,
    kfold_assignment,
)
from bank.health.responses import ModelInfo, Responses
from bank.health.results import ItemStatistics, Minimums

FloatArray = NDArray[np.float64]
Z95 = 1.959964

# --------------------------------------------------------------------------------------
# The worked example: six models (family A 1.5/7/14B, family B 2/4/9B), eight binary items.

VECTOR_ROWS = ("111111", "001001", "011011", "101100", "000000", "011111", "110011", "001011")
VECTOR_MODELS = (
    ModelInfo("a-1.5b", "A", 1.5),
    ModelInfo("a-7b", "A", 7.0),
    ModelInfo("a-14b", "A", 14.0),
    ModelInfo("b-2b", "B", 2.0),
    ModelInfo("b-4b", "B", 4.0),
    ModelInfo("b-9b", "B", 9.0),
)


def _vector() -> Responses:
    matrix = np.array([[float(ch) for ch in row] for row in VECTOR_ROWS])
    return Responses.from_dense([f"i{i}" for i in range(8)], VECTOR_MODELS, matrix)


def test_worked_vector() -> None:
    """p, H2, CAS_i (theta over all items), CAS_bench, inversions, item CAD, d_q and the
    K-fold CAS of the worked example, to its printed precision."""
    responses = _vector()
    result = item_statistics(responses, minimums=Minimums(models_per_item=3))
    assert result.n.tolist() == [6] * 8
    np.testing.assert_allclose(result.p, [1, 1 / 3, 2 / 3, 0.5, 0, 5 / 6, 2 / 3, 0.5])
    np.testing.assert_allclose(result.difficulty, 1 - result.p)
    h2 = binary_entropy(result.p)
    np.testing.assert_allclose(h2, [0, 0.9183, 0.9183, 1, 0, 0.6500, 0.9183, 1], atol=5e-5)
    np.testing.assert_allclose(result.cas, [0, 0.7831, 0.7831, 0, 0, 0.3506, 0, 0.9045], atol=5e-5)
    assert result.cas.mean() == pytest.approx(0.35267, abs=5e-6)
    assert result.inversions.tolist() == [0, 0, 0, 3, 0, 0, 2, 0]
    assert result.pairs.tolist() == [6] * 8
    expected_cad = np.ones(8)
    expected_cad[3], expected_cad[6] = math.exp(-12 * 3 / 6), math.exp(-12 * 2 / 6)
    np.testing.assert_allclose(result.cad, expected_cad)
    assert result.cad[3] == pytest.approx(0.0025, abs=5e-5)
    assert result.cad[6] == pytest.approx(0.0183, abs=5e-5)
    pooled = math.exp(-12 * result.inversions.sum() / result.pairs.sum())
    assert pooled == pytest.approx(0.28650, abs=5e-6)
    np.testing.assert_allclose(
        result.separation, [0, 0.5333, 0.5333, 0.6, 0, 0.3333, 0.5333, 0.6], atol=5e-5
    )
    folds = kfold_assignment(responses, result.p)
    assert folds.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    np.testing.assert_allclose(
        result.cas_kfold, [0, 0.3976, 0.7953, 0, 0, 0.2014, 0, 0.6928], atol=5e-5
    )
    assert result.cas_kfold.mean() == pytest.approx(0.26089, abs=5e-6)
    # Too few responses for the 2PL: every a and b is NaN.
    assert np.isnan(result.irt_a).all() and np.isnan(result.irt_b).all()


def test_worked_vector_discrimination_matches_reference() -> None:
    """The leave-family-out discrimination fields of the worked example (every item its own
    family) equal the scipy reference loop."""
    responses = _vector()
    minimums = Minimums(models_per_item=3)
    _assert_matches_reference(responses, minimums, item_statistics(responses, minimums=minimums))


# --------------------------------------------------------------------------------------
# The reference: one item at a time, dense, with scipy.


def _round(x: FloatArray) -> FloatArray:
    return np.asarray(np.round(x, 12), dtype=np.float64)


def _h2(p: float) -> float:
    if p <= 0 or p >= 1:
        return 0.0
    return -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def _constant(x: FloatArray) -> bool:
    return bool(np.all(x == x[0]))


def _spearman(x: FloatArray, y: FloatArray) -> float:
    if x.size < 2 or _constant(x) or _constant(y):
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def _pearson(x: FloatArray, y: FloatArray) -> float:
    if x.size < 2 or _constant(x) or _constant(y):
        return math.nan
    return float(stats.pearsonr(x, y).statistic)


def _reference_folds(
    p: FloatArray, family: NDArray[np.int64], folds: int, quartiles: int
) -> list[int]:
    keys = []
    for label in sorted(set(family.tolist())):
        members = [i for i in range(p.size) if family[i] == label]
        rated = [1 - p[i] for i in members if not math.isnan(p[i])]
        if rated:
            keys.append((round(float(np.mean(rated)), 12), min(members), label))
    order = [label for _, _, label in sorted(keys)]
    fold_of: dict[int, int] = {}
    for stratum in np.array_split(np.array(order, dtype=np.int64), quartiles):
        for position, label in enumerate(stratum.tolist()):
            fold_of[label] = position % folds
    return [fold_of.get(int(label), -1) for label in family]


def _reference(
    responses: Responses, minimums: Minimums, folds: int, quartiles: int
) -> dict[str, FloatArray]:
    """Every field but irt_a/irt_b, one item at a time."""
    y = responses.dense()
    seen = ~np.isnan(y)
    c = np.where(seen, (y >= 2 / 3 - 1e-9).astype(float), np.nan)
    n_items = y.shape[0]
    family = responses.family

    def ability(rows: NDArray[np.bool_]) -> FloatArray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return _round(np.nanmean(np.where(rows[:, None], y, np.nan), axis=0))

    theta_all = ability(np.ones(n_items, bool))
    out: dict[str, list[float]] = {k: [] for k in _FIELDS}
    p_all = np.array(
        [
            y[i, seen[i]].mean() if seen[i].sum() >= minimums.models_per_item else math.nan
            for i in range(n_items)
        ]
    )
    fold = _reference_folds(p_all, family, folds, quartiles)
    sizes = [
        (m, info.family, info.params_b)
        for m, info in enumerate(responses.models)
        if info.family is not None and info.params_b is not None
    ]
    for i in range(n_items):
        who = np.flatnonzero(seen[i])
        n = who.size
        enough = n >= minimums.models_per_item
        out["n"].append(n)
        out["p"].append(p_all[i])
        theta_lfo = ability(family != family[i])[who]
        ok = ~np.isnan(theta_lfo)
        r = _pearson(c[i, who][ok], theta_lfo[ok])
        valid = int(ok.sum())
        if valid >= 4 and not math.isnan(r):
            half = Z95 / math.sqrt(valid - 3)
            with np.errstate(divide="ignore"):
                z = float(np.arctanh(r))  # r = ±1 gives an infinite z and the interval ±1
            low, high = math.tanh(z - half), math.tanh(z + half)
        else:
            low = high = math.nan
        out["point_biserial"].append(r if enough else math.nan)
        out["point_biserial_low"].append(low if enough else math.nan)
        out["point_biserial_high"].append(high if enough else math.nan)
        rho = _spearman(y[i, who][ok], theta_lfo[ok])
        out["spearman"].append(rho if enough else math.nan)
        share = c[i, who].mean() if n else math.nan
        h2 = _h2(share)
        rho_all = _spearman(y[i, who], theta_all[who])
        cas = h2 * max(0.0, 0.0 if math.isnan(rho_all) else rho_all)
        out["cas"].append(cas if enough else math.nan)
        if enough and fold[i] >= 0:
            in_fold = np.array([fold[j] == fold[i] for j in range(n_items)])
            theta_k = ability(~in_fold)[who]
            keep = ~np.isnan(theta_k)
            rho_k = _spearman(y[i, who][keep], theta_k[keep])
            out["cas_kfold"].append(h2 * max(0.0, 0.0 if math.isnan(rho_k) else rho_k))
        else:
            out["cas_kfold"].append(math.nan)
        inversions = pairs = 0
        for big, fam_big, size_big in sizes:
            for small, fam_small, size_small in sizes:
                if fam_big != fam_small or not size_big > size_small:
                    continue
                if seen[i, big] and seen[i, small]:
                    pairs += 1
                    inversions += int(c[i, big] == 0 and c[i, small] == 1)
        out["inversions"].append(inversions)
        out["pairs"].append(pairs)
        out["cad"].append(math.exp(-12 * inversions / pairs) if pairs else math.nan)
        n1 = float(np.nansum(c[i]))
        d = 2 * n1 * (n - n1) / (n * (n - 1)) if n >= 2 else math.nan
        out["separation"].append(d if enough else math.nan)
    return {k: np.array(v, dtype=np.float64) for k, v in out.items()}


_FIELDS = (
    "n",
    "p",
    "point_biserial",
    "point_biserial_low",
    "point_biserial_high",
    "spearman",
    "cas",
    "cas_kfold",
    "inversions",
    "pairs",
    "cad",
    "separation",
)


def _assert_matches_reference(
    responses: Responses,
    minimums: Minimums,
    result: ItemStatistics,
    folds: int = 5,
    quartiles: int = 4,
) -> None:
    expected = _reference(responses, minimums, folds, quartiles)
    for name in _FIELDS:
        np.testing.assert_allclose(
            np.asarray(getattr(result, name), dtype=np.float64),
            expected[name],
            rtol=1e-9,
            atol=1e-9,
            equal_nan=True,
            err_msg=name,
        )
    np.testing.assert_allclose(result.difficulty, 1 - expected["p"], atol=1e-12, equal_nan=True)


@st.composite
def _sparse_banks(draw: st.DrawFn) -> tuple[Responses, Minimums, int, int]:
    n_items = draw(st.integers(1, 14))
    n_models = draw(st.integers(2, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.3, 0.6, 0.9, 1.0]))
    levels = draw(st.sampled_from([(0.0, 1.0), (0.0, 1 / 3, 2 / 3, 1.0)]))
    matrix = rng.choice(np.array(levels), size=(n_items, n_models))
    matrix[rng.random((n_items, n_models)) > density] = np.nan
    families = rng.integers(0, max(1, n_items // 2) + 1, n_items)
    models = tuple(
        ModelInfo(
            f"m{m}",
            str(rng.choice(np.array(["A", "B", ""]))) or None,
            [None, 1.0, 2.0, 3.0, 7.0][int(rng.integers(0, 5))],
        )
        for m in range(n_models)
    )
    minimums = Minimums(models_per_item=draw(st.integers(2, 4)), responses_for_irt=10**6)
    responses = Responses.from_dense(
        [f"q{i}" for i in range(n_items)], models, matrix, family=families
    )
    return responses, minimums, draw(st.integers(2, 5)), draw(st.integers(1, 4))


@settings(max_examples=120, deadline=None)
@given(_sparse_banks())
def test_every_field_matches_the_reference_loop(
    bank: tuple[Responses, Minimums, int, int],
) -> None:
    """Random sparse matrices (graded or binary scores, random item families, random model
    families and sizes, missing cells): every field equals the per-item scipy loop."""
    responses, minimums, folds, quartiles = bank
    result = item_statistics(responses, minimums=minimums, folds=folds, quartiles=quartiles)
    _assert_matches_reference(responses, minimums, result, folds, quartiles)
    assert np.isnan(result.irt_a).all() and np.isnan(result.irt_b).all()


# --------------------------------------------------------------------------------------
# Minimums, inversion rules, grouped helpers, family aggregates, 2PL.


def test_below_the_minimum_only_n_and_family_counts_survive() -> None:
    """An item answered by fewer models than the minimum keeps its n (and its pair counts)
    but has NaN p, difficulty, discrimination, CAS, K-fold CAS and separation."""
    matrix = np.array(
        [
            [1, 0, 1, 0, 1],
            [0, 0, 1, 1, 1],
            [1, np.nan, np.nan, 0, np.nan],  # 2 responses
            [1, 1, 0, 0, 1],
        ]
    )
    models = tuple(ModelInfo(f"m{m}", "F", float(m + 1)) for m in range(5))
    responses = Responses.from_dense(["a", "b", "c", "d"], models, matrix)
    result = item_statistics(responses, minimums=Minimums(models_per_item=3))
    assert result.n.tolist() == [5, 5, 2, 5]
    for name in ("p", "difficulty", "point_biserial", "spearman", "cas", "cas_kfold"):
        values = getattr(result, name)
        assert np.isnan(values[2]), name
        assert np.isfinite(values[[0, 1, 3]]).all(), name
    assert np.isnan(result.separation[2])
    # m0 (1B) correct, m3 (4B) wrong: one pair, one inversion, whatever the minimum.
    assert (result.pairs[2], result.inversions[2]) == (1, 1)
    # The item without a p has no fold, and the folds leave it out of the stratification.
    folds = kfold_assignment(responses, result.p)
    assert folds[2] == -1 and (folds[[0, 1, 3]] >= 0).all()


def _inversion_case(models: tuple[ModelInfo, ...], row: list[float]) -> tuple[int, int]:
    matrix = np.array([row, [1.0] * len(row)])
    result = item_statistics(Responses.from_dense(["q", "r"], models, matrix))
    return int(result.inversions[0]), int(result.pairs[0])


def test_inversion_rules() -> None:
    """Only the family's larger model failing is an inversion; graded 2/3 counts as correct
    and 1/3 as incorrect; equal sizes, other families, missing sizes and unanswered cells
    form no pair."""
    family = (ModelInfo("s", "F", 1.0), ModelInfo("m", "F", 3.0), ModelInfo("l", "F", 8.0))
    assert _inversion_case(family, [1, 1, 0]) == (2, 3)
    assert _inversion_case(family, [0, 1, 1]) == (0, 3)
    assert _inversion_case(family, [2 / 3, 1, 1 / 3]) == (2, 3)
    assert _inversion_case(family, [1, np.nan, 0]) == (1, 1)
    equal = (ModelInfo("x", "F", 7.0), ModelInfo("y", "F", 7.0))
    assert _inversion_case(equal, [1, 0]) == (0, 0)
    unknown = (ModelInfo("x", None, 1.0), ModelInfo("y", None, 9.0))
    assert _inversion_case(unknown, [1, 0]) == (0, 0)
    split = (ModelInfo("x", "F", 1.0), ModelInfo("y", "G", 9.0))
    assert _inversion_case(split, [1, 0]) == (0, 0)
    no_size = (ModelInfo("x", "F", 1.0), ModelInfo("y", "F", None))
    assert _inversion_case(no_size, [1, 0]) == (0, 0)
    mixed = (*equal, ModelInfo("z", "F", 1.0))  # two 7B and a 1B: two pairs
    assert _inversion_case(mixed, [0, 1, 1]) == (1, 2)
    result = item_statistics(Responses.from_dense(["q"], equal, np.array([[1.0, 0.0]])))
    assert np.isnan(result.cad[0])


def test_grouped_helpers_match_scipy() -> None:
    """Average ranks, Pearson, Spearman and the Fisher interval per group equal scipy's
    per group (groups of 1, ties, constant groups)."""
    rng = np.random.default_rng(7)
    groups = np.sort(rng.integers(0, 40, 400))
    x = rng.integers(0, 4, 400) / 3
    y = np.round(rng.random(400), 2)
    ranks = average_ranks(x, groups)
    r, count = group_pearson(x, y, groups, 42)
    rho, _ = group_spearman(x, y, groups, 42)
    low, high = fisher_interval(r, count)
    for g in range(42):
        cells = groups == g
        assert count[g] == cells.sum()
        if not cells.any():
            assert np.isnan(r[g]) and np.isnan(rho[g])
            continue
        np.testing.assert_allclose(ranks[cells], stats.rankdata(x[cells]))
        assert r[g] == pytest.approx(_pearson(x[cells], y[cells]), nan_ok=True, abs=1e-12)
        assert rho[g] == pytest.approx(_spearman(x[cells], y[cells]), nan_ok=True, abs=1e-12)
        if cells.sum() >= 4 and np.isfinite(r[g]):
            half = Z95 / math.sqrt(cells.sum() - 3)
            assert low[g] == pytest.approx(math.tanh(math.atanh(r[g]) - half))
            assert high[g] == pytest.approx(math.tanh(math.atanh(r[g]) + half))
        else:
            assert np.isnan(low[g]) and np.isnan(high[g])
    with pytest.raises(ValueError, match="sorted"):
        group_pearson(x, y, groups[::-1].copy(), 42)


def test_family_statistics_aggregate_items() -> None:
    """Per family: item counts, mean p and CAS over items that have one, summed inversions
    and pairs with the pooled CAD."""
    matrix = np.array([[float(ch) for ch in row] for row in VECTOR_ROWS])
    responses = Responses.from_dense(
        [f"i{i}" for i in range(8)], VECTOR_MODELS, matrix, family=[0, 0, 1, 1, 1, 2, 2, 2]
    )
    result = item_statistics(responses, minimums=Minimums(models_per_item=3))
    table = family_statistics(responses, result)
    assert table["items"].tolist() == [2, 3, 3]
    np.testing.assert_allclose(table["p"], [result.p[:2].mean(), result.p[2:5].mean(), 2 / 3])
    np.testing.assert_allclose(table["cas"][0], result.cas[:2].mean())
    assert table["inversions"].tolist() == [0, 3, 2]
    np.testing.assert_allclose(table["cad"], [1.0, math.exp(-12 * 3 / 18), math.exp(-12 * 2 / 18)])


def test_irt_parameters_come_from_fit_2pl_on_the_eligible_items() -> None:
    """Items with at least ``responses_for_irt`` responses get the a and b that fit_2pl
    gives on their models × items correctness sub-matrix; the others stay NaN."""
    rng = np.random.default_rng(3)
    matrix = rng.choice(np.array([0.0, 1 / 3, 2 / 3, 1.0]), size=(30, 12))
    matrix[:5, 4:] = np.nan  # items 0-4: 4 responses
    models = tuple(ModelInfo(f"m{m}") for m in range(12))
    responses = Responses.from_dense([f"q{i}" for i in range(30)], models, matrix)
    result = item_statistics(responses, minimums=Minimums(responses_for_irt=10))
    assert np.isnan(result.irt_a[:5]).all() and np.isnan(result.irt_b[:5]).all()
    expected = fit_2pl((matrix[5:] >= 2 / 3 - 1e-9).astype(float).T)
    np.testing.assert_allclose(result.irt_a[5:], expected.items.a)
    np.testing.assert_allclose(result.irt_b[5:], expected.items.b)
    few = item_statistics(responses, minimums=Minimums(responses_for_irt=13))
    assert np.isnan(few.irt_a).all()
