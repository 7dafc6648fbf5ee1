"""The leaderboard's fields: the one list of what a row, and the board around it, may show.

Every field is declared here and nowhere else in the server: its name
(``LeaderboardField``, the vocabulary of ``PROCTOR_LEADERBOARD_PUBLIC_FIELDS``), who sees
it (``STAFF_ONLY_FIELDS``: vendors see the others unless the operator lists otherwise;
admins, evaluators and auditors see every field), its JSON type (``RowOut`` and its parts,
what ``GET /v1/leaderboard`` documents in OpenAPI), its value (``row_fields``) and the CSV
columns that show it (``CSV``). What a reader sees is a ``Visibility``: the rows carry only
its fields, and the board-level parts ``disciplines`` (the per-discipline view),
``baselines`` and ``diagnostics`` (the options of those names) are refused outside it.

``RowOut`` spells the row fields a second time, typed (the console reads its attributes),
in the order of ``ROW_FIELDS``; the tests hold the two equal, and hold the SDK's
standalone ``clients.sdk.types.LeaderboardRow`` equal to ``RowOut``. The settings read the
vocabulary, so this module imports nothing of the leaderboard's computation, the
sessions or the scoring (a contract in pyproject.toml keeps it so).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from server.auth.permissions import Permission, Principal
from server.errors import Forbidden

if TYPE_CHECKING:
    from judge.contamination.generalisation_gap import ModelGap
    from judge.contamination.replay import ReplayRate
    from judge.ranking.leaderboard import LeaderboardRow
    from judge.ranking.stability import ModelSummary

# --------------------------------------------------------------------------- #
# Names and who sees them
# --------------------------------------------------------------------------- #

LeaderboardField = Literal[
    "position",
    "group",
    "rank_range",
    "beats_next",
    "name",
    "family",
    "organisation",
    "absolute",
    "relative",
    "sessions",
    "adaptive_sessions",
    "disciplines",
    "latency",
    "cost",
    "contamination",
    "under_review",
    "baselines",
    "diagnostics",
]
"""Row fields, then board-level parts: ``disciplines`` also opens ``?view=disciplines``;
``baselines`` and ``diagnostics`` open the options of the same names."""
LEADERBOARD_FIELDS: tuple[LeaderboardField, ...] = get_args(LeaderboardField)
BOARD_PARTS: frozenset[LeaderboardField] = frozenset({"baselines", "diagnostics"})
"""The fields that are parts of the board, not of a row."""
ROW_FIELDS: tuple[LeaderboardField, ...] = tuple(
    name for name in LEADERBOARD_FIELDS if name not in BOARD_PARTS
)
"""The fields of a row, in order; every row also has ``model_id``, whoever reads it."""
STAFF_ONLY_FIELDS: frozenset[LeaderboardField] = frozenset(
    {
        "organisation",
        "latency",
        "cost",
        "contamination",
        "under_review",
        "baselines",
        "diagnostics",
    }
)
"""Fields vendors do not see unless the operator lists them in
``PROCTOR_LEADERBOARD_PUBLIC_FIELDS``."""
DEFAULT_PUBLIC_FIELDS: tuple[LeaderboardField, ...] = tuple(
    name for name in LEADERBOARD_FIELDS if name not in STAFF_ONLY_FIELDS
)


class LeaderboardView(StrEnum):
    """What ``GET /v1/leaderboard`` lists: one row per model, or models per discipline."""

    MODELS = "models"
    DISCIPLINES = "disciplines"


@dataclass(frozen=True, slots=True)
class Visibility:
    """The leaderboard fields one reader may see (``fields`` None: every field)."""

    fields: frozenset[str] | None

    @classmethod
    def of(cls, principal: Principal, public: Collection[str]) -> Visibility:
        """Every field for a reader with ``LEADERBOARD_FULL`` (admins, evaluators,
        auditors), else the ``public`` ones (``PROCTOR_LEADERBOARD_PUBLIC_FIELDS``)."""
        if principal.can(Permission.LEADERBOARD_FULL):
            return cls(None)
        return cls(frozenset(public))

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
# The row as JSON: its type
# --------------------------------------------------------------------------- #


class StrictOut(BaseModel):
    """A leaderboard response body: unknown keys are refused, so only what the builder
    put in, under the reader's ``Visibility``, can reach the reader."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class SummaryOut(StrictOut):
    """A score over a model's sessions: mean, bootstrap 95% interval, variance."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    variance: float | None
    standard_error: float | None
    session_values: list[float | None]


class DisciplineScoreOut(StrictOut):
    score: float | None
    """10-point scale: pooled over the model's fixed sessions, combined with its adaptive
    sessions' estimates by inverse-variance weighting."""
    standard_error: float | None
    items: int


