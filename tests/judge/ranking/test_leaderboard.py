"""The leaderboard assembled from every model's scored sessions (judge.ranking.leaderboard).

Point estimates, discipline scores and usage are checked against numpy written out here;
the bootstrap intervals against an independent two-stage bootstrap (item indices drawn
with numpy); groups and rank ranges against ``tie_groups`` on the same replicates, which
is the module's contract (one bootstrap feeds intervals, groups and rank ranges).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from judge.ranking.diagnostics import LLMEVAL_FAIR_DISCIPLINES, RELE_SCHEMES
from judge.ranking.leaderboard import (
    Leaderboard,
    LeaderboardRow,
    ModelRecord,
    board_diagnostics,
    build_leaderboard,
)
from judge.ranking.stability import ModelSummary, hierarchical_bootstrap, model_summary, tie_groups

FloatArray = npt.NDArray[np.float64]
Sessions = list[list[int]]


# --- references and data ----------------------------------------------------------------


def rel(row: LeaderboardRow) -> ModelSummary:
    """The row's relative summary, which these tests always have."""
    assert row.relative is not None
    return row.relative


def eq1(items: Sequence[int]) -> float:
    """LLMEval-Fair (Zhang et al.) eq. 1: ``sum(s) / (3 n) * 100``."""
    values = np.asarray(items, dtype=float)
    return float(values.sum() / (3 * values.size) * 100)


def session_values(sessions: Sessions) -> FloatArray:
    return np.array([eq1(s) for s in sessions], dtype=np.float64)


def draw_sessions(
    rng: np.random.Generator, p: Sequence[float], n_items: Sequence[int] = (300, 300, 300)
) -> Sessions:
    """Sessions of item scores 0-3 drawn with probabilities ``p``."""
    return [[int(x) for x in rng.choice(4, size=n, p=list(p))] for n in n_items]


def binary_sessions(
    rng: np.random.Generator, correct: float, n_items: int = 300, n_sessions: int = 3
) -> Sessions:
    """Items scoring 3 with probability ``correct``, else 0."""
    return draw_sessions(rng, [1 - correct, 0.0, 0.0, correct], [n_items] * n_sessions)


def reference_bootstrap(
    sessions: Sessions, n_resamples: int, rng: np.random.Generator
) -> FloatArray:
    """Independent two-stage bootstrap: draw J sessions with replacement, then in every
    drawn session n item indices with replacement; a replicate is the mean of eq. 1."""
    arrays = [np.asarray(s, dtype=float) for s in sessions]
    n_sessions = len(arrays)
    picks = rng.integers(n_sessions, size=(n_resamples, n_sessions))
    out = np.zeros(n_resamples)
    for slot in range(n_sessions):
        # Every slot resamples the items of whichever session it drew, independently.
        per_session = np.stack(
            [
                a[rng.integers(a.size, size=(n_resamples, a.size))].sum(axis=1) / (3 * a.size) * 100
                for a in arrays
            ]
        )
        out += per_session[picks[:, slot], np.arange(n_resamples)]
    return np.asarray(out / n_sessions, dtype=np.float64)


def three_models() -> list[ModelRecord]:
    rng = np.random.default_rng(20261122)
    return [
        ModelRecord("mid", "Mid model", draw_sessions(rng, [0.3, 0.2, 0.2, 0.3], (300, 280, 320))),
        ModelRecord("top", "Top model", draw_sessions(rng, [0.1, 0.1, 0.2, 0.6], (300, 310, 290))),
        ModelRecord("low", "Low model", draw_sessions(rng, [0.5, 0.2, 0.2, 0.1], (300, 300, 300))),
    ]


# --- absolute and relative scores ---------------------------------------------------------


