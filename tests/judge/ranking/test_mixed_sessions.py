"""Fixed and estimated (adaptive) sessions on one leaderboard (judge.ranking).

An adaptive session selects its items from the scores so far, so the raw mean of its items
is biased; it enters the leaderboard by its unbiased estimate of the score of its pool and
that estimate's variance (``EstimatedSession``). The simulations below draw a bank of
items with known per-item success probabilities, so every model's true score is known:

* a fixed session scores a uniform sample of the bank (eq. 1 is unbiased for the truth);
* an adaptive session draws its pool from the bank as a fixed session draws its sample,
  then selects items from the pool with probabilities that favour hard items (informative
  selection) and estimates the pool's score with the Hansen-Hurwitz estimator, which is
  unbiased, with its unbiased variance estimate (M. H. Hansen and W. N. Hurwitz, "On the
  theory of sampling from finite populations", Annals of Mathematical Statistics, 1943).

The bootstrap's moments are checked against the exact two-stage formula, single estimated
sessions against the normal distribution (scipy), and the discipline combination against
inverse-variance weighting written out here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from judge.ranking.leaderboard import (
    DisciplineEstimate,
    DisciplineScore,
    EstimatedSession,
    Leaderboard,
    ModelRecord,
    build_leaderboard,
    combine_discipline,
)
from judge.ranking.stability import RunScores, hierarchical_bootstrap

FloatArray = npt.NDArray[np.float64]
BANK = 5000
LEVELS = (-1.0, 0.0, 0.5, 1.0, 2.0)
"""Logit centres of the five simulated models' item success probabilities."""


# --- the simulated bank, fixed sessions and adaptive sessions ------------------------------


def bank(rng: np.random.Generator, level: float) -> FloatArray:
    """Per item of the bank, the model's probability of a right answer (scored 3, else 0):
    logit-normal around ``level``. The model's true score is ``100 * mean``."""
    return np.asarray(1 / (1 + np.exp(-rng.normal(level, 1.5, size=BANK))), dtype=np.float64)


def fixed_session(rng: np.random.Generator, p: FloatArray, n: int = 60) -> list[int]:
    """A fixed session: ``n`` items drawn uniformly from the bank, every one scored."""
    items = rng.choice(BANK, size=n, replace=False)
    return [int(s) for s in 3 * (rng.random(n) < p[items])]


@dataclass(frozen=True)
class Adaptive:
    estimate: EstimatedSession
    raw: list[int]
    """The scores of the items the session selected, as a fixed session would count them."""


def adaptive_session(
    rng: np.random.Generator, p: FloatArray, pool_size: int = 200, draws: int = 40
) -> Adaptive:
    """A pool drawn like a fixed session's sample; ``draws`` items selected from it with
    replacement, with probability ``q_i`` proportional to ``1.1 - p_i`` (hard items first);
    the Hansen-Hurwitz estimate ``mean(y_k / (N q_k))`` of the pool mean and its variance
    ``var(y_k / (N q_k)) / draws``, in points."""
    pool = rng.choice(BANK, size=pool_size, replace=False)
    scores = 3.0 * (rng.random(pool_size) < p[pool])
    q = 1.1 - p[pool]
    q = q / q.sum()
    picked = rng.choice(pool_size, size=draws, p=q)
    z = scores[picked] / (pool_size * q[picked])
    points = 100 / 3
    estimate = EstimatedSession(
        score=float(z.mean() * points),
        variance=float(z.var(ddof=1) / draws * points**2),
        n_items=draws,
    )
    return Adaptive(estimate, [int(s) for s in scores[picked]])


@dataclass(frozen=True)
class World:
    banks: list[FloatArray]
    truths: FloatArray


def world(seed: int) -> World:
    rng = np.random.default_rng(seed)
    banks = [bank(rng, level) for level in LEVELS]
    return World(banks, np.array([100 * b.mean() for b in banks], dtype=np.float64))


def mc(values: Sequence[float]) -> tuple[float, float]:
    """Mean and its Monte-Carlo standard error."""
    array = np.asarray(values, dtype=float)
    return float(array.mean()), float(array.std(ddof=1) / math.sqrt(array.size))


# --- (a) no bias -----------------------------------------------------------------------------