class LatencyOut(StrictOut):
    """Seconds from delivering an item to receiving its answer (the server's clock, the
    client's overhead included), and the model's own latency as clients reported it."""

    median_s: float | None
    p95_s: float | None
    reported_median_s: float | None = None
    """The median of the model latencies clients reported (``AnswerIn.model_latency_s``);
    null when none did."""
    reported_n: int = 0
    """How many answers carried a reported latency."""


class CostOut(StrictOut):
    prompt_tokens_per_item: float | None
    completion_tokens_per_item: float | None
    usd_per_1k_items: float | None


class ReplayOut(StrictOut):
    items: int
    near_exact: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None


class GapOut(StrictOut):
    public: float | None
    anchor_set: float | None
    gap: float | None
    excess: float | None
    flagged: bool
    reported_score: float | None


class ContaminationOut(StrictOut):
    replay: ReplayOut | None
    generalisation_gap: GapOut | None


class RowOut(StrictOut):
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


# --------------------------------------------------------------------------- #
# The row as JSON: its values
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the registry and the review queue say of one model on the board: the fields
    of its row that are not statistics."""

    family: str | None
    organisation: str
    sessions_under_review: int = 0
    """Its scored sessions with open reviews: their score may still change."""


def rounded(value: float | None, digits: int = 4) -> float | None:
    """A figure as the leaderboard sends it: ``digits`` decimals; None for a missing,
    NaN or infinite one."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _summary(summary: ModelSummary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "mean": rounded(summary.mean),
        "ci_low": rounded(summary.confidence_interval.low),
        "ci_high": rounded(summary.confidence_interval.high),
        "variance": rounded(summary.variance),
        "standard_error": rounded(summary.standard_error),
        "session_values": [rounded(v) for v in summary.session_values],
    }


def replay_json(rate: ReplayRate | None) -> dict[str, Any] | None:
    """The ``replay`` part of the ``contamination`` field (``ReplayOut``)."""
    if rate is None:
        return None
    return {
        "items": rate.n,
        "near_exact": rate.near_exact,
        "rate": rounded(rate.rate),
        "ci_low": rounded(rate.ci_low),
        "ci_high": rounded(rate.ci_high),
    }


def _gap(gap: ModelGap | None) -> dict[str, Any] | None:
    if gap is None:
        return None
    return {
        "public": rounded(gap.public.mean),
        "anchor_set": rounded(gap.anchor.mean),
        "gap": rounded(gap.gap),
        "excess": rounded(gap.excess),
        "flagged": gap.flagged,
        "reported_score": rounded(gap.reported_score),
    }