def test_absolute_scores_are_eq1_per_session_with_mean_and_sample_variance() -> None:
    records = three_models()
    board = build_leaderboard(records, n_resamples=500)
    for record in records:
        row = board.row(record.key)
        values = session_values([list(s) for s in record.sessions])
        assert row.absolute.session_values == pytest.approx(values.tolist(), abs=1e-10)
        assert row.absolute.mean == pytest.approx(float(np.mean(values)), abs=1e-10)
        assert row.absolute.variance == pytest.approx(float(np.var(values, ddof=1)), rel=1e-10)
        assert row.absolute.n_items == tuple(len(s) for s in record.sessions)
        assert row.absolute.scale == "absolute"
        assert row.name == record.name


def test_relative_scores_are_against_the_top_model_and_pair_sessions() -> None:
    records = three_models()
    board = build_leaderboard(records, n_resamples=500)
    means = {r.key: float(np.mean(session_values([list(s) for s in r.sessions]))) for r in records}
    top = max(means, key=lambda k: means[k])
    assert top == "top"
    assert board.anchor == top and board.anchor_designated is False and board.anchor_note is None
    anchor_values = session_values([list(s) for s in records[1].sessions])
    for record in records:
        relative = rel(board.row(record.key))
        values = session_values([list(s) for s in record.sessions])
        paired = values / anchor_values * 100
        assert relative.scale == "relative" and relative.anchor == top
        assert relative.mean == pytest.approx(means[record.key] / means[top] * 100, abs=1e-10)
        assert relative.session_values == pytest.approx(paired.tolist(), abs=1e-10)
        assert relative.variance == pytest.approx(float(np.var(paired, ddof=1)), rel=1e-10)
        assert relative.paired_sessions
    anchor_row = rel(board.row(top))
    assert anchor_row.mean == 100.0
    assert anchor_row.session_values == (100.0, 100.0, 100.0)
    assert anchor_row.confidence_interval == (100.0, 100.0)
    assert rel(board.row("mid")).mean < 100 and rel(board.row("low")).mean < 100


def test_relative_sessions_against_an_anchor_with_more_sessions_use_its_mean() -> None:
    rng = np.random.default_rng(3)
    anchor = draw_sessions(rng, [0.1, 0.1, 0.2, 0.6])
    two = draw_sessions(rng, [0.3, 0.2, 0.2, 0.3], (200, 200))
    board = build_leaderboard(
        [ModelRecord("a", "A", anchor), ModelRecord("b", "B", two)], n_resamples=200
    )
    relative = rel(board.row("b"))
    expected = session_values(two) / np.mean(session_values(anchor)) * 100
    assert not relative.paired_sessions
    assert relative.session_values == pytest.approx(expected.tolist(), abs=1e-10)


def test_bootstrap_intervals_match_an_independent_two_stage_bootstrap() -> None:
    records = three_models()
    board = build_leaderboard(records, n_resamples=4000, seed=5)
    rng = np.random.default_rng(99)
    reps = {r.key: reference_bootstrap([list(s) for s in r.sessions], 8000, rng) for r in records}
    for record in records:
        row = board.row(record.key)
        absolute = reps[record.key]
        low, high = np.quantile(absolute, [0.025, 0.975])
        assert row.absolute.confidence_interval.low == pytest.approx(low, abs=0.6)
        assert row.absolute.confidence_interval.high == pytest.approx(high, abs=0.6)
        assert row.absolute.standard_error == pytest.approx(np.std(absolute, ddof=1), rel=0.08)
        # R* = S*_model / S*_anchor * 100 with both models resampled independently
        relative = absolute / reps["top"] * 100
        r_low, r_high = np.quantile(relative, [0.025, 0.975])
        if record.key != "top":
            assert rel(row).confidence_interval.low == pytest.approx(r_low, abs=1.0)
            assert rel(row).confidence_interval.high == pytest.approx(r_high, abs=1.0)
            assert rel(row).standard_error == pytest.approx(np.std(relative, ddof=1), rel=0.08)
        assert row.absolute.confidence_level == 0.95 and row.absolute.n_resamples == 4000


