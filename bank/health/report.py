"""One health report of a bank: item figures, stratum and bank figures, flags and selective
subsets, on a stated model population with the choices made where the papers are silent.

:func:`health_report` is pure (numpy/scipy on a ``Responses``); the CLI and the server's
health job feed it recorded files or the server's own verdicts and store or print
:meth:`HealthReport.to_dict`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bank.health import aggregates
from bank.health.flags import FlagThresholds, flag_items
from bank.health.items import item_statistics
from bank.health.labels import Breakdown, ItemLabels
from bank.health.population import Population, describe, select_models
from bank.health.responses import BoolArray, FloatArray, IntArray, Responses
from bank.health.results import Figure, ItemStatistics, Minimums
from bank.health.stability import rank_stability
from bank.health.subsets import SubsetRule, evaluate_subset, select_subset

FIGURES = (
    "ds",
    "edr",
    "rcv",
    "cad",
    "cas",
    "stability",
    "s_sta",
    "s_dyn",
    "s_as",
    "ovl",
    "cbrc",
    "bqs",
    "bhi",
)
"""The figures of a stratum and of the bank, in report order."""

CHOICES: dict[str, str] = {
    "scores": "y = s/3 for rubric scores s in 0..3 (recorded 0/1 as is); correct c = [s >= 2]",
    "p": "mean y over the responding models (graded)",
    "discrimination": (
        "point-biserial of c and Spearman of y against the model's mean y over the other "
        "item families (leave-family-out ability); 95% Fisher-z interval"
    ),
    "cas": (
        "H2(mean c) * max(0, Spearman(theta, y)) (eq. 2) with theta over all the bank's "
        "items, not per stratum, so an item's CAS does not depend on the breakdown; a "
        "stratum's CAS is the mean over its items"
    ),
    "items_read": (
        "verdicts on items of every status are read (a flagged or retired item's figures "
        "are what its reviewer needs), so retiring items does not change past figures"
    ),
    "cas_kfold": "5 folds of item families within 4 difficulty quartiles, deterministic",
    "inversions": (
        "pairs of one registered family with different sizes that both answered; "
        "an inversion is the larger incorrect (c = 0) and the smaller correct"
    ),
    "cad": "exp(-12 * inversions / pairs), pooled over items and families for a stratum",
    "ds": "Benchmark² eq. 2 on per-model mean y, population SD, eps = 0.02",
    "edr_rcv": "on per-model mean y x 100; delta = 2% of the range; linear percentiles",
    "stability": "100 bootstrap resamples of item families (never single items), mean tau-b",
    "s_sta": (
        "1 - theta-weighted mean score; theta is the leave-one-stratum-out win rate with the "
        "log-balance factor (BHI eqs. 4-6); for the bank, theta over all strata"
    ),
    "s_dyn": (
        "30-day projection of the OLS slope of score on the model's date; equal to S_Sta "
        "when the slope is negative or fewer than two models have distinct dates"
    ),
    "ovl": "20-bin histograms of abilities and item difficulties on [0, 1]",
    "bins": "4 fixed equal-width bins of difficulty 1 - p",
    "cbrc": "mean tau-b against imported static leaderboards of the same discipline",
    "bhi": (
        "two dimensions (S_Disc, S_AS) over the strata: the published CRITIC weights of "
        "the Benchmark Health Index renormalised without Impact, which a private bank "
        "has no signal for; S_Disc with the published SDM weights (0.525 EDR, 0.475 RCV) "
        "because ten-odd strata make data-derived weights unstable; the bank's BHI is "
        "the item-weighted mean of its strata's"
    ),
    "items": (
        "an item with fewer responding models than the minimum (8), no within-family pair "
        "and no flag is left out of the item section: all its figures would be null"
    ),
    "subsets": (
        "cad_ds: item CAD > 0.15 and the top 35% by d_q (share of model pairs separated); "
        "cas: CAS > 0.4; cad_ds_cas: both"
    ),
}

PUBLISHED_SDM_WEIGHTS = (0.5250, 0.4750)
"""(w_EDR, w_RCV) of the Benchmark Health Index's S_Disc over its 106 benchmarks."""
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class HealthOptions:
    by: Breakdown = Breakdown.DISCIPLINE
    minimums: Minimums = field(default_factory=Minimums)
    thresholds: FlagThresholds = field(default_factory=FlagThresholds)
    stability_iterations: int = 100
    seed: int = 0
    subsets: tuple[SubsetRule, ...] = tuple(SubsetRule)
    items: bool = True
    """Include the per-item section (off for summaries of very large banks)."""


