"""The leaderboard as JSON (the API, ``proctor leaderboard --json``) and as CSV rows.

A row is a dict of named *fields* (``server.config.LEADERBOARD_FIELDS``); what vendors see
is the configured public subset, everyone else sees all of them. The same subset decides
the board-level parts: ``disciplines`` opens the per-discipline view, ``baselines`` and
``diagnostics`` the options of those names (``Visibility``). The API's responses are the
typed models at the end of this module, built only from the visible fields (unknown keys
are refused), so nothing outside the subset can reach a vendor by another view or option.
Every score travels with its interval and its tie group, never alone.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from judge.contamination.generalisation_gap import ModelGap
from judge.contamination.replay import ReplayRate
from judge.panel import PanelRule
from judge.ranking.leaderboard import LeaderboardRow
from judge.ranking.stability import ModelSummary
from server.api.bodies import RequestBody
from server.errors import Forbidden
from server.leaderboard.service import LeaderboardData


def _num(value: float | None, digits: int = 4) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _summary(summary: ModelSummary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "mean": _num(summary.mean),
        "ci_low": _num(summary.confidence_interval.low),
        "ci_high": _num(summary.confidence_interval.high),
        "variance": _num(summary.variance),
        "standard_error": _num(summary.standard_error),
        "session_values": [_num(v) for v in summary.session_values],
    }


def _replay(rate: ReplayRate | None) -> dict[str, Any] | None:
    if rate is None:
        return None
    return {
        "items": rate.n,
        "near_exact": rate.near_exact,
        "rate": _num(rate.rate),
        "ci_low": _num(rate.ci_low),
        "ci_high": _num(rate.ci_high),
    }


def _gap(gap: ModelGap | None) -> dict[str, Any] | None:
    if gap is None:
        return None
    return {
        "public": _num(gap.public.mean),
        "anchor_set": _num(gap.anchor.mean),
        "gap": _num(gap.gap),
        "excess": _num(gap.excess),
        "flagged": gap.flagged,
        "reported_score": _num(gap.reported_score),
    }


def row_fields(row: LeaderboardRow, data: LeaderboardData) -> dict[str, Any]:
    """Every field of one leaderboard row."""
    gaps = {g.model: g for g in data.contamination.gap.models} if data.contamination.gap else {}
    usage = row.usage
    return {
        "model_id": row.extra.get("model_id"),
        "position": row.position,
        "group": row.group,
        "rank_range": list(row.rank_range),
        "beats_next": _num(row.beats_next),
        "name": row.name,
        "family": row.extra.get("family"),
        "organisation": row.extra.get("organisation"),
        "absolute": _summary(row.absolute),
        "relative": _summary(row.relative),
        "sessions": len(row.absolute.session_values),
        "adaptive_sessions": row.estimated_sessions,
        "disciplines": {
            d: {
                "score": _num(s.score),
                "standard_error": _num(s.standard_error),
                "items": s.n_items,
            }
            for d, s in row.disciplines.items()
        },
        "latency": {
            "median_s": _num(usage.latency_median_s),
            "p95_s": _num(usage.latency_p95_s),
            "reported_median_s": _num(usage.reported_latency_median_s),
            "reported_n": usage.n_reported_latency,
        },
        "cost": {
            "prompt_tokens_per_item": _num(usage.prompt_tokens_per_item, 1),
            "completion_tokens_per_item": _num(usage.completion_tokens_per_item, 1),
            "usd_per_1k_items": _num(usage.usd_per_1k_items),
        },
        "contamination": {
            "replay": _replay(data.contamination.replay.get(row.key)),
            "generalisation_gap": _gap(gaps.get(row.key)),
        },
        "under_review": row.extra.get("sessions_under_review", 0),
    }


def leaderboard_json(
    data: LeaderboardData, *, fields: Collection[str] | None = None
) -> dict[str, Any]:
    """The per-model view; ``fields`` limits the rows to those fields (None: all).

    ``model_id`` is always present: it is what every other route takes."""
    board = data.board
    names = {row.key: row.name for row in board.rows}
    rows = []
    for row in board.rows:
        everything = row_fields(row, data)
        rows.append(
            {
                k: v
                for k, v in everything.items()
                if k == "model_id" or fields is None or k in fields
            }
        )
    return {
        **_judging(data),
        "anchor": {
            "model_id": board.anchor,
            "name": names.get(board.anchor) if board.anchor else None,
            "designated": board.anchor_designated,
            "note": board.anchor_note,
        },
        "confidence_level": board.confidence_level,
        "tie_threshold": board.threshold,
        "groups": [[names[k] for k in group] for group in board.groups],
        "models": rows,
        **({"baselines": _baselines(data)} if data.baselines is not None else {}),
        **({"diagnostics": diagnostics_json(data)} if data.diagnostics else {}),
    }


def _judging(data: LeaderboardData) -> dict[str, Any]:
    """Who scored: the default judge, the panel and its rule, and the default judge's
    agreement with people on the current calibration set (kappa with its interval)."""
    judges = data.judges
    view = data.calibration
    figures = view.run if view is not None else None
    return {
        "judge": judges.default,
        "judges": list(judges.every_judge),
        "panel_rule": judges.rule.value,
        "prompt_version": data.prompt_version,
        "judge_calibration": None
        if view is None or figures is None
        else {
            "calibration_set": view.set_name,
            "set_version": view.set_version,
            "n": figures.n,
            "weighted_kappa": _num(figures.weighted_kappa),
            "weighted_ci_low": _num(figures.weighted_low),
            "weighted_ci_high": _num(figures.weighted_high),
            "kappa": _num(figures.kappa),
            "kappa_ci_low": _num(figures.kappa_low),
            "kappa_ci_high": _num(figures.kappa_high),
        },
    }


def diagnostics_json(data: LeaderboardData, *, by_id: bool = False) -> dict[str, Any] | None:
    """Anisotropy index, RSA and capability inconsistency per model name (``by_id``: per
    model id); a statistic that could not be computed is null, with its reason in
    ``unavailable`` (statistic -> reason)."""
    found = data.diagnostics
    if found is None:
        return None
    names = {row.key: row.key if by_id else row.name for row in data.board.rows}
    rsa, inconsistency = found.rsa, found.inconsistency
    return {
        "models": [names[k] for k in found.models],
        "anisotropy_index": _num(found.anisotropy.index) if found.anisotropy else None,
        "rsa": {names[k]: r.amplitude for k, r in rsa.items()} if rsa is not None else None,
        "capability_inconsistency": (
            {names[k]: _num(v) for k, v in inconsistency.values.items()}
            if inconsistency is not None
            else None
        ),
        "unavailable": dict(found.unavailable),
    }


def _baselines(data: LeaderboardData) -> dict[str, Any]:
    """Elo and Bradley-Terry per model, in leaderboard order."""
    base = data.baselines
    assert base is not None
    rows = []
    for row in data.board.rows:
        elo = base.elo.ratings.get(row.key) if base.elo else None
        bt = base.bradley_terry.log_strengths.get(row.key) if base.bradley_terry else None
        rows.append(
            {
                "model_id": row.key,
                "name": row.name,
                "elo": _num(elo, 1),
                "bt_log_strength": _num(bt),
            }
        )
    return {"n_comparisons": base.n_comparisons, "note": base.note, "models": rows}


def disciplines_json(data: LeaderboardData) -> dict[str, Any]:
    """The per-discipline view: for every discipline the models best first, with the
    standard error of each score (10-point scale)."""
    out = []
    for discipline in data.board.disciplines:
        ranked = sorted(
            (
                (row.disciplines[discipline], row)
                for row in data.board.rows
                if discipline in row.disciplines
            ),
            key=lambda pair: -pair[0].score,
        )
        out.append(
            {
                "discipline": discipline,
                "models": [
                    {
                        "model_id": row.extra.get("model_id"),
                        "name": row.name,
                        "score": _num(score.score),
                        "standard_error": _num(score.standard_error),
                        "items": score.n_items,
                    }
                    for score, row in ranked
                ],
            }
        )
    return {
        **_judging(data),
        "scale": 10,
        "disciplines": out,
    }


CSV_COLUMNS: tuple[str, ...] = (
    "position",
    "group",
    "rank_low",
    "rank_high",
    "model_id",
    "name",
    "organisation",
    "sessions",
    "relative",
    "relative_ci_low",
    "relative_ci_high",
    "absolute",
    "absolute_ci_low",
    "absolute_ci_high",
    "absolute_variance",
    "latency_median_s",
    "latency_p95_s",
    "usd_per_1k_items",
)


def csv_rows(data: LeaderboardData) -> list[dict[str, Any]]:
    """One flat dict per model: ``CSV_COLUMNS`` then one column per discipline."""
    out = []
    for row in data.board.rows:
        values: dict[str, Any] = {
            "position": row.position,
            "group": row.group,
            "rank_low": row.rank_range[0],
            "rank_high": row.rank_range[1],
            "model_id": row.extra.get("model_id"),
            "name": row.name,
            "organisation": row.extra.get("organisation"),
            "sessions": len(row.absolute.session_values),
            "relative": _num(row.relative.mean) if row.relative else None,
            "relative_ci_low": _num(row.relative.confidence_interval.low) if row.relative else None,
            "relative_ci_high": (
                _num(row.relative.confidence_interval.high) if row.relative else None
            ),
            "absolute": _num(row.absolute.mean),
            "absolute_ci_low": _num(row.absolute.confidence_interval.low),
            "absolute_ci_high": _num(row.absolute.confidence_interval.high),
            "absolute_variance": _num(row.absolute.variance),
            "latency_median_s": _num(row.usage.latency_median_s),
            "latency_p95_s": _num(row.usage.latency_p95_s),
            "usd_per_1k_items": _num(row.usage.usd_per_1k_items),
        }
        for discipline in data.board.disciplines:
            score = row.disciplines.get(discipline)
            values[discipline] = _num(score.score) if score else None
        out.append(values)
    return out


class AnchorIn(RequestBody):
    """``model_id`` of the new anchor; null returns to "the top model"."""

    model_id: uuid.UUID | None


class AnchorOut(BaseModel):
    id: int
    model_id: uuid.UUID | None
    set_by: str
    set_at: datetime


# --------------------------------------------------------------------------- #
# Who sees what
# --------------------------------------------------------------------------- #


class LeaderboardView(StrEnum):
    """What ``GET /v1/leaderboard`` lists: one row per model, or models per discipline."""

    MODELS = "models"
    DISCIPLINES = "disciplines"


@dataclass(frozen=True, slots=True)
class Visibility:
    """The leaderboard fields one reader may see (``fields`` None: every field)."""

    fields: frozenset[str] | None

    def shows(self, name: str) -> bool:
        return self.fields is None or name in self.fields

    def refuse_hidden(self, *, view: LeaderboardView, baselines: bool, diagnostics: bool) -> None:
        """``Forbidden`` if the request asks for a part this reader may not see."""
        asked = {
            "disciplines": view is LeaderboardView.DISCIPLINES,
            "baselines": baselines,
            "diagnostics": diagnostics,
        }
        hidden = sorted(name for name, wanted in asked.items() if wanted and not self.shows(name))
        if hidden:
            raise Forbidden(
                f"not a public leaderboard field for your role: {', '.join(hidden)} "
                "(PROCTOR_LEADERBOARD_PUBLIC_FIELDS)"
            )


# --------------------------------------------------------------------------- #
# Response models
# --------------------------------------------------------------------------- #


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class SummaryOut(_Out):
    """A score over a model's sessions: mean, bootstrap 95% interval, variance."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    variance: float | None
    standard_error: float | None
    session_values: list[float | None]