def test_confidence_level_is_applied_to_every_interval() -> None:
    records = three_models()
    wide = build_leaderboard(records, n_resamples=1000, seed=1, confidence_level=0.95)
    narrow = build_leaderboard(records, n_resamples=1000, seed=1, confidence_level=0.5)
    assert narrow.confidence_level == 0.5
    for key in ("top", "mid", "low"):
        w, n = (
            wide.row(key).absolute.confidence_interval,
            narrow.row(key).absolute.confidence_interval,
        )
        assert w.low < n.low < n.high < w.high
        assert narrow.row(key).absolute.confidence_level == 0.5
        assert rel(narrow.row(key)).confidence_level == 0.5


# --- the anchor --------------------------------------------------------------------------


def test_a_designated_anchor_is_used() -> None:
    records = three_models()
    board = build_leaderboard(records, anchor="mid", n_resamples=300)
    assert board.anchor == "mid" and board.anchor_designated is True
    assert board.anchor_note is None
    mid = session_values([list(s) for s in records[0].sessions])
    top = session_values([list(s) for s in records[1].sessions])
    assert rel(board.row("mid")).mean == 100.0
    assert rel(board.row("top")).mean == pytest.approx(np.mean(top) / np.mean(mid) * 100)
    assert rel(board.row("top")).mean > 100
    assert rel(board.row("top")).session_values == pytest.approx((top / mid * 100).tolist())
    # the anchor changes R, never the order or the absolute scores
    default = build_leaderboard(records, n_resamples=300)
    assert [r.key for r in board.rows] == [r.key for r in default.rows] == ["top", "mid", "low"]
    assert board.row("low").absolute == default.row("low").absolute


@pytest.mark.parametrize(
    "ghost",
    [
        pytest.param(None, id="not-among-the-records"),
        pytest.param([], id="no-sessions"),
        pytest.param([[]], id="only-empty-sessions"),
    ],
)
def test_a_designated_anchor_without_sessions_falls_back_to_the_top_model(
    ghost: Sessions | None,
) -> None:
    records = three_models()
    if ghost is not None:
        records.append(ModelRecord("ghost", "Ghost", ghost))
    board = build_leaderboard(records, anchor="ghost", n_resamples=300)
    assert board.anchor == "top" and board.anchor_designated is False
    assert board.anchor_note
    assert "ghost" not in [r.key for r in board.rows]
    assert rel(board.row("top")).mean == 100.0


def test_a_designated_anchor_scoring_zero_falls_back_to_the_top_model() -> None:
    records = [*three_models(), ModelRecord("zero", "Zero", [[0] * 50, [0] * 50])]
    board = build_leaderboard(records, anchor="zero", n_resamples=300)
    assert board.anchor == "top" and board.anchor_designated is False
    assert board.anchor_note
    assert board.rows[-1].key == "zero" and rel(board.row("zero")).mean == 0.0


def test_a_designated_anchor_with_one_zero_session_does_not_break_the_leaderboard() -> None:
    """Relative scores need an anchor positive in every session (R pairs sessions); an
    anchor that failed one session (all items 0) cannot be used, and the leaderboard falls
    back to the top model with a note, as it does for an anchor whose mean is 0. It must
    not raise: the documented errors are duplicate keys and invalid item scores."""
    records = [*three_models(), ModelRecord("flaky", "Flaky", [[0] * 300, [3] * 300, [2] * 300])]
    board = build_leaderboard(records, anchor="flaky", n_resamples=300)
    assert board.anchor == "top" and board.anchor_designated is False
    assert board.anchor_note
    assert rel(board.row("top")).mean == 100.0
    assert board.row("flaky").absolute.mean == pytest.approx(500 / 9)