@dataclass(frozen=True, slots=True)
class HealthReport:
    population: dict[str, Any]
    bank: dict[str, Any]
    strata: dict[str, dict[str, Any]]
    subsets: dict[str, dict[str, Any]]
    flags: dict[str, tuple[str, ...]]
    """Item id -> the rules that flag it (only flagged items)."""
    item_ids: tuple[str, ...] = ()
    item_stats: ItemStatistics | None = None
    """Per-item figures (None when the report leaves the item section out)."""
    item_minimum: int = Minimums().models_per_item
    subset_members: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Subset rule -> the ids of its items (not in the JSON: an admin saves one as an item
    set)."""
    choices: dict[str, str] = field(default_factory=lambda: dict(CHOICES))

    @property
    def items(self) -> dict[str, dict[str, Any]]:
        """Item id -> its figures, JSON-ready, built on demand. An item with fewer
        responding models than the minimum, no within-family pair and no flag is left out:
        every figure of it would be null (a sparse bank has many)."""
        stats = self.item_stats
        if stats is None:
            return {}
        flagged = np.fromiter(
            (i in self.flags for i in self.item_ids), dtype=bool, count=len(self.item_ids)
        )
        shown = (stats.n >= self.item_minimum) | (stats.pairs > 0) | flagged
        return _items_dict(self.item_ids, stats, self.flags, np.flatnonzero(shown))

    def to_dict(self) -> dict[str, Any]:
        return {
            "population": self.population,
            "choices": self.choices,
            "bank": self.bank,
            "strata": self.strata,
            "items": self.items,
            "subsets": self.subsets,
        }


def health_report(
    responses: Responses,
    labels: ItemLabels,
    *,
    population: Population,
    options: HealthOptions | None = None,
    peers: Mapping[str, Sequence[Mapping[str, float]]] | None = None,
    judge_disagreement: FloatArray | None = None,
    judged: IntArray | None = None,
) -> HealthReport:
    """The health of ``responses`` on the models ``population`` selects.

    ``peers`` maps a stratum name to imported static leaderboards (model -> score) of the
    same discipline, for CBRC and BQS; ``judge_disagreement`` and ``judged`` give per item
    the share of its responses whose judges disagreed and how many were judged by several.
    """
    options = options or HealthOptions()
    chosen = select_models(responses, population)
    data = responses.select(models=chosen)
    stats = item_statistics(data, minimums=options.minimums)
    strata_masks = labels.strata(options.by)
    strata_scores = _strata_scores(data, strata_masks, options.minimums)
    lobo = aggregates.lobo_ability(strata_scores)  # theta^(-stratum), BHI eqs. 4-5
    strata = {
        name: _stratum(data, stats, mask, theta, options, (peers or {}).get(name, ()))
        for (name, mask), theta in zip(strata_masks.items(), lobo, strict=True)
    }
    every_item = np.ones(data.n_items, dtype=bool)
    bank_theta = _win_rate_ability(strata_scores)
    bank = _stratum(data, stats, every_item, bank_theta, options, ())
    _add_health_index(bank, strata, strata_masks)
    flags = flag_items(
        stats, options.thresholds, judge_disagreement=judge_disagreement, judged=judged
    )
    flagged = {data.item_ids[i]: tuple(str(r) for r in rules) for i, rules in flags.items()}
    evaluations, members = _subsets(data, stats, options, full_stability=bank["stability"])
    choices = {**CHOICES, "thresholds": json.dumps(options.thresholds.to_dict())}
    return HealthReport(
        choices=choices,
        population=describe(population, responses, chosen),
        bank=_figures_dict(bank),
        strata={name: _figures_dict(s) for name, s in strata.items()},
        subsets=evaluations,
        flags=flagged,
        item_ids=data.item_ids,
        item_stats=stats if options.items else None,
        item_minimum=options.minimums.models_per_item,
        subset_members=members,
    )


# --------------------------------------------------------------------------- strata


def _model_scores(data: Responses, items: BoolArray, minimums: Minimums) -> FloatArray:
    """Each model's mean y over its cells on ``items``; NaN below ``items_per_model``."""
    cells = items[data.item]
    totals = np.bincount(data.model[cells], data.score[cells], minlength=data.n_models)
    counts = np.bincount(data.model[cells], minlength=data.n_models)
    enough = counts >= max(1, minimums.items_per_model)
    return np.where(enough, totals / np.maximum(counts, 1), np.nan)


