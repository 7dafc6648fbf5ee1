"""Replay adaptive sessions on recorded responses (``proctor simulate``).

For every run and every model of a response matrix, one session is replayed per policy:
the policy asks for a stratum, the replay draws an unseen item of that stratum uniformly
at random from the items the model answered, and the recorded score arrives at once.
The session's estimate is compared with the model's full-set score (its mean over every
item it answered), which is the population mean the estimator targets.

Per policy (:class:`PolicySummary`): ``items_mean``; ``saved_vs_full`` = 1 - items_mean /
budget; ``mae`` in score points (0-100); ``spearman`` and ``kendall`` of each run's
ranking against the full-set ranking, averaged over runs; ``coverage``, the share of
sessions whose stated interval (estimate ± half-width) holds the full-set score.

Item parameters for ``neyman-irt`` come from ``history`` (other models' responses) or,
without it, from a fit that leaves the simulated model out, so no policy ever learns
from the responses it is scored on.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from bank.adaptive.irt import ItemParameters, fit_2pl
from bank.adaptive.policy import AdaptiveConfig, AdaptiveState, Policy, assign_strata
from bank.adaptive.recorded import ResponseMatrix

POINTS = 100.0
"""Scores are reported on a 0-100 scale."""


@dataclass(frozen=True, slots=True)
class _ModelTask:
    scores: NDArray[np.float64]
    strata: list[str]
    config: AdaptiveConfig
    runs: int
    seed: int
    model: int
    parameters: ItemParameters | None


def _run_model(task: _ModelTask) -> list[SessionOutcome]:
    """Every run of one model (a unit of work for a worker process)."""
    return [
        replay_session(
            task.scores,
            task.strata,
            task.config,
            np.random.default_rng([task.seed, run, task.model]),
            task.parameters,
        )
        for run in range(task.runs)
    ]


@dataclass(frozen=True, slots=True)
class SessionOutcome:
    items: int
    estimate: float
    halfwidth: float
    stop: str


@dataclass(frozen=True, slots=True)
class PolicySummary:
    items_mean: float
    saved_vs_full: float
    mae: float
    spearman: float
    kendall: float
    coverage: float
    items_p95: float
    halfwidth_mean: float
    """Mean stated half-width, in points."""
    stopped_precise: float
    """Share of sessions that stopped because the interval was narrow enough."""


@dataclass(slots=True)
class ReplayResult:
    config: AdaptiveConfig
    runs: int
    full_scores: dict[str, float]
    policies: dict[str, PolicySummary] = field(default_factory=dict)


def replay(
    responses: ResponseMatrix,
    strata: Sequence[str],
    *,
    policies: Sequence[Policy],
    config: AdaptiveConfig,
    runs: int,
    seed: int = 0,
    history: ResponseMatrix | None = None,
    progress: Callable[[str, int], None] | None = None,
    jobs: int = 1,
) -> ReplayResult:
    """Replay ``runs`` sessions per model and policy; ``strata[j]`` is item j's stratum.

    Run r of model m draws from ``numpy.random.default_rng([seed, r, m])`` under every
    policy, so results do not depend on ``jobs`` (worker processes).
    ``progress(policy, sessions)`` is called when a policy is done, if given."""
    scores = responses.scores
    if scores.shape[0] < 2:
        raise ValueError("the replay needs at least two models to rank")
    full = np.nanmean(scores, axis=1)
    result = ReplayResult(
        config, runs, {m: float(full[i] * POINTS) for i, m in enumerate(responses.models)}
    )
    parameters = _item_parameters(responses, history) if Policy.NEYMAN_IRT in policies else None
    n_models = len(responses.models)
    for policy in policies:
        cfg = replace(config, policy=policy)

        def params(m: int, policy: Policy = policy) -> ItemParameters | None:
            # only neyman-irt uses item parameters; the others need not carry them
            return parameters(m) if parameters and policy is Policy.NEYMAN_IRT else None

        tasks = [
            _ModelTask(scores[m], list(strata), cfg, runs, seed, m, params(m))
            for m in range(n_models)
        ]
        if jobs > 1:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                per_model = list(pool.map(_run_model, tasks))
        else:
            per_model = [_run_model(task) for task in tasks]
        outcomes = np.empty((runs, n_models), dtype=object)
        for m, sessions in enumerate(per_model):
            for run, outcome in enumerate(sessions):
                outcomes[run, m] = outcome
        result.policies[policy.value] = summarise(outcomes, full, cfg.budget)
        if progress:
            progress(policy.value, runs * n_models)
    return result


def replay_session(
    scores: NDArray[np.float64],
    strata: Sequence[str],
    config: AdaptiveConfig,
    rng: np.random.Generator,
    parameters: ItemParameters | None = None,
) -> SessionOutcome:
    """One session of ``config.policy`` over the items the model answered."""
    answered = np.flatnonzero(~np.isnan(scores))
    groups = _strata_of(answered, strata, config, parameters)
    queues = {key: list(rng.permutation(members)) for key, members in groups.items()}
    item_params = (
        {
            key: ItemParameters(parameters.a[members], parameters.b[members])
            for key, members in groups.items()
        }
        if parameters is not None and config.policy is Policy.NEYMAN_IRT
        else None
    )
    state = AdaptiveState.start(
        config, {key: len(m) for key, m in groups.items()}, item_parameters=item_params
    )
    decision = None
    while (key := state.next_stratum()) is not None:
        item = int(queues[key].pop())
        state.allocated(key)
        ab = (
            (float(parameters.a[item]), float(parameters.b[item]))
            if item_params and parameters
            else None
        )
        decision = state.scored(key, float(scores[item]), item=ab) or decision
        if decision is not None and decision.stop is not None:
            break
    if decision is None or decision.stop is None:
        decision = state.decision(final=True)
    return SessionOutcome(
        state.n_allocated, decision.estimate.mean, decision.halfwidth, str(decision.stop)
    )


def _strata_of(
    answered: NDArray[np.int64],
    strata: Sequence[str],
    config: AdaptiveConfig,
    parameters: ItemParameters | None,
) -> dict[Hashable, NDArray[np.int64]]:
    """The answered items grouped by the policy's strata."""
    difficulty = [float(parameters.b[j]) for j in answered] if parameters is not None else None
    keys = assign_strata(
        [strata[j] for j in answered],
        policy=config.policy,
        bands=config.bands,
        difficulty=difficulty,
    )
    groups: dict[Hashable, list[int]] = {}
    for j, key in zip(answered, keys, strict=True):
        groups.setdefault(key, []).append(int(j))
    return {key: np.array(members) for key, members in groups.items()}