@pytest.mark.parametrize(
    "top_sessions",
    [
        pytest.param([[0] * 300, [3] * 300, [3] * 300], id="top-model-failed-one-session"),
        pytest.param([[3, 0], [3, 3]], id="top-model-with-a-two-item-session"),
    ],
)
def test_a_top_model_with_a_zero_session_or_replicate_does_not_break_the_leaderboard(
    top_sessions: Sessions,
) -> None:
    """No anchor designated: the top model by mean ``S`` may have a session, or (with
    short sessions) a bootstrap replicate, scoring 0. The leaderboard must still build:
    the documented errors are duplicate keys and invalid item scores."""
    rng = np.random.default_rng(5)
    records = [
        ModelRecord("top", "Top", top_sessions),
        ModelRecord("other", "Other", binary_sessions(rng, 0.4)),
    ]
    board = build_leaderboard(records, n_resamples=2000, seed=0)
    assert [r.key for r in board.rows] == ["top", "other"]
    assert board.row("top").absolute.mean == pytest.approx(
        float(np.mean(session_values(top_sessions)))
    )
    assert board.anchor is not None
    assert rel(board.row(board.anchor)).mean == 100.0


# --- order, groups and rank ranges -------------------------------------------------------


def test_rows_follow_tie_groups_of_the_same_bootstrap() -> None:
    rng = np.random.default_rng(8)
    records = [
        ModelRecord(f"m{i}", f"Model {i}", binary_sessions(rng, p, n_items=150))
        for i, p in enumerate([0.55, 0.80, 0.57, 0.30, 0.82, 0.56])
    ]
    board = build_leaderboard(records, n_resamples=1500, seed=17, threshold=0.9)
    means = {r.key: float(np.mean(session_values([list(s) for s in r.sessions]))) for r in records}
    assert [r.key for r in board.rows] == sorted(means, key=lambda k: -means[k])
    assert [r.position for r in board.rows] == list(range(1, 7))
    assert board.threshold == 0.9
    runs = {r.key: [list(s) for s in r.sessions] for r in records}
    boot = hierarchical_bootstrap(runs, n_resamples=1500, rng=17)
    ranking = tie_groups(boot, threshold=0.9)
    assert board.groups == ranking.groups
    assert len(board.groups) >= 2  # the data hold both ties and clear gaps
    summaries = model_summary(boot)
    for row, entry in zip(board.rows, ranking.entries, strict=True):
        assert (row.key, row.position, row.group, row.rank_range) == (
            entry.model,
            entry.position,
            entry.group,
            entry.rank_range,
        )
        assert row.absolute.confidence_interval == summaries[row.key].confidence_interval
    relative = model_summary(boot, anchor=board.anchor)
    for row in board.rows:
        assert rel(row).confidence_interval == relative[row.key].confidence_interval
    # the beat probability of each row over the next: share of paired replicates, ties half
    reps = {k: boot.absolute[i] for i, k in enumerate(boot.models)}
    for upper, lower in zip(board.rows, board.rows[1:], strict=False):
        a, b = reps[upper.key], reps[lower.key]
        assert upper.beats_next == pytest.approx(float(np.mean(a > b) + 0.5 * np.mean(a == b)))
    assert board.rows[-1].beats_next is None
    # groups are runs of consecutive rows
    assert [k for g in board.groups for k in g] == [r.key for r in board.rows]
    assert [r.group for r in board.rows] == sorted(r.group for r in board.rows)


def test_clearly_different_models_are_in_different_groups() -> None:
    rng = np.random.default_rng(1)
    records = [
        ModelRecord("weak", "Weak", binary_sessions(rng, 0.10)),
        ModelRecord("strong", "Strong", binary_sessions(rng, 0.90)),
    ]
    board = build_leaderboard(records)
    assert board.groups == (("strong",), ("weak",))
    assert (board.rows[0].key, board.rows[0].group, board.rows[0].rank_range) == (
        "strong",
        1,
        (1, 1),
    )
    assert (board.rows[1].key, board.rows[1].group, board.rows[1].rank_range) == (
        "weak",
        2,
        (2, 2),
    )
    strong, weak = board.rows[0].absolute, board.rows[1].absolute
    assert weak.confidence_interval.high < strong.confidence_interval.low


