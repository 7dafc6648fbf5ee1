"""The judges' variance in the leaderboard's intervals (judge.ranking.judge_variance).

The vectorised offsets are checked against a loop over answers and replicates that uses
:func:`judge.panel.answer_verdict`, the verdict the scoring pipeline gives an answer; the
leaderboard against itself without panels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from judge.panel import PanelRule, answer_verdict
from judge.ranking.judge_variance import judge_offsets, with_judge_variance
from judge.ranking.leaderboard import Leaderboard, ModelRecord, build_leaderboard
from judge.ranking.stability import hierarchical_bootstrap

FloatArray = npt.NDArray[np.float64]
Sessions = list[list[int]]


def draw_sessions(rng: np.random.Generator, p: Sequence[float], n: int = 200) -> Sessions:
    return [[int(x) for x in rng.choice(4, size=n, p=list(p))] for _ in range(3)]


def agreeing_panel(sessions: Sessions, k: int = 3) -> FloatArray:
    """Every judge gives every answer its session score."""
    items = np.concatenate([np.asarray(s, dtype=float) for s in sessions])
    return np.repeat(items[:, None], k, axis=1)


def split_panel(sessions: Sessions, rng: np.random.Generator, share: float = 0.5) -> FloatArray:
    """Judge 0 is a point harsher and judge 2 a point more lenient than judge 1 on a share
    of the answers; judge 1 gives the session score, which is also the panel's median."""
    panel = agreeing_panel(sessions)
    moved = rng.random(panel.shape[0]) < share
    panel[moved, 0] = np.maximum(panel[moved, 0] - 1, 0)
    panel[moved, 2] = np.minimum(panel[moved, 2] + 1, 3)
    return panel


def three_models(seed: int = 20261124) -> list[ModelRecord]:
    rng = np.random.default_rng(seed)
    return [
        ModelRecord("top", "Top", draw_sessions(rng, [0.1, 0.1, 0.2, 0.6])),
        ModelRecord("mid", "Mid", draw_sessions(rng, [0.3, 0.2, 0.2, 0.3])),
        ModelRecord("low", "Low", draw_sessions(rng, [0.5, 0.2, 0.2, 0.1])),
    ]


def sessions_of(records: Sequence[ModelRecord], key: str) -> Sessions:
    record = next(r for r in records if r.key == key)
    return [list(s) for s in record.sessions]


def width(board: Leaderboard, key: str) -> float:
    interval = board.row(key).absolute.confidence_interval
    return interval.high - interval.low


# --- the offsets ---------------------------------------------------------------------


def loop_offsets(panel: FloatArray, picks: npt.NDArray[np.int64], rule: PanelRule) -> FloatArray:
    """Replicate by replicate and answer by answer, with ``answer_verdict``."""

    def verdict(scores: Sequence[float]) -> int | None:
        return answer_verdict([s for s in scores if not math.isnan(s)], [], rule)

    full = [verdict(list(row)) for row in panel]
    answers = [i for i, v in enumerate(full) if v is not None]
    full_mean = sum(full[i] or 0 for i in answers) / len(answers)
    out = []
    for columns in picks:
        total = 0
        for i in answers:
            drawn = verdict([panel[i, j] for j in columns])
            total += full[i] if drawn is None else drawn  # type: ignore[operator]
        out.append((total / len(answers) - full_mean) * 100 / 3)
    return np.asarray(out)


@pytest.mark.parametrize("rule", [PanelRule.MEDIAN, PanelRule.MEAN])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_offsets_match_a_loop_over_answer_verdicts(rule: PanelRule, k: int) -> None:
    gen = np.random.default_rng(k)
    panels = {}
    for model in ("a", "b"):
        panel = gen.integers(0, 4, size=(40, k)).astype(float)
        panel[gen.random(panel.shape) < 0.3] = np.nan  # judges that did not score
        panel[0] = np.nan  # an answer no judge scored: left out
        panels[model] = panel
    offsets = judge_offsets(panels, rule=rule, n_resamples=60, rng=17)
    picks = np.random.default_rng(17).integers(k, size=(60, k))
    assert list(offsets) == ["a", "b"]
    for model, panel in panels.items():
        assert offsets[model] == pytest.approx(loop_offsets(panel, picks, rule), abs=1e-9)
    assert judge_offsets(panels, rule=rule.value, n_resamples=60, rng=17)["a"] == pytest.approx(
        offsets["a"]
    )


