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

import math
import statistics
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from bank.adaptive.assisted import AssistedState, PoolItem
from bank.adaptive.irt import ItemParameters, fit_2pl
from bank.adaptive.policy import AdaptiveConfig, AdaptiveState, Policy, assign_strata
from bank.adaptive.recorded import ResponseMatrix
from bank.adaptive.stopping import Neighbour

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
    disciplines: list[str]
    neighbours: list[Neighbour]


def _run_model(task: _ModelTask) -> list[SessionOutcome]:
    """Every run of one model (a unit of work for a worker process)."""
    return [
        replay_session(
            task.scores,
            task.strata,
            task.config,
            np.random.default_rng([task.seed, run, task.model]),
            task.parameters,
            disciplines=task.disciplines,
            neighbours=task.neighbours,
        )
        for run in range(task.runs)
    ]


@dataclass(frozen=True, slots=True)
class SessionOutcome:
    items: int
    estimate: float
    halfwidth: float
    stop: str
    drawn: tuple[int, ...] = ()
    """The items given, as column indices of the response matrix."""
    disciplines: dict[str, float] = field(default_factory=dict)
    """Per discipline the session's estimate on [0, 1]: ``model-assisted``'s own, for the
    other policies the mean of the discipline's items given."""
    standard_error: float = math.nan
    """The estimate's standard error (its estimated variance's square root)."""


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
    stopped_settled: float = 0.0
    """Share of sessions that stopped because the model's place was settled."""
    discipline_mae: float = math.nan
    """Mean absolute error of the per-discipline estimates, in points, over every
    discipline of every session that gave one of its items."""
    max_exposure: float = 0.0
    """The largest share of sessions that were given one same item (each session stands
    for another organisation)."""
    coverage_95: float = math.nan
    """Share of sessions within 1.96 standard errors of the full-set score: whether the
    estimated variance is honest (``coverage`` is of the stopping rule's wider interval
    at delta / K)."""


@dataclass(slots=True)
class ReplayResult:
    config: AdaptiveConfig
    runs: int
    full_scores: dict[str, float]
    policies: dict[str, PolicySummary] = field(default_factory=dict)


IRT_POLICIES = (Policy.NEYMAN_IRT, Policy.MODEL_ASSISTED)
"""The policies that use item parameters."""