def _stratum(
    data: Responses,
    stats: ItemStatistics,
    items: BoolArray,
    theta: FloatArray,
    options: HealthOptions,
    peers: Sequence[Mapping[str, float]],
) -> dict[str, Figure | Any]:
    """Every figure of one stratum (a mask over the items)."""
    minimums = options.minimums
    scores = _model_scores(data, items, minimums)
    scored = ~np.isnan(scores)
    n_models = int(scored.sum())
    n_items = int(np.count_nonzero(items & (data.responses_per_item() > 0)))
    out: dict[str, Figure | Any] = {"n_items": n_items, "n_models": n_models}
    few = n_models < minimums.models_per_stratum
    reason = f"fewer than {minimums.models_per_stratum} models with a score"
    s = scores[scored]

    def figure(value: float, n: int = n_models) -> Figure:
        return Figure.missing(reason, n) if few else Figure.of(value, n)

    out["ds"] = figure(aggregates.discriminability(s))
    out["edr"] = figure(aggregates.effective_differentiation_ratio(s * 100))
    out["rcv"] = figure(aggregates.robust_spread(s * 100))
    pairs = int(stats.pairs[items].sum())
    out["cad"] = (
        Figure.of(aggregates.pooled_cad(stats.inversions[items], stats.pairs[items]), pairs)
        if pairs
        else Figure.missing("no family has two sizes that answered the same item")
    )
    cas = stats.cas[items]
    cas = cas[~np.isnan(cas)]
    out["cas"] = (
        Figure.of(float(cas.mean()), cas.size)
        if cas.size
        else Figure.missing(f"no item has {minimums.models_per_item} responding models")
    )
    out["stability"] = rank_stability(
        data,
        iterations=options.stability_iterations,
        seed=options.seed,
        items=items,
        min_models=minimums.models_per_stratum,
    )
    s_sta = aggregates.static_resistance(s, theta[scored]) if not few else math.nan
    out["s_sta"] = figure(s_sta)
    days = _days(data)[scored]
    if not np.isfinite(days).any():
        s_dyn = s_sta  # no model has a date: the slope is undefined (BHI's fallback)
    else:
        s_dyn = aggregates.dynamic_saturation(s, days, s_sta) if not few else math.nan
    out["s_dyn"] = figure(s_dyn)
    out["s_as"] = figure(aggregates.anti_saturation(s_sta, s_dyn))
    p = stats.p[items]
    p = p[~np.isnan(p)]
    out["ovl"] = (
        Figure.of(aggregates.overlap(s, 1 - p), min(n_models, p.size))
        if p.size and n_models
        else Figure.missing("no item difficulty or no model score")
    )
    out["cbrc"] = _cbrc(data, scores, peers)
    out["bqs"] = _bqs(out["cbrc"], out["ds"], out["cad"])
    out["bhi"] = Figure.missing("computed across strata")
    out["by_difficulty"] = _by_difficulty(data, stats, items, options)
    return out