def test_models_with_identical_scores_share_a_group() -> None:
    sessions = binary_sessions(np.random.default_rng(2), 0.6)
    records = [ModelRecord("x", "X", sessions), ModelRecord("y", "Y", [list(s) for s in sessions])]
    board = build_leaderboard(records)
    assert board.groups == (("x", "y"),)
    assert [r.group for r in board.rows] == [1, 1]
    assert [r.rank_range for r in board.rows] == [(1, 2), (1, 2)]
    assert board.row("x").absolute.mean == board.row("y").absolute.mean


def test_same_seed_gives_identical_intervals_and_another_seed_differs() -> None:
    records = three_models()
    one = build_leaderboard(records, n_resamples=400, seed=123)
    two = build_leaderboard(records, n_resamples=400, seed=123)
    other = build_leaderboard(records, n_resamples=400, seed=124)
    assert [(r.absolute, r.relative, r.group, r.rank_range) for r in one.rows] == [
        (r.absolute, r.relative, r.group, r.rank_range) for r in two.rows
    ]
    assert [r.absolute.confidence_interval for r in one.rows] != [
        r.absolute.confidence_interval for r in other.rows
    ]


# --- disciplines -------------------------------------------------------------------------


def test_discipline_scores_on_the_ten_point_scale_with_standard_errors() -> None:
    rng = np.random.default_rng(4)
    physics = [int(x) for x in rng.choice(4, size=120, p=[0.1, 0.2, 0.3, 0.4])]
    algebra = [int(x) for x in rng.choice(4, size=80, p=[0.4, 0.3, 0.2, 0.1])]
    records = [
        ModelRecord("a", "A", [physics + algebra], {"Physics": physics, "Algebra": algebra}),
        ModelRecord("b", "B", [[1, 2, 3]], {"Chemistry": [1, 2, 3], "Physics": [2]}),
    ]
    board = build_leaderboard(records, n_resamples=100)
    assert board.disciplines == ("Algebra", "Chemistry", "Physics")
    row = board.row("a")
    assert list(row.disciplines) == ["Algebra", "Physics"]
    for name, items in (("Physics", physics), ("Algebra", algebra)):
        values = np.asarray(items, dtype=float)
        score = row.disciplines[name]
        assert score.score == pytest.approx(values.mean() / 3 * 10, abs=1e-12)
        expected_se = values.std(ddof=1) / np.sqrt(values.size) * 10 / 3
        assert score.standard_error == pytest.approx(expected_se, rel=1e-12)
        assert score.n_items == values.size
    single = board.row("b").disciplines["Physics"]
    assert single.score == pytest.approx(20 / 3) and single.n_items == 1
    assert math.isnan(single.standard_error)
    assert board.row("b").disciplines["Chemistry"].score == pytest.approx(20 / 3)


# --- latency and cost --------------------------------------------------------------------


def test_latency_quantiles_tokens_and_cost_per_item() -> None:
    rng = np.random.default_rng(6)
    latencies = [float(x) for x in rng.lognormal(1.0, 0.7, size=257)]
    record = ModelRecord(
        "a",
        "A",
        [[3, 2, 1]],
        latencies_s=latencies,
        reported_latencies_s=latencies[:100],
        prompt_tokens=123_456,
        completion_tokens=45_678,
        n_with_usage=200,
        usd_per_mtok_in=2.5,
        usd_per_mtok_out=10.0,
    )
    usage = build_leaderboard([record], n_resamples=50).row("a").usage
    assert usage.latency_median_s == pytest.approx(float(np.median(latencies)), rel=1e-12)
    assert usage.latency_p95_s == pytest.approx(float(np.quantile(latencies, 0.95)), rel=1e-12)
    assert usage.reported_latency_median_s == pytest.approx(float(np.median(latencies[:100])))
    assert usage.n_reported_latency == 100
    assert usage.prompt_tokens_per_item == pytest.approx(123_456 / 200)
    assert usage.completion_tokens_per_item == pytest.approx(45_678 / 200)
    cost = (123_456 / 200 * 2.5 + 45_678 / 200 * 10.0) / 1e6 * 1000
    assert usage.usd_per_1k_items == pytest.approx(cost, rel=1e-12)