def test_two_judges_median_offsets() -> None:
    """One answer, judges 3 and 1: the whole panel's median is 2; drawing judge 0 twice
    gives 3 (+33.3 points), judge 1 twice 1 (-33.3), one of each 2 (0)."""
    offsets = judge_offsets({"m": [[3.0, 1.0]]}, n_resamples=4000, rng=0)["m"]
    values, counts = np.unique(np.round(offsets, 6), return_counts=True)
    assert values.tolist() == pytest.approx([-100 / 3, 0.0, 100 / 3])
    assert counts / 4000 == pytest.approx([0.25, 0.5, 0.25], abs=0.03)


def test_agreeing_judges_give_zero_offsets_and_identical_models_share_the_draw() -> None:
    rng = np.random.default_rng(1)
    sessions = draw_sessions(rng, [0.25, 0.25, 0.25, 0.25])
    split = split_panel(sessions, rng)
    offsets = judge_offsets(
        {"agree": agreeing_panel(sessions), "x": split, "y": split.copy()}, n_resamples=500
    )
    assert np.all(offsets["agree"] == 0)
    assert offsets["x"].std() > 5
    assert np.array_equal(offsets["x"], offsets["y"])  # one judge draw per replicate


def test_a_judge_harsh_for_everyone_cancels_out_of_comparisons() -> None:
    records = three_models()
    runs = {r.key: [list(s) for s in r.sessions] for r in records}
    boot = hierarchical_bootstrap(runs, n_resamples=1000, rng=3)
    rng = np.random.default_rng(4)
    panel = split_panel(sessions_of(records, "mid"), rng)
    shifted = with_judge_variance(boot, {"mid": panel, "low": panel.copy()}, rng=5)
    mid, low = boot.models.index("mid"), boot.models.index("low")
    # The same panel scores for both: their offsets are equal in every replicate, so
    # their difference (and who beats whom) is unchanged, while each one moves.
    before = boot.absolute[mid] - boot.absolute[low]
    after = shifted.absolute[mid] - shifted.absolute[low]
    assert after == pytest.approx(before, abs=1e-9)
    assert shifted.beat_probability("mid", "low") == boot.beat_probability("mid", "low")
    assert np.std(shifted.absolute[mid]) > 2 * np.std(boot.absolute[mid])
    top = boot.models.index("top")
    assert np.array_equal(shifted.absolute[top], boot.absolute[top])  # no panel: offset 0


def test_with_judge_variance_clips_and_ignores_unknown_models() -> None:
    boot = hierarchical_bootstrap({"full": [[3] * 20] * 3}, n_resamples=300, rng=0)
    panel = np.tile([[3.0, 3.0, 3.0]], (60, 1))
    panel[:, 2] = 0.0  # median 3 for the whole panel; drawing judge 2 twice gives 0
    shifted = with_judge_variance(boot, {"full": panel, "absent": panel}, rng=1)
    assert shifted.absolute.max() <= 100 and shifted.absolute.min() >= 0
    assert shifted.absolute.min() < 100  # some replicates drew the harsh judge twice
    assert not shifted.absolute.flags.writeable


