"""The calibration report (:func:`agreement_report`) and the judge to use (:func:`default_judge`).

The report compares every judge with the reference rater overall and per model
(:mod:`judge.agreement.kappa`), every pair of raters in how they rank the models
(:mod:`judge.agreement.ranking`), and each judge's family bias (LLMEval-Fair (Zhang et al.) app. L,
table 14): its mean on answers of its own model family minus the mean of all judges on
those answers. :func:`default_judge` picks the judge with the highest kappa
(LLMEval-Fair app. F.2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.agreement.intervals import KappaIntervals, kappa_intervals
from judge.agreement.kappa import RaterAgreement
from judge.agreement.ranking import RankingAgreement, ranking_agreement
from judge.agreement.ratings import Rating, RatingTable
from judge.agreement.resampling import DEFAULT_RESAMPLES
from judge.agreement.scores import NAN, json_record


@dataclass(frozen=True, slots=True)
class FamilyBias:
    """A judge's lean toward its own model family (LLMEval-Fair app. L, table 14).

    ``own_mean`` is the judge's mean score over the ``n`` answers it scored that were
    written by models of ``family``; ``all_judge_mean`` the mean of every score that the
    non-reference raters (the judges, this one included) gave those answers;
    ``delta = own_mean - all_judge_mean``. NaN when ``n`` is 0.
    """

    family: str
    own_mean: float
    all_judge_mean: float
    delta: float
    n: int

    def to_json(self) -> dict[str, Any]:
        """``{"family", "own_mean", "all_judge_mean", "delta", "n"}``."""
        return json_record(self)


@dataclass(frozen=True, slots=True)
class AgreementIntervals:
    """Plain and quadratic-weighted kappa against the reference with bootstrap 95%
    intervals (``judge.agreement.intervals``; every answer its own cluster, as the file
    names no item family): per rater, per model and per model family, each rater."""

    raters: dict[str, KappaIntervals]
    models: dict[str, dict[str, KappaIntervals]]
    families: dict[str, dict[str, KappaIntervals]]

    def to_json(self) -> dict[str, Any]:
        """``{"raters": {rater: {"plain", "weighted"}}, "models": {model: {rater: ...}},
        "families": {family: {rater: ...}}}``."""
        return {
            "raters": {name: value.to_json() for name, value in self.raters.items()},
            "models": _nested_json(self.models),
            "families": _nested_json(self.families),
        }


def _nested_json(groups: dict[str, dict[str, KappaIntervals]]) -> dict[str, Any]:
    return {
        group: {name: value.to_json() for name, value in per_rater.items()}
        for group, per_rater in groups.items()
    }


@dataclass(frozen=True, slots=True)
class AgreementReport:
    """Calibration of judges against a reference rater (see `agreement_report`)."""

    reference: str
    raters: dict[str, RaterAgreement]
    """Each non-reference rater against the reference over the answers both scored."""
    models: dict[str, dict[str, RaterAgreement]]
    """model -> non-reference rater -> agreement with the reference on that model's answers."""
    ranking_agreement: dict[str, RankingAgreement]
    """``"A vs B"`` (A < B) -> rank correlation of their per-model means."""
    family_bias: dict[str, FamilyBias]
    """rater -> its own-family mean minus the all-judge mean."""
    intervals: AgreementIntervals
    """The kappas with their intervals, per rater, model and model family."""

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data; NaN becomes ``None``.

        Shape: ``{"reference": str, "raters": {name: {...}}, "models": {model: {rater:
        {...}}}, "ranking_agreement": {"A vs B": {...}}, "family_bias": {rater: {...}},
        "intervals": {"raters", "models", "families"}}``.
        """
        return {
            "reference": self.reference,
            "raters": {name: result.to_json() for name, result in self.raters.items()},
            "models": {
                model: {name: result.to_json() for name, result in per_rater.items()}
                for model, per_rater in self.models.items()
            },
            "ranking_agreement": {
                pair: result.to_json() for pair, result in self.ranking_agreement.items()
            },
            "family_bias": {name: bias.to_json() for name, bias in self.family_bias.items()},
            "intervals": self.intervals.to_json(),
        }


def agreement_report(
    ratings: Sequence[Rating],
    *,
    reference: str = "human",
    families: Mapping[str, str] | None = None,
    min_models: int = 2,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> AgreementReport:
    """Agreement of every rater with the reference, per model, in ranking and family bias.

    The statistics of LLMEval-Fair §3.4, app. F.2 (kappa against human labels, table 10)
    and app. L (tables 12-14). Every dictionary in the result is sorted by key.

    Parameters
    ----------
    ratings : sequence of Rating
        Scores; a rater scores an answer at most once (identical repeats are ignored).
    reference : str
        The rater the others are compared with, usually human experts.
    families : mapping of str to str, optional
        Rater -> the model family it belongs to (e.g. ``{"gpt-4o": "OpenAI"}``), matched
        against ``Rating.model_family``. Raters not in it get no family-bias entry.
    min_models : int
        A pair of raters gets a ranking agreement only when the answers both scored come
        from at least this many models (at least 2).
    n_resamples : int
        Bootstrap replicates of each interval (seeded: the report is reproducible).

    Returns
    -------
    AgreementReport
        ``raters``: each non-reference rater vs the reference over the answers both
        scored. ``models``: the same per model (answers with a known model).
        ``ranking_agreement``: for every pair of raters, the reference included, keyed
        ``"A vs B"`` with A < B, the rank correlation of the two raters' mean scores per
        model over the answers both scored. ``family_bias``: see `FamilyBias`.

    Raises
    ------
    ValueError
        The reference scored nothing, a score is not 0-3, a rater scored an answer twice
        with different scores, two ratings of an answer name different models or model
        families, or ``min_models`` < 2.
    """
    if min_models < 2:
        raise ValueError(f"min_models must be at least 2, got {min_models}")
    table = RatingTable.build(ratings)
    if reference not in table.scores:
        raise ValueError(
            f"the reference rater {reference!r} scored no answer"
            f" (raters: {', '.join(sorted(table.scores)) or 'none'})"
        )
    judges = sorted(r for r in table.scores if r != reference)

    raters = {judge: table.agreement(reference, judge) for judge in judges}

    model_names = sorted({m for m in table.model.values() if m is not None})
    models = {
        model: {judge: table.agreement(reference, judge, model=model) for judge in judges}
        for model in model_names
    }

    rankings: dict[str, RankingAgreement] = {}
    everyone = sorted(table.scores)
    for i, first in enumerate(everyone):
        for second in everyone[i + 1 :]:
            per_model = table.model_means(first, second)
            if len(per_model) >= min_models:
                means_a = [a for a, _ in per_model.values()]
                means_b = [b for _, b in per_model.values()]
                rankings[f"{first} vs {second}"] = ranking_agreement(means_a, means_b)

    family_bias: dict[str, FamilyBias] = {}
    for judge in judges:
        family = (families or {}).get(judge)
        if family is None:
            continue
        own_answers = [a for a in table.scores[judge] if table.family.get(a) == family]
        if not own_answers:
            family_bias[judge] = FamilyBias(family, NAN, NAN, NAN, 0)
            continue
        own = [table.scores[judge][a] for a in own_answers]
        pooled = [
            table.scores[other][a]
            for other in judges
            for a in own_answers
            if a in table.scores[other]
        ]
        own_mean = math.fsum(own) / len(own)
        all_mean = math.fsum(pooled) / len(pooled)
        family_bias[judge] = FamilyBias(
            family, own_mean, all_mean, own_mean - all_mean, len(own_answers)
        )

    intervals = _intervals(table, reference, judges, n_resamples)
    return AgreementReport(reference, raters, models, rankings, family_bias, intervals)


def _intervals(
    table: RatingTable, reference: str, judges: list[str], n_resamples: int
) -> AgreementIntervals:
    """Kappa intervals of every judge against ``reference``: overall, per model, per
    model family (groups where the two share no answer are left out)."""

    def of(judge: str, **group: str) -> KappaIntervals | None:
        ours, theirs = table.paired(reference, judge, **group)
        if not ours:
            return None
        return kappa_intervals(ours, theirs, n_resamples=n_resamples, rng=0)

    def grouped(field: str, names: list[str]) -> dict[str, dict[str, KappaIntervals]]:
        out: dict[str, dict[str, KappaIntervals]] = {}
        for name in names:
            found = {j: v for j in judges if (v := of(j, **{field: name})) is not None}
            if found:
                out[name] = found
        return out

    overall = {j: v for j in judges if (v := of(j)) is not None}
    model_names = sorted({m for m in table.model.values() if m is not None})
    family_names = sorted({f for f in table.family.values() if f is not None})
    return AgreementIntervals(
        overall, grouped("model", model_names), grouped("family", family_names)
    )


def default_judge(results: Mapping[str, RaterAgreement], *, min_n: int = 100) -> str | None:
    """The judge to use: the highest kappa against the reference (LLMEval-Fair app. F.2).

    Parameters
    ----------
    results : mapping of str to RaterAgreement
        Usually ``AgreementReport.raters``.
    min_n : int
        Only raters compared on at least this many answers qualify.

    Returns
    -------
    str or None
        The qualifying rater with the highest ``kappa``; ties go to the higher
        ``weighted_kappa`` (NaN counts as lowest), then to the name that sorts first.
        ``None`` when no rater has ``n >= min_n`` and a defined kappa.
    """
    candidates = [
        (name, result)
        for name, result in results.items()
        if result.n >= min_n and not math.isnan(result.kappa)
    ]
    if not candidates:
        return None

    def key(item: tuple[str, RaterAgreement]) -> tuple[float, float, str]:
        name, result = item
        weighted = -math.inf if math.isnan(result.weighted_kappa) else result.weighted_kappa
        return (-result.kappa, -weighted, name)

    return min(candidates, key=key)[0]