@pytest.mark.parametrize(
    ("price_in", "price_out", "n_with_usage"),
    [(None, 10.0, 5), (2.5, None, 5), (None, None, 5), (2.5, 10.0, 0)],
)
def test_cost_is_unknown_without_prices_or_usage(
    price_in: float | None, price_out: float | None, n_with_usage: int
) -> None:
    record = ModelRecord(
        "a",
        "A",
        [[3]],
        prompt_tokens=100 if n_with_usage else 0,
        completion_tokens=50 if n_with_usage else 0,
        n_with_usage=n_with_usage,
        usd_per_mtok_in=price_in,
        usd_per_mtok_out=price_out,
    )
    usage = build_leaderboard([record], n_resamples=50).row("a").usage
    assert usage.usd_per_1k_items is None
    if n_with_usage:
        assert (usage.prompt_tokens_per_item, usage.completion_tokens_per_item) == (20.0, 10.0)
    else:
        assert usage.prompt_tokens_per_item is None and usage.completion_tokens_per_item is None
    assert usage.latency_median_s is None and usage.latency_p95_s is None


def test_free_model_costs_zero() -> None:
    record = ModelRecord(
        "a",
        "A",
        [[3]],
        prompt_tokens=100,
        completion_tokens=50,
        n_with_usage=5,
        usd_per_mtok_in=0.0,
        usd_per_mtok_out=0.0,
    )
    assert build_leaderboard([record], n_resamples=50).row("a").usage.usd_per_1k_items == 0.0


# --- input handling ----------------------------------------------------------------------


def test_models_without_sessions_are_left_out() -> None:
    records = [
        *three_models(),
        ModelRecord("none", "None", []),
        ModelRecord("empty", "Empty", [[], []], {"Ghostology": [3]}),
    ]
    board = build_leaderboard(records, n_resamples=200)
    assert [r.key for r in board.rows] == ["top", "mid", "low"]
    assert [r.position for r in board.rows] == [1, 2, 3]
    assert "Ghostology" not in board.disciplines
    with pytest.raises(KeyError):
        board.row("none")


def test_empty_sessions_are_dropped_but_the_others_count() -> None:
    board = build_leaderboard([ModelRecord("a", "A", [[3, 3], [], [1, 2]])], n_resamples=50)
    assert board.row("a").absolute.session_values == pytest.approx((100.0, 50.0))
    assert board.row("a").absolute.n_items == (2, 2)


def test_duplicate_keys_are_refused() -> None:
    records = three_models()
    with pytest.raises(ValueError, match="unique"):
        build_leaderboard([*records, ModelRecord("mid", "Mid again", [[1, 2]])])


def test_item_scores_outside_the_rubric_are_refused() -> None:
    with pytest.raises(ValueError, match="outside 0-3"):
        build_leaderboard([ModelRecord("a", "A", [[1, 4]])], n_resamples=50)


@pytest.mark.parametrize(
    "records", [[], [ModelRecord("a", "A", []), ModelRecord("b", "B", [[]])]], ids=["none", "blank"]
)
def test_no_scored_session_gives_an_empty_leaderboard(records: list[ModelRecord]) -> None:
    board = build_leaderboard(records, anchor="a")
    assert board == Leaderboard((), None, False, None, (), 0.95, 0.95, ())


# --- ReLE diagnostics of the board --------------------------------------------------------