class DisciplineScoreOut(_Out):
    score: float | None
    """10-point scale: pooled over the model's fixed sessions, combined with its adaptive
    sessions' estimates by inverse-variance weighting."""
    standard_error: float | None
    items: int


class LatencyOut(_Out):
    """Seconds from delivering an item to receiving its answer (the server's clock, the
    client's overhead included), and the model's own latency as clients reported it."""

    median_s: float | None
    p95_s: float | None
    reported_median_s: float | None = None
    """The median of the model latencies clients reported (``AnswerIn.model_latency_s``);
    null when none did."""
    reported_n: int = 0
    """How many answers carried a reported latency."""


class CostOut(_Out):
    prompt_tokens_per_item: float | None
    completion_tokens_per_item: float | None
    usd_per_1k_items: float | None


class ReplayOut(_Out):
    items: int
    near_exact: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None


class GapOut(_Out):
    public: float | None
    anchor_set: float | None
    gap: float | None
    excess: float | None
    flagged: bool
    reported_score: float | None


class ContaminationOut(_Out):
    replay: ReplayOut | None
    generalisation_gap: GapOut | None


class RowOut(_Out):
    """One model; only the fields visible to the reader are present."""

    model_id: str | None
    position: int | None = None
    group: int | None = None
    rank_range: list[int] | None = None
    beats_next: float | None = None
    name: str | None = None
    family: str | None = None
    organisation: str | None = None
    absolute: SummaryOut | None = None
    relative: SummaryOut | None = None
    sessions: int | None = None
    """Sessions the score counts: fixed ones by their items, adaptive ones by their
    estimates."""
    adaptive_sessions: int | None = None
    """How many of ``sessions`` are adaptive (counted by their estimates)."""
    disciplines: dict[str, DisciplineScoreOut] | None = None
    latency: LatencyOut | None = None
    cost: CostOut | None = None
    contamination: ContaminationOut | None = None
    under_review: int | None = None
    """Scored sessions of the model with open human reviews: they could still change its
    score (staff only)."""