def _item_parameters(
    responses: ResponseMatrix, history: ResponseMatrix | None
) -> Callable[[int], ItemParameters]:
    """Item parameters for simulating model m: from ``history``, else left-one-out fits."""
    if history is not None:
        fitted = fit_2pl(history.subset(responses.item_ids).scores).items
        return lambda m: fitted
    cache: dict[int, ItemParameters] = {}

    def leave_out(m: int) -> ItemParameters:
        if m not in cache:
            cache[m] = fit_2pl(np.delete(responses.scores, m, axis=0)).items
        return cache[m]

    return leave_out


def summarise(
    outcomes: NDArray[np.object_], full: NDArray[np.float64], budget: int
) -> PolicySummary:
    """The policy's figures over ``outcomes`` (runs x models of :class:`SessionOutcome`)."""
    items = np.array([[o.items for o in row] for row in outcomes], dtype=np.float64)
    est = np.array([[o.estimate for o in row] for row in outcomes], dtype=np.float64)
    width = np.array([[o.halfwidth for o in row] for row in outcomes], dtype=np.float64)
    precise = np.array([[o.stop == "precise" for o in row] for row in outcomes])
    errors = np.abs(est - full[None, :])
    from scipy.stats import (  # scipy.stats takes ~1 s to import: not at every CLI start
        kendalltau,
        spearmanr,
    )

    spearman = [float(spearmanr(row, full).statistic) for row in est]
    kendall = [float(kendalltau(row, full).statistic) for row in est]
    return PolicySummary(
        items_mean=float(items.mean()),
        saved_vs_full=float(1.0 - items.mean() / budget),
        mae=float(errors.mean() * POINTS),
        spearman=statistics.fmean(spearman),
        kendall=statistics.fmean(kendall),
        coverage=float((errors <= width).mean()),
        items_p95=float(np.quantile(items, 0.95)),
        halfwidth_mean=float(width.mean() * POINTS),
        stopped_precise=float(precise.mean()),
    )