def test_mixing_estimated_sessions_leaves_s_unbiased_where_raw_items_would_not() -> None:
    """Over 600 simulated boards of five models, each with two fixed and two adaptive
    sessions: the mean of S equals the true score within Monte-Carlo error, and equals the
    mean of S from four fixed sessions; counting the adaptive sessions' raw items as fixed
    sessions instead is biased by several points (the check can fail)."""
    w = world(1)
    rng = np.random.default_rng(10)
    mixed: list[list[float]] = [[] for _ in LEVELS]
    fixed_only: list[list[float]] = [[] for _ in LEVELS]
    naive: list[list[float]] = [[] for _ in LEVELS]
    for board_no in range(600):
        boards: dict[str, list[ModelRecord]] = {"mixed": [], "fixed": [], "naive": []}
        for m, p in enumerate(w.banks):
            fixed = [fixed_session(rng, p) for _ in range(2)]
            adaptive = [adaptive_session(rng, p) for _ in range(2)]
            more_fixed = [fixed_session(rng, p) for _ in range(2)]
            key = f"m{m}"
            boards["mixed"].append(
                ModelRecord(key, key, fixed, estimated_sessions=[a.estimate for a in adaptive])
            )
            boards["fixed"].append(ModelRecord(key, key, fixed + more_fixed))
            boards["naive"].append(ModelRecord(key, key, fixed + [a.raw for a in adaptive]))
        for name, out in (("mixed", mixed), ("fixed", fixed_only), ("naive", naive)):
            board = build_leaderboard(boards[name], n_resamples=100, seed=board_no)
            for m in range(len(LEVELS)):
                out[m].append(board.row(f"m{m}").absolute.mean)
    biases, errors = [], []
    for m, truth in enumerate(w.truths):
        mean, error = mc(mixed[m])
        fixed_mean, fixed_error = mc(fixed_only[m])
        naive_mean, naive_error = mc(naive[m])
        assert abs(mean - truth) <= 4.5 * error, (m, mean, truth, error)
        assert abs(mean - fixed_mean) <= 4.5 * math.hypot(error, fixed_error)
        assert naive_mean - truth < -10 * naive_error, (m, naive_mean, truth)
        biases.append(mean - truth)
        errors.append(error)
    # all five models together: the mean bias and its standard error
    pooled_error = math.sqrt(sum(e**2 for e in errors)) / len(errors)
    assert abs(float(np.mean(biases))) <= 4 * pooled_error


def test_the_combined_discipline_score_is_unbiased_with_the_se_it_reports() -> None:
    """A discipline with 100 fixed items (pooled) and two adaptive sessions' estimates:
    the inverse-variance combination averages to the truth within Monte-Carlo error, and
    its reported standard error matches the spread of the combinations."""
    rng = np.random.default_rng(4)
    truth = 0.62  # share of right answers, scored 3
    combined, reported = [], []
    for _ in range(6000):
        items = 3 * (rng.random(100) < truth)
        pooled = DisciplineScore(
            score=float(items.mean()) / 3 * 10,
            standard_error=float(items.std(ddof=1)) / math.sqrt(100) / 3 * 10,
            n_items=100,
        )
        estimates = [
            DisciplineEstimate(float(rng.normal(100 * truth, math.sqrt(v))), v, 30)
            for v in (20.0, 45.0)
        ]
        score = combine_discipline(pooled, estimates)
        combined.append(score.score)
        reported.append(score.standard_error)
    mean, error = mc(combined)
    assert abs(mean - 10 * truth) <= 4 * error
    assert float(np.std(combined)) == pytest.approx(float(np.mean(reported)), rel=0.05)


# --- (b) intervals ---------------------------------------------------------------------------


def coverage(w: World, boards: int, seed: int, spoil: str | None = None) -> float:
    """Share of (board, model) pairs whose 95% interval of S holds the true score; ``spoil``
    mis-specifies the estimated sessions' variances (``"zero"``, or ``"squared"``: points^4
    where points^2 are due)."""
    rng = np.random.default_rng(seed)
    hits = []
    for board_no in range(boards):
        records = []
        for m, p in enumerate(w.banks):
            estimates = [adaptive_session(rng, p).estimate for _ in range(2)]
            if spoil == "zero":
                estimates = [replace(e, variance=0.0) for e in estimates]
            elif spoil == "squared":
                estimates = [replace(e, variance=e.variance**2) for e in estimates]
            fixed = [fixed_session(rng, p) for _ in range(2)]
            records.append(ModelRecord(f"m{m}", "", fixed, estimated_sessions=estimates))
        board = build_leaderboard(records, n_resamples=1000, seed=board_no)
        for m, truth in enumerate(w.truths):
            interval = board.row(f"m{m}").absolute.confidence_interval
            hits.append(interval.low <= truth <= interval.high)
    return float(np.mean(hits))