def _cbrc(data: Responses, scores: FloatArray, peers: Sequence[Mapping[str, float]]) -> Figure:
    if not peers:
        return Figure.missing("no imported leaderboard of this stratum")
    names = [m.name for m in data.models]
    ours, theirs = [], []
    for peer in peers:
        common = [i for i, n in enumerate(names) if n in peer and not np.isnan(scores[i])]
        ours.append(scores[common])
        theirs.append(np.array([peer[names[i]] for i in common], dtype=np.float64))
    value = float(
        np.nanmean(
            [aggregates.ranking_consistency(o, [t]) for o, t in zip(ours, theirs, strict=True)]
        )
    )
    return Figure.of(value, min(len(o) for o in ours), "fewer than 2 common models")


def _bqs(cbrc: Figure, ds: Figure, cad: Figure) -> Figure:
    if cbrc.value is None or ds.value is None or cad.value is None:
        return Figure.missing("needs CBRC, DS and CAD")
    return Figure.of(aggregates.quality_score(cbrc.value, ds.value, cad.value), ds.n)


def _by_difficulty(
    data: Responses, stats: ItemStatistics, items: BoolArray, options: HealthOptions
) -> list[dict[str, Any]]:
    """DS and CAS per fixed difficulty bin (Capability Alignment §3.1, the inverted U)."""
    bins = aggregates.difficulty_bins(stats.p)
    rows = []
    for b, (low, high) in enumerate(((0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0))):
        in_bin = items & (bins == b)
        scores = _model_scores(data, in_bin, options.minimums)
        s = scores[~np.isnan(scores)]
        cas = stats.cas[in_bin]
        cas = cas[~np.isnan(cas)]
        enough = s.size >= options.minimums.models_per_stratum
        rows.append(
            {
                "difficulty": [low, high],
                "n_items": int(in_bin.sum()),
                "ds": _figure_json(
                    Figure.of(aggregates.discriminability(s), s.size)
                    if enough
                    else Figure.missing("too few models", s.size)
                ),
                "cas": _figure_json(
                    Figure.of(float(cas.mean()), cas.size)
                    if cas.size
                    else Figure.missing("no item with CAS")
                ),
            }
        )
    return rows


def _days(data: Responses) -> FloatArray:
    epoch = dt.date(1970, 1, 1)
    return np.array(
        [math.nan if m.date is None else float((m.date - epoch).days) for m in data.models],
        dtype=np.float64,
    )


# --------------------------------------------------------------------------- abilities


def _strata_scores(
    data: Responses, masks: Mapping[str, BoolArray], minimums: Minimums
) -> FloatArray:
    return np.array([_model_scores(data, m, minimums) for m in masks.values()]).reshape(
        len(masks), data.n_models
    )


def _win_rate_ability(scores: FloatArray) -> FloatArray:
    """The bank-level theta from the strata × models ``scores``: the LOBO rule with no
    stratum left out (an extra all-NaN row is the one left out)."""
    padded = np.vstack([scores, np.full((1, scores.shape[1]), np.nan)])
    return np.asarray(aggregates.lobo_ability(padded)[-1], dtype=np.float64)


def _add_health_index(
    bank: dict[str, Any], strata: dict[str, dict[str, Any]], masks: Mapping[str, BoolArray]
) -> None:
    """Two-dimension BHI over the strata (S_Disc, S_AS); the bank's is their item-weighted
    mean."""
    names = [
        n for n, s in strata.items() if all(s[k].value is not None for k in ("edr", "rcv", "s_as"))
    ]
    if len(names) < 2:
        for s in strata.values():
            s["bhi"] = Figure.missing("needs two strata with EDR, RCV and S_AS")
        bank["bhi"] = Figure.missing("needs two strata with EDR, RCV and S_AS")
        return
    edr = np.array([strata[n]["edr"].value for n in names], dtype=np.float64)
    rcv = np.array([strata[n]["rcv"].value for n in names], dtype=np.float64)
    s_as = np.array([strata[n]["s_as"].value for n in names], dtype=np.float64)
    s_disc = aggregates.discrimination_dimension(edr, rcv, weights=PUBLISHED_SDM_WEIGHTS)
    index = aggregates.health_index(
        np.column_stack([s_disc, s_as]), np.asarray(aggregates.PRIVATE_BANK_BHI_WEIGHTS)
    )
    weights = []
    for name, value in zip(names, index, strict=True):
        strata[name]["bhi"] = Figure.of(float(value), len(names))
        weights.append(float(masks[name].sum()))
    for name, s in strata.items():
        if name not in names:
            s["bhi"] = Figure.missing("needs EDR, RCV and S_AS")
    bank["bhi"] = Figure.of(float(np.average(index, weights=weights)), len(names))