def row_fields(
    row: LeaderboardRow, *, model: ModelInfo, replay: ReplayRate | None, gap: ModelGap | None
) -> dict[str, Any]:
    """Every field of one leaderboard row, ``model_id`` first, then ``ROW_FIELDS``: the
    statistics from the board's ``row``, the rest from the ``model``'s registry facts and
    its contamination checks (``replay``, ``gap``; None: not measured)."""
    usage = row.usage
    return {
        "model_id": row.key,
        "position": row.position,
        "group": row.group,
        "rank_range": list(row.rank_range),
        "beats_next": rounded(row.beats_next),
        "name": row.name,
        "family": model.family,
        "organisation": model.organisation,
        "absolute": _summary(row.absolute),
        "relative": _summary(row.relative),
        "sessions": len(row.absolute.session_values),
        "adaptive_sessions": row.estimated_sessions,
        "disciplines": {
            d: {
                "score": rounded(s.score),
                "standard_error": rounded(s.standard_error),
                "items": s.n_items,
            }
            for d, s in row.disciplines.items()
        },
        "latency": {
            "median_s": rounded(usage.latency_median_s),
            "p95_s": rounded(usage.latency_p95_s),
            "reported_median_s": rounded(usage.reported_latency_median_s),
            "reported_n": usage.n_reported_latency,
        },
        "cost": {
            "prompt_tokens_per_item": rounded(usage.prompt_tokens_per_item, 1),
            "completion_tokens_per_item": rounded(usage.completion_tokens_per_item, 1),
            "usd_per_1k_items": rounded(usage.usd_per_1k_items),
        },
        "contamination": {
            "replay": replay_json(replay),
            "generalisation_gap": _gap(gap),
        },
        "under_review": model.sessions_under_review,
    }


# --------------------------------------------------------------------------- #
# The row as CSV (``proctor leaderboard --csv``, the console's download)
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, slots=True)
class CsvColumn:
    """One column of the leaderboard's CSV: its ``name``, the row ``field`` it shows
    (None: ``model_id``, which every reader sees) and the ``part`` of that field's JSON
    value it holds (None: the value itself)."""

    name: str
    field: LeaderboardField | None
    part: str | int | None = None

    def value(self, fields: Mapping[str, Any]) -> Any:
        """The cell of a row of ``row_fields``."""
        found = fields["model_id" if self.field is None else self.field]
        return found if found is None or self.part is None else found[self.part]


CSV: tuple[CsvColumn, ...] = (
    CsvColumn("position", "position"),
    CsvColumn("group", "group"),
    CsvColumn("rank_low", "rank_range", 0),
    CsvColumn("rank_high", "rank_range", 1),
    CsvColumn("model_id", None),
    CsvColumn("name", "name"),
    CsvColumn("organisation", "organisation"),
    CsvColumn("sessions", "sessions"),
    CsvColumn("relative", "relative", "mean"),
    CsvColumn("relative_ci_low", "relative", "ci_low"),
    CsvColumn("relative_ci_high", "relative", "ci_high"),
    CsvColumn("absolute", "absolute", "mean"),
    CsvColumn("absolute_ci_low", "absolute", "ci_low"),
    CsvColumn("absolute_ci_high", "absolute", "ci_high"),
    CsvColumn("absolute_variance", "absolute", "variance"),
    CsvColumn("latency_median_s", "latency", "median_s"),
    CsvColumn("latency_p95_s", "latency", "p95_s"),
    CsvColumn("usd_per_1k_items", "cost", "usd_per_1k_items"),
)
"""The CSV's columns before the disciplines (one column each, the ``disciplines`` field's
scores)."""
CSV_COLUMNS: tuple[str, ...] = tuple(column.name for column in CSV)


def csv_row(fields: Mapping[str, Any], disciplines: Sequence[str]) -> dict[str, Any]:
    """One row's cells from its ``row_fields``: ``CSV_COLUMNS``, then the score in each of
    ``disciplines`` (None where the model has none)."""
    values = {column.name: column.value(fields) for column in CSV}
    for discipline in disciplines:
        score = fields["disciplines"].get(discipline)
        values[discipline] = score["score"] if score is not None else None
    return values


def csv_columns(visibility: Visibility, disciplines: Sequence[str]) -> list[str]:
    """The CSV columns of the fields ``visibility`` shows (``model_id`` always), then one
    per discipline if ``disciplines`` is visible."""
    columns = [c.name for c in CSV if c.field is None or visibility.shows(c.field)]
    return columns + list(disciplines) if visibility.shows("disciplines") else columns