def test_mixed_bootstrap_intervals_cover_the_truth_as_fixed_ones_do() -> None:
    """95% intervals of models with two fixed and two adaptive sessions hold the true score
    at least as often as nominal (within Monte-Carlo error) and at most as often as the
    hierarchical bootstrap's known conservatism allows (its variance is about
    ``(2J - 1) / J`` times the truth's, so about 99% for J = 4). Leaving out the parametric
    stage (variance 0) or inflating it (a variance squared) moves coverage outside that band,
    so the check can fail."""
    w = world(2)
    observed = coverage(w, boards=300, seed=20)
    floor = 0.95 - 3 * math.sqrt(0.95 * 0.05 / (300 * len(LEVELS)))
    assert floor <= observed <= 0.995, observed
    assert coverage(w, boards=120, seed=21, spoil="zero") < floor
    assert coverage(w, boards=120, seed=22, spoil="squared") > 0.995


def test_mixed_bootstrap_moments_match_the_exact_two_stage_formula() -> None:
    """E[S*] = mean of the session scores (estimates included); Var[S*] = (Var_k S_k +
    mean_k w_k) / J with w_k a fixed session's plug-in item variance over n_k and an
    estimated session's variance."""
    rng = np.random.default_rng(12)
    fixed = [rng.choice(4, size=n, p=[0.2, 0.2, 0.3, 0.3]) for n in (30, 80)]
    estimated = [EstimatedSession(55.0, 30.0, n_items=40), EstimatedSession(71.0, 12.0)]
    runs = RunScores({"m": fixed}, {"m": estimated})
    scaled = [s / 3 * 100 for s in fixed]
    scores = np.array([s.mean() for s in scaled] + [55.0, 71.0])
    within = np.array([s.var() / len(s) for s in scaled] + [30.0, 12.0])
    exact_var = (scores.var() + within.mean()) / 4
    assert runs.session_scores("m").tolist() == pytest.approx(scores.tolist())
    assert runs.session_sizes("m") == (30, 80, 40, 0)
    replicates = hierarchical_bootstrap(runs, n_resamples=40_000, rng=2).replicates("m")
    assert replicates.mean() == pytest.approx(scores.mean(), abs=4 * math.sqrt(exact_var / 4e4))
    assert replicates.var() == pytest.approx(exact_var, rel=0.03)


def test_one_estimated_session_gives_its_normal_interval_and_beat_probability() -> None:
    """A model known by one estimate ``Y`` with variance ``V``: its replicates are
    ``N(Y, V)``, so its interval is ``Y -+ z_0.975 sqrt(V)`` and ``P(A beats B)`` is
    ``Phi((Y_A - Y_B) / sqrt(V_A + V_B))`` (scipy.stats.norm)."""
    records = [
        ModelRecord("a", "A", [], estimated_sessions=[EstimatedSession(62.0, 9.0, n_items=50)]),
        ModelRecord("b", "B", [], estimated_sessions=[EstimatedSession(58.0, 16.0, n_items=50)]),
    ]
    board = build_leaderboard(records, n_resamples=40_000, seed=3)
    a = board.row("a").absolute
    low, high = stats.norm.interval(0.95, loc=62.0, scale=3.0)
    assert a.mean == 62.0 and a.standard_error == pytest.approx(3.0, rel=0.02)
    assert a.confidence_interval.low == pytest.approx(low, abs=0.1)
    assert a.confidence_interval.high == pytest.approx(high, abs=0.1)
    beats = board.row("a").beats_next
    expected = float(stats.norm.cdf(4.0 / 5.0))
    assert beats == pytest.approx(expected, abs=4 * math.sqrt(expected * (1 - expected) / 4e4))


# --- (c) ranks and tie groups ----------------------------------------------------------------


def fixed_at(share: float, n: int = 300) -> list[int]:
    """``n`` item scores 3 and 0, ``share`` of them 3 (eq. 1 = 100 * share exactly)."""
    right = round(share * n)
    return [3] * right + [0] * (n - right)