def test_board_diagnostics_match_numpy_on_the_discipline_matrix() -> None:
    rng = np.random.default_rng(5)
    disciplines = list(LLMEVAL_FAIR_DISCIPLINES)
    records = []
    for i in range(6):
        ability = rng.uniform(0.2, 0.9, size=len(disciplines))
        pooled = {
            d: [3 if rng.random() < a else 0 for _ in range(40)]
            for d, a in zip(disciplines, ability, strict=True)
        }
        records.append(
            ModelRecord(
                f"m{i}",
                f"M{i}",
                [[x for scores in pooled.values() for x in scores]],
                disciplines=pooled,
            )
        )
    board = build_leaderboard(records, n_resamples=200)
    found = board_diagnostics(board)
    assert found.rsa is not None and found.anisotropy is not None
    assert found.inconsistency is not None and found.unavailable == {}
    keys = [row.key for row in board.rows]
    matrix = np.array(
        [
            [
                np.mean(next(r for r in records if r.key == k).disciplines[d]) / 3 * 10
                for d in board.disciplines
            ]
            for k in keys
        ]
    )
    corr = np.corrcoef(matrix, rowvar=False)
    upper = corr[np.triu_indices(len(board.disciplines), k=1)]
    assert found.anisotropy.index == pytest.approx(1 - upper.mean())
    # RSA: max minus min competition rank of the weighted means over ReLE's schemes
    for key_index, key in enumerate(keys):
        ranks = []
        for weights in RELE_SCHEMES.values():
            w = np.array([weights.get(d, 0.0) for d in board.disciplines])
            scores = matrix @ w / w.sum()
            ranks.append(1 + int(np.sum(scores > scores[key_index])))
        assert found.rsa[key].amplitude == max(ranks) - min(ranks)
    assert set(found.inconsistency.values) == set(keys)


def test_board_diagnostics_need_two_complete_models_and_own_schemes_elsewhere() -> None:
    few = build_leaderboard(
        [ModelRecord("a", "A", [[3, 0]], disciplines={"x": [3], "y": [0]})], n_resamples=100
    )
    alone = board_diagnostics(few)
    assert (alone.anisotropy, alone.rsa, alone.inconsistency) == (None, None, None)
    assert set(alone.unavailable.values()) == {
        "needs at least two models scored on every discipline, got 1"
    }
    records = [
        ModelRecord("k", "k", [[3, 0, 3, 3]], disciplines={"x": [3, 0], "y": [3, 3]}),
        ModelRecord("j", "j", [[0, 0, 3, 0]], disciplines={"x": [0, 0], "y": [3, 0]}),
    ]
    board = build_leaderboard(records, n_resamples=100)
    plain = board_diagnostics(board)
    assert plain.rsa is None  # ReLE's schemes need its disciplines
    assert list(plain.unavailable) == ["rsa"]
    assert "no weighting schemes apply to these disciplines" in plain.unavailable["rsa"]
    weighted = board_diagnostics(board, {"only-x": {"x": 1.0}, "only-y": {"y": 1.0}})
    assert weighted.rsa is not None and weighted.unavailable == {}
    assert {k: r.ranks for k, r in weighted.rsa.items()} == {
        "k": {"only-x": 1, "only-y": 1},
        "j": {"only-x": 2, "only-y": 2},
    }


def test_board_diagnostics_with_a_discipline_every_model_scores_0_in() -> None:
    """Regression: a discipline with difficulty 0 raised ValueError (HTTP 500)."""
    records = [
        ModelRecord("k", "k", [[0, 3, 3, 0, 0]], disciplines={"x": [0], "y": [3, 3], "z": [0, 0]}),
        ModelRecord("j", "j", [[0, 0, 3, 3, 3]], disciplines={"x": [0], "y": [0, 3], "z": [3, 3]}),
        ModelRecord("i", "i", [[0, 0, 0, 3, 0]], disciplines={"x": [0], "y": [0, 0], "z": [3, 0]}),
    ]
    found = board_diagnostics(build_leaderboard(records, n_resamples=100), {"y": {"y": 1.0}})
    assert found.inconsistency is None
    assert found.unavailable == {
        "capability_inconsistency": (
            "discipline 'x': every model scores 0, so its difficulty is undefined"
        )
    }
    assert found.anisotropy is not None and found.anisotropy.undefined_pairs == (
        ("x", "y"),
        ("x", "z"),
    )
    assert found.rsa is not None and set(found.rsa) == {"i", "j", "k"}