class AnchorInfoOut(_Out):
    model_id: str | None
    name: str | None
    designated: bool
    note: str | None


class BaselineRowOut(_Out):
    model_id: str
    name: str | None
    elo: float | None
    bt_log_strength: float | None


class BaselinesOut(_Out):
    n_comparisons: int
    note: str | None
    models: list[BaselineRowOut]


class DiagnosticsOut(_Out):
    """ReLE's capability diagnostics; a statistic that could not be computed is null, with
    its reason in ``unavailable``."""

    models: list[str]
    anisotropy_index: float | None
    rsa: dict[str, float | None] | None
    capability_inconsistency: dict[str, float | None] | None
    unavailable: dict[str, str] = {}


class JudgeCalibrationOut(_Out):
    """The default judge's agreement with human scores on the calibration set: Cohen's
    kappa and its quadratic-weighted form with 95% bootstrap intervals (clustered by item
    family)."""

    calibration_set: str
    set_version: int
    n: int
    weighted_kappa: float | None
    weighted_ci_low: float | None
    weighted_ci_high: float | None
    kappa: float | None
    kappa_ci_low: float | None
    kappa_ci_high: float | None


class LeaderboardOut(_Out):
    """The per-model view."""

    judge: str
    """The default judge."""
    judges: list[str]
    """Every judge whose verdicts count (several: a panel)."""
    panel_rule: PanelRule
    prompt_version: str
    judge_calibration: JudgeCalibrationOut | None
    """None: the judge has no calibration on a calibration set."""
    anchor: AnchorInfoOut
    confidence_level: float
    tie_threshold: float
    groups: list[list[str]]
    models: list[RowOut]
    baselines: BaselinesOut | None = None
    diagnostics: DiagnosticsOut | None = None