def three_models() -> list[ModelRecord]:
    return [
        ModelRecord("top", "Top", [fixed_at(0.80), fixed_at(0.81), fixed_at(0.79)]),
        ModelRecord(
            "twin",
            "Adaptive twin",
            [],
            estimated_sessions=[
                EstimatedSession(79.3, 4.0, n_items=90),
                EstimatedSession(80.5, 5.0),
            ],
        ),
        ModelRecord(
            "low", "Adaptive low", [], estimated_sessions=[EstimatedSession(40.0, 4.0, n_items=70)]
        ),
    ]


def test_models_with_only_adaptive_sessions_are_ranked_and_grouped() -> None:
    board = build_leaderboard(three_models(), n_resamples=4000, seed=5)
    assert [row.key for row in board.rows] == ["top", "twin", "low"]
    assert board.groups == (("top", "twin"), ("low",))
    top, twin, low = board.rows
    assert (twin.group, low.group) == (1, 2)
    assert twin.rank_range == (1, 2) and low.rank_range == (3, 3)
    assert twin.beats_next is not None and twin.beats_next > 0.999
    assert twin.absolute.session_values == (79.3, 80.5)
    assert twin.absolute.mean == pytest.approx(79.9)
    assert twin.absolute.n_items == (90, 0)
    assert (top.estimated_sessions, twin.estimated_sessions, low.estimated_sessions) == (0, 2, 1)
    assert math.isnan(low.absolute.variance)  # one session: no between-session variance


def test_relative_scores_use_the_estimates_and_an_adaptive_anchor() -> None:
    board = build_leaderboard(three_models(), anchor="low", n_resamples=4000, seed=5)
    assert (board.anchor, board.anchor_designated, board.anchor_note) == ("low", True, None)
    low, top = board.row("low"), board.row("top")
    assert low.relative is not None and top.relative is not None
    assert low.relative.mean == pytest.approx(100.0)
    assert top.relative.mean == pytest.approx(80.0 / 40.0 * 100)
    # the anchor's uncertainty enters R: a 40-point anchor with SE 2 gives R of the top
    # model an SE of about 200 * 2 / 40 = 10
    assert top.relative.standard_error == pytest.approx(10.0, rel=0.1)


def test_an_estimated_anchor_that_can_fall_to_zero_is_passed_over() -> None:
    records = [
        *three_models(),
        ModelRecord("floor", "Floor", [], estimated_sessions=[EstimatedSession(1.0, 4.0)]),
    ]
    board = build_leaderboard(records, anchor="floor", n_resamples=2000, seed=1)
    assert board.anchor == "top" and not board.anchor_designated
    assert board.anchor_note is not None and "floor scores 0" in board.anchor_note
    assert board.row("floor").position == 4


def test_disciplines_combine_fixed_items_and_estimates_by_inverse_variance() -> None:
    fixed_items = [3, 3, 0, 3, 2, 3, 1, 3]
    record = ModelRecord(
        "m",
        "M",
        [fixed_items],
        disciplines={"math": fixed_items},
        estimated_sessions=[
            EstimatedSession(
                70.0,
                9.0,
                {
                    "math": DisciplineEstimate(60.0, 25.0, 20),
                    "law": DisciplineEstimate(50.0, 16.0, 12),
                },
            ),
            EstimatedSession(66.0, 9.0, {"math": DisciplineEstimate(72.0, 100.0, 15)}),
        ],
    )
    board = build_leaderboard([record], n_resamples=200, seed=0)
    assert board.disciplines == ("law", "math")
    row = board.row("m")
    values = np.array(fixed_items, dtype=float) / 3 * 10
    parts = [
        (values.mean(), values.std(ddof=1) / math.sqrt(values.size)),
        (6.0, 0.5),
        (7.2, 1.0),
    ]
    weights = [1 / se**2 for _, se in parts]
    expected = sum(w * x for w, (x, _) in zip(weights, parts, strict=True)) / sum(weights)
    math_score = row.disciplines["math"]
    assert math_score.score == pytest.approx(expected)
    assert math_score.standard_error == pytest.approx(1 / math.sqrt(sum(weights)))
    assert math_score.n_items == 8 + 20 + 15
    assert row.disciplines["law"] == DisciplineScore(5.0, 0.4, 12)
    assert row.absolute.mean == pytest.approx((values.mean() * 10 + 70.0 + 66.0) / 3)