# --------------------------------------------------------------------------- JSON


def _figure_json(figure: Figure) -> float | None:
    return figure.value


def _figures_dict(stratum: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    missing: dict[str, str] = {}
    counts: dict[str, int] = {}
    for key in FIGURES:
        figure = stratum[key]
        out[key] = figure.value
        counts[key] = figure.n
        if figure.reason is not None:
            missing[key] = figure.reason
    out["n_items"] = stratum["n_items"]
    out["n_models"] = stratum["n_models"]
    out["n"] = counts
    out["missing"] = missing
    out["by_difficulty"] = stratum["by_difficulty"]
    return out


def _json_list(values: FloatArray, n: int) -> list[float | None]:
    """``values`` rounded to 6 decimals, None where not finite (all None if empty)."""
    if values.size == 0:
        return [None] * n
    rounded = np.round(values, 6).tolist()
    finite = np.isfinite(values).tolist()
    return [v if ok else None for v, ok in zip(rounded, finite, strict=True)]


def _items_dict(
    item_ids: Sequence[str],
    stats: ItemStatistics,
    flagged: Mapping[str, tuple[str, ...]],
    shown: IntArray,
) -> dict[str, dict[str, Any]]:
    n_items = shown.size
    p, difficulty, cas, cas_kfold, cad, separation, pb, low, high, rho, irt_a, irt_b = (
        _json_list(values[shown] if values.size else values, n_items)
        for values in (
            stats.p,
            stats.difficulty,
            stats.cas,
            stats.cas_kfold,
            stats.cad,
            stats.separation,
            stats.point_biserial,
            stats.point_biserial_low,
            stats.point_biserial_high,
            stats.spearman,
            stats.irt_a,
            stats.irt_b,
        )
    )
    n, inversions, pairs = (a[shown].tolist() for a in (stats.n, stats.inversions, stats.pairs))
    return {
        item_id: {
            "p": p[i],
            "difficulty": difficulty[i],
            "discrimination": {
                "point_biserial": pb[i],
                "interval": [low[i], high[i]],
                "spearman": rho[i],
            },
            "cas": cas[i],
            "cas_kfold": cas_kfold[i],
            "inversions": inversions[i],
            "pairs": pairs[i],
            "cad": cad[i],
            "separation": separation[i],
            "irt": {"a": irt_a[i], "b": irt_b[i]},
            "n": n[i],
            "flags": list(flagged.get(item_id, ())),
        }
        for i, item_id in enumerate(item_ids[k] for k in shown.tolist())
    }


def _subsets(
    data: Responses, stats: ItemStatistics, options: HealthOptions, *, full_stability: Figure
) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, ...]]]:
    """Each rule's subset against the full bank, and its members; the full bank's
    stability on every model is the bank figure already computed (not bootstrapped again
    per rule)."""

    def stability(
        responses: Responses,
        *,
        iterations: int,
        seed: int,
        items: BoolArray | None = None,
    ) -> Figure:
        if responses.n_models == data.n_models and (items is None or bool(np.all(items))):
            return full_stability
        return rank_stability(
            responses,
            iterations=iterations,
            seed=seed,
            items=items,
            min_models=options.minimums.models_per_stratum,
        )

    out: dict[str, dict[str, Any]] = {}
    members: dict[str, tuple[str, ...]] = {}
    for rule in options.subsets:
        mask = select_subset(stats, rule)
        members[str(rule)] = tuple(data.item_ids[i] for i in np.flatnonzero(mask).tolist())
        evaluation = evaluate_subset(
            data,
            mask,
            discriminability=aggregates.discriminability,
            stability=stability,
            iterations=options.stability_iterations,
            seed=options.seed,
            minimums=options.minimums,
        )
        out[str(rule)] = evaluation.to_dict()
    return out, members