@pytest.mark.parametrize(
    ("panels", "options"),
    [
        ({"a": np.zeros((5, 3)), "b": np.zeros((5, 2))}, {}),
        ({"a": np.zeros(5)}, {}),
        ({"a": np.zeros((5, 0))}, {}),
        ({"a": np.full((5, 3), 4.0)}, {}),
        ({"a": np.full((5, 3), 1.5)}, {}),
        ({"a": np.full((5, 3), -1.0)}, {}),
        ({"a": np.zeros((5, 3))}, {"n_resamples": 0}),
        ({"a": np.zeros((5, 3))}, {"rule": "mode"}),
    ],
)
def test_invalid_panels_raise(panels: dict[str, FloatArray], options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        judge_offsets(panels, **options)  # type: ignore[arg-type]


def test_no_panels_no_offsets() -> None:
    assert judge_offsets({}) == {}
    only_missing = judge_offsets({"m": np.full((4, 3), np.nan)}, n_resamples=10)
    assert np.array_equal(only_missing["m"], np.zeros(10))


# --- the leaderboard ---------------------------------------------------------------------


def test_agreeing_judges_leave_the_leaderboard_unchanged() -> None:
    records = three_models()
    panels = {r.key: agreeing_panel(sessions_of(records, r.key)) for r in records}
    plain = build_leaderboard(records, n_resamples=1000, seed=2)
    judged = build_leaderboard(records, n_resamples=1000, seed=2, judge_panels=panels)
    assert judged == plain


def test_disagreeing_judges_widen_that_models_interval_only() -> None:
    records = three_models()
    rng = np.random.default_rng(6)
    panels = {
        "top": agreeing_panel(sessions_of(records, "top")),
        "mid": split_panel(sessions_of(records, "mid"), rng, share=0.3),
    }
    plain = build_leaderboard(records, n_resamples=2000, seed=7)
    judged = build_leaderboard(records, n_resamples=2000, seed=7, judge_panels=panels)
    for key in ("top", "low"):  # agreeing judges, or no panel: nothing changes
        assert judged.row(key).absolute == plain.row(key).absolute
    before, after = plain.row("mid").absolute, judged.row("mid").absolute
    assert after.mean == before.mean and after.session_values == before.session_values
    assert after.variance == before.variance
    assert width(judged, "mid") > 1.5 * width(plain, "mid")
    assert after.standard_error > 1.5 * before.standard_error
    relative_before, relative_after = plain.row("mid").relative, judged.row("mid").relative
    assert relative_before is not None and relative_after is not None
    assert relative_after.mean == relative_before.mean
    ci_before, ci_after = relative_before.confidence_interval, relative_after.confidence_interval
    assert ci_after.high - ci_after.low > 1.5 * (ci_before.high - ci_before.low)


def test_judge_variance_can_merge_tie_groups() -> None:
    """Two models a few points apart are separated by the session bootstrap alone; when
    the judges disagree widely on one of them the data no longer order them."""
    rng = np.random.default_rng(8)
    a = draw_sessions(rng, [0.2, 0.2, 0.2, 0.4], n=600)
    b = draw_sessions(rng, [0.3, 0.2, 0.2, 0.3], n=600)
    records = [ModelRecord("a", "A", a), ModelRecord("b", "B", b)]
    plain = build_leaderboard(records, n_resamples=2000, seed=9)
    judged = build_leaderboard(
        records, n_resamples=2000, seed=9, judge_panels={"a": split_panel(a, rng, share=0.8)}
    )
    assert plain.groups == (("a",), ("b",))
    assert judged.groups == (("a", "b"),)
    assert judged.row("a").rank_range == (1, 2)
    assert judged.row("a").beats_next is not None and plain.row("a").beats_next is not None
    assert judged.row("a").beats_next < plain.row("a").beats_next


def test_same_seed_same_leaderboard() -> None:
    records = three_models()
    rng = np.random.default_rng(10)
    panels = {"mid": split_panel(sessions_of(records, "mid"), rng)}
    first = build_leaderboard(records, n_resamples=500, seed=11, judge_panels=panels)
    again = build_leaderboard(records, n_resamples=500, seed=11, judge_panels=panels)
    other = build_leaderboard(records, n_resamples=500, seed=12, judge_panels=panels)
    assert first == again
    assert first.row("mid").absolute != other.row("mid").absolute
    mean_rule = build_leaderboard(
        records, n_resamples=500, seed=11, judge_panels=panels, panel_rule=PanelRule.MEAN
    )
    assert mean_rule.row("mid").absolute.mean == first.row("mid").absolute.mean
    assert mean_rule.row("mid").absolute != first.row("mid").absolute