def test_a_missing_or_zero_standard_error_falls_back_to_item_count_weights() -> None:
    single = DisciplineScore(score=10.0, standard_error=math.nan, n_items=1)
    combined = combine_discipline(single, [DisciplineEstimate(50.0, 4.0, 3)])
    assert combined.score == pytest.approx((10.0 * 1 + 5.0 * 3) / 4)
    assert math.isnan(combined.standard_error) and combined.n_items == 4
    perfect = DisciplineScore(score=10.0, standard_error=0.0, n_items=6)
    combined = combine_discipline(perfect, [DisciplineEstimate(80.0, 9.0, 2)])
    assert combined.score == pytest.approx((10.0 * 6 + 8.0 * 2) / 8)
    assert combined.standard_error == pytest.approx(math.sqrt((2 / 8) ** 2 * 0.3**2))
    with pytest.raises(ValueError, match="nothing to combine"):
        combine_discipline(None, [])


@pytest.mark.parametrize(
    ("score", "variance", "disciplines"),
    [
        (math.nan, 1.0, {}),
        (50.0, -1.0, {}),
        (50.0, math.inf, {}),
        (50.0, 1.0, {"math": (math.nan, 1.0, 3)}),
        (50.0, 1.0, {"math": (50.0, -2.0, 3)}),
    ],
)
def test_invalid_estimates_are_refused(
    score: float, variance: float, disciplines: dict[str, tuple[float, float, int]]
) -> None:
    with pytest.raises(ValueError):
        EstimatedSession(score, variance, disciplines)  # type: ignore[arg-type]


# --- (d) inputs without estimated sessions -------------------------------------------------


def old_bootstrap(sessions: dict[str, list[list[int]]], n: int, seed: int) -> FloatArray:
    """The fixed-only hierarchical bootstrap as it was written before estimated sessions
    (multinomial item stage), to compare bit for bit."""
    gen = np.random.default_rng(seed)
    values = np.arange(4)
    out = np.empty((len(sessions), n))
    for m, model_sessions in enumerate(sessions.values()):
        counts = np.stack([np.bincount(s, minlength=4) for s in model_sessions])
        sizes = counts.sum(axis=1)
        shares = counts / sizes[:, None]
        picked = gen.integers(len(sizes), size=(n, len(sizes)))
        drawn = gen.multinomial(sizes[picked], shares[picked])
        out[m] = ((drawn @ values) / (sizes[picked] * 3) * 100).mean(axis=1)
    return out


def test_boards_without_estimated_sessions_are_unchanged() -> None:
    rng = np.random.default_rng(9)
    sessions = {
        f"m{m}": [[int(x) for x in rng.choice(4, size=n, p=rng.dirichlet(np.ones(4)))] for n in ns]
        for m, ns in enumerate([(40, 50, 60), (30,), (25, 70)])
    }
    assert np.array_equal(
        hierarchical_bootstrap(sessions, n_resamples=500, rng=4).absolute,
        old_bootstrap(sessions, 500, 4),
    )
    records = [ModelRecord(k, k, s, disciplines={"x": s[0]}) for k, s in sessions.items()]
    explicit = [replace(r, estimated_sessions=()) for r in records]
    one: Leaderboard = build_leaderboard(records, n_resamples=500, seed=4)
    two: Leaderboard = build_leaderboard(explicit, n_resamples=500, seed=4)
    assert repr(one) == repr(two)  # NaN variances (one session) are unequal to themselves
    assert all(row.estimated_sessions == 0 for row in one.rows)
    assert RunScores(sessions) == RunScores(sessions, {})
    assert repr(RunScores(sessions)) == repr(RunScores(sessions, {}))


def test_a_model_needs_a_session_of_either_kind() -> None:
    with pytest.raises(ValueError, match="has no sessions"):
        RunScores({"m": []}, {"m": []})
    with pytest.raises(ValueError, match="no models"):
        RunScores({}, {})
    runs = RunScores({"m": [[3, 0]]}, {"e": [EstimatedSession(40.0, 1.0)]})
    assert runs.models == ("m", "e") and runs["e"] == ()
    assert "estimated" in repr(runs)
    empty = build_leaderboard([ModelRecord("m", "M", [[]])])
    assert empty.rows == ()