class DisciplineModelOut(_Out):
    model_id: str | None
    name: str | None
    score: float | None
    standard_error: float | None
    items: int


class DisciplineBoardOut(_Out):
    discipline: str
    models: list[DisciplineModelOut]


class DisciplinesOut(_Out):
    """The per-discipline view."""

    judge: str
    judges: list[str]
    panel_rule: PanelRule
    judge_calibration: JudgeCalibrationOut | None
    prompt_version: str
    scale: int
    disciplines: list[DisciplineBoardOut]


def leaderboard_out(data: LeaderboardData, visibility: Visibility) -> LeaderboardOut:
    """The per-model view with only the fields ``visibility`` shows."""
    document = leaderboard_json(data, fields=visibility.fields)
    for part in ("baselines", "diagnostics"):
        if not visibility.shows(part):
            document.pop(part, None)
    if not visibility.shows("name"):  # board-level parts name models too
        document["anchor"]["name"] = None
        document["groups"] = [list(group) for group in data.board.groups]
        for row in document.get("baselines", {}).get("models", []):
            row["name"] = None
        if document.get("diagnostics"):
            document["diagnostics"] = diagnostics_json(data, by_id=True)
    return LeaderboardOut.model_validate(document)


def disciplines_out(data: LeaderboardData, visibility: Visibility) -> DisciplinesOut:
    """The per-discipline view (``Forbidden`` unless ``disciplines`` is visible)."""
    visibility.refuse_hidden(view=LeaderboardView.DISCIPLINES, baselines=False, diagnostics=False)
    document = disciplines_json(data)
    if not visibility.shows("name"):
        for block in document["disciplines"]:
            for model in block["models"]:
                model["name"] = None
    return DisciplinesOut.model_validate(document)