def replay(
    responses: ResponseMatrix,
    strata: Sequence[str],
    *,
    policies: Sequence[Policy],
    config: AdaptiveConfig,
    runs: int,
    seed: int = 0,
    history: ResponseMatrix | None = None,
    disciplines: Sequence[str] | None = None,
    progress: Callable[[str, int], None] | None = None,
    jobs: int = 1,
) -> ReplayResult:
    """Replay ``runs`` sessions per model and policy; ``strata[j]`` is item j's stratum and
    ``disciplines[j]`` its discipline (default: its stratum).

    Run r of model m draws from ``numpy.random.default_rng([seed, r, m])`` under every
    policy, so results do not depend on ``jobs`` (worker processes). The leaderboard a
    ``model-assisted`` session's rank-aware rule sees is the other models' full-set scores.
    ``progress(policy, sessions)`` is called when a policy is done, if given."""
    scores = responses.scores
    if scores.shape[0] < 2:
        raise ValueError("the replay needs at least two models to rank")
    full = np.nanmean(scores, axis=1)
    result = ReplayResult(
        config, runs, {m: float(full[i] * POINTS) for i, m in enumerate(responses.models)}
    )
    uses_irt = any(p in IRT_POLICIES for p in policies)
    parameters = _item_parameters(responses, history) if uses_irt else None
    labels = list(disciplines) if disciplines is not None else list(strata)
    n_models = len(responses.models)
    for policy in policies:
        cfg = replace(config, policy=policy)

        def params(m: int, policy: Policy = policy) -> ItemParameters | None:
            # only the IRT policies use item parameters; the others need not carry them
            return parameters(m) if parameters and policy in IRT_POLICIES else None

        tasks = [
            _ModelTask(
                scores[m],
                list(strata),
                cfg,
                runs,
                seed,
                m,
                params(m),
                labels,
                [Neighbour(float(full[o])) for o in range(n_models) if o != m],
            )
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
        result.policies[policy.value] = summarise(
            outcomes, full, cfg.budget, truth=_discipline_means(scores, labels)
        )
        if progress:
            progress(policy.value, runs * n_models)
    return result


def replay_session(
    scores: NDArray[np.float64],
    strata: Sequence[str],
    config: AdaptiveConfig,
    rng: np.random.Generator,
    parameters: ItemParameters | None = None,
    *,
    disciplines: Sequence[str] | None = None,
    neighbours: Sequence[Neighbour] = (),
) -> SessionOutcome:
    """One session of ``config.policy`` over the items the model answered."""
    labels = list(disciplines) if disciplines is not None else list(strata)
    if config.policy is Policy.MODEL_ASSISTED:
        return _assisted_session(scores, strata, labels, config, rng, parameters, neighbours)
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
    drawn: list[int] = []
    while (key := state.next_stratum()) is not None:
        item = int(queues[key].pop())
        drawn.append(item)
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
    given = np.array(drawn, dtype=np.int64)
    return SessionOutcome(
        state.n_allocated,
        decision.estimate.mean,
        decision.halfwidth,
        str(decision.stop),
        tuple(given.tolist()),
        _raw_discipline_means(scores, given, labels),
        decision.estimate.standard_error,
    )


def _assisted_session(
    scores: NDArray[np.float64],
    strata: Sequence[str],
    disciplines: Sequence[str],
    config: AdaptiveConfig,
    rng: np.random.Generator,
    parameters: ItemParameters | None,
    neighbours: Sequence[Neighbour],
) -> SessionOutcome:
    """One ``model-assisted`` session: the pool is every item the model answered."""
    answered = np.flatnonzero(~np.isnan(scores))
    pool = [
        PoolItem(
            strata[j],
            disciplines[j],
            None if parameters is None else float(parameters.a[j]),
            None if parameters is None else float(parameters.b[j]),
        )
        for j in answered.tolist()
    ]
    state = AssistedState.start(config, pool)
    decision = None
    while (draw := state.next_draw(rng)) is not None:
        decision = (
            state.scored(draw.item, float(scores[answered[draw.item]]), neighbours=neighbours)
            or decision
        )
    if decision is None or decision.stop is None:
        decision = state.decision(final=True)
    per_discipline = state.estimate().disciplines
    return SessionOutcome(
        state.n_allocated,
        decision.estimate.mean,
        decision.halfwidth,
        str(decision.stop),
        tuple(answered[[d.item for d in state.draws]].tolist()),
        {name: d.mean for name, d in per_discipline.items() if not math.isnan(d.mean)},
        decision.estimate.standard_error,
    )


def _raw_discipline_means(
    scores: NDArray[np.float64], given: NDArray[np.int64], disciplines: Sequence[str]
) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for j in given:
        sums.setdefault(disciplines[int(j)], []).append(float(scores[j]))
    return {name: statistics.fmean(values) for name, values in sums.items()}


def _discipline_means(
    scores: NDArray[np.float64], disciplines: Sequence[str]
) -> list[dict[str, float]]:
    """Per model its full-set mean in every discipline."""
    labels = np.array(disciplines)
    out = []
    for row in scores:
        seen = ~np.isnan(row)
        out.append(
            {
                str(name): float(row[seen & (labels == name)].mean())
                for name in np.unique(labels[seen])
            }
        )
    return out


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
    outcomes: NDArray[np.object_],
    full: NDArray[np.float64],
    budget: int,
    *,
    truth: Sequence[dict[str, float]] | None = None,
) -> PolicySummary:
    """The policy's figures over ``outcomes`` (runs x models of :class:`SessionOutcome`);
    ``truth[m]`` is model m's full-set score per discipline."""
    items = np.array([[o.items for o in row] for row in outcomes], dtype=np.float64)
    est = np.array([[o.estimate for o in row] for row in outcomes], dtype=np.float64)
    width = np.array([[o.halfwidth for o in row] for row in outcomes], dtype=np.float64)
    stops = np.array([[o.stop for o in row] for row in outcomes])
    se = np.array([[o.standard_error for o in row] for row in outcomes], dtype=np.float64)
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
        stopped_precise=float((stops == "precise").mean()),
        stopped_settled=float((stops == "settled").mean()),
        discipline_mae=_discipline_mae(outcomes, truth),
        max_exposure=_max_exposure(outcomes),
        coverage_95=math.nan if np.isnan(se).all() else float((errors <= 1.96 * se).mean()),
    )


def _discipline_mae(
    outcomes: NDArray[np.object_], truth: Sequence[dict[str, float]] | None
) -> float:
    if truth is None:
        return math.nan
    errors = [
        abs(estimate - truth[m][name])
        for row in outcomes
        for m, outcome in enumerate(row)
        for name, estimate in outcome.disciplines.items()
    ]
    return statistics.fmean(errors) * POINTS if errors else math.nan


def _max_exposure(outcomes: NDArray[np.object_]) -> float:
    """The largest share of all sessions that were given one same item."""
    given = [o.drawn for row in outcomes for o in row]
    if not any(given):
        return 0.0
    counts = np.bincount(np.array([j for g in given for j in g], dtype=np.int64))
    return float(counts.max() / len(given))
