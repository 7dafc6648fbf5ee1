"""The gate's decision (pure) and the agreement figures of a run, against scikit-learn."""

from __future__ import annotations

import math
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from judge.agreement.round_change import CalibrationRound, KappaChange, kappa_change
from server.calibration.drift import is_drop
from server.calibration.figures import Figures
from server.calibration.gate import GateRun, GateStatus, OpenDrift, gate_decision
from server.calibration.runner import agreement_figures, answer_clusters, compared_rounds
from server.config import JudgeEndpoint

ENDPOINT = JudgeEndpoint(name="judge-a", base_url="http://127.0.0.1:9/v1", model="m-2026")
NOW = datetime(2026, 11, 24, tzinfo=UTC)


def run(
    low: float | None = 0.7, *, model: str = "m-2026", prompt: str = "p1", n: int = 100
) -> GateRun:
    return GateRun(
        id=uuid.uuid4(),
        model=model,
        prompt_version=prompt,
        figures=Figures(
            kappa=0.7,
            kappa_low=0.6,
            kappa_high=0.8,
            weighted_kappa=0.8,
            weighted_low=low,
            weighted_high=0.9,
            exact=0.8,
            within_one=0.95,
            n=n,
            n_clusters=n,
        ),
        created_at=NOW,
    )


def decide(
    gate_run: GateRun | None,
    *,
    set_exists: bool = True,
    drift: OpenDrift | None = None,
) -> GateStatus:
    return gate_decision(
        ENDPOINT,
        set_exists=set_exists,
        run=gate_run,
        drift=drift,
        min_kappa=0.6,
        min_n=50,
        prompt_version="p1",
    ).status


def test_the_gate_reads_the_lower_bound_of_the_weighted_kappa() -> None:
    assert decide(run(0.6)) is GateStatus.PASSED, "the bound equal to the threshold passes"
    assert decide(run(0.599)) is GateStatus.REFUSED
    assert decide(run(None)) is GateStatus.REFUSED, "an undefined bound never passes"
    assert decide(run(math.nan)) is GateStatus.REFUSED
    assert decide(run(0.9, n=49)) is GateStatus.REFUSED, "too few answers"


def test_a_run_of_another_model_or_prompt_version_does_not_match() -> None:
    assert decide(None) is GateStatus.UNCALIBRATED
    assert decide(run(0.9, model="m-2025")) is GateStatus.UNCALIBRATED
    assert decide(run(0.9, prompt="p0")) is GateStatus.UNCALIBRATED


def test_no_set_opens_the_gate_and_drift_counts_only_after_the_run() -> None:
    assert decide(None, set_exists=False) is GateStatus.OPEN
    later = OpenDrift(uuid.uuid4(), NOW + timedelta(minutes=1), "dropped")
    earlier = OpenDrift(uuid.uuid4(), NOW - timedelta(minutes=1), "dropped")
    assert decide(run(0.9), drift=later) is GateStatus.DRIFTING
    assert decide(run(0.9), drift=earlier) is GateStatus.PASSED, "a newer passing run clears it"
    assert decide(run(0.5), drift=later) is GateStatus.REFUSED


def test_run_figures_equal_scikit_learn_on_the_scored_answers() -> None:
    rng = np.random.default_rng(3)
    human = rng.integers(0, 4, 120).tolist()
    judge: list[int | None] = [h if rng.random() < 0.7 else int(rng.integers(0, 4)) for h in human]
    judge[5] = judge[17] = None  # no verdict: left out
    clusters = [f"f{i // 4}" if i % 10 else None for i in range(120)]
    figures = agreement_figures(human, judge, clusters, n_resamples=500)
    kept = [i for i, s in enumerate(judge) if s is not None]
    a = [human[i] for i in kept]
    b = [int(s) for s in judge if s is not None]
    assert figures.n == 118
    assert figures.kappa == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2, 3]))
    assert figures.weighted_kappa == pytest.approx(
        cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="quadratic")
    )
    assert figures.kappa_low is not None and figures.kappa_high is not None
    assert figures.kappa_low < (figures.kappa or 0) < figures.kappa_high
    groups = answer_clusters([clusters[i] for i in kept])
    assert figures.n_clusters == len(set(groups))
    nothing = agreement_figures([1, 2], [None, None], [None, None])
    assert nothing.n == 0 and nothing.kappa is None and math.isnan(nothing.exact)


def test_rounds_are_paired_on_answers_both_scored() -> None:
    human = [3, 0, 3, 0, 2]
    before = [3, 0, 3, None, 3]
    after = [3, 1, None, 0, 3]
    a, b = compared_rounds(human, before, after, ["x", "x", None, None, "y"], [4, 0, 1, 2, 3])
    assert list(a.answer_ids or []) == [4, 0, 1] == list(b.answer_ids or [])
    assert (list(a.reference), list(a.rater), list(b.rater)) == ([2, 3, 0], [3, 3, 0], [3, 3, 1])
    assert list(a.clusters or []) == [("family", "y"), ("family", "x"), ("family", "x")]


def test_only_a_change_wholly_below_zero_is_a_drop() -> None:
    human = [3, 0] * 20
    same = CalibrationRound(human, human, list(range(40)))
    real = kappa_change(same, same, n_resamples=200).weighted

    def change(low: float, high: float) -> KappaChange:
        return replace(real, low=low, high=high)

    assert is_drop(change(-0.4, -0.01))
    assert not is_drop(change(-0.4, 0.0))
    assert not is_drop(change(-0.4, 0.1))
    assert not is_drop(change(math.nan, math.nan))
    assert not is_drop(real), "no change is no drop"
