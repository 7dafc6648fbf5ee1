"""Bodies of the scoring routes: counts only, never per-item verdicts."""

from __future__ import annotations

import math
import uuid

from pydantic import BaseModel

from server.scoring.panel_agreement import PanelAgreement
from server.sessions.states import SessionState


class ScoringOut(BaseModel):
    session_id: uuid.UUID
    state: SessionState
    judge: str
    """The default judge (or the one asked for)."""
    judges: list[str]
    """Every judge whose verdicts count (several: a panel)."""
    prompt_version: str
    answers: int
    judged: int
    """Answers the scoring is done with: scored, or left to a human reviewer."""
    waiting: int
    """Answers queued or being scored."""
    scored: int | None
    """Answers with a score; null until the session is scored (except for platform roles):
    with ``judged`` it would give the review count, which moves with single verdicts."""
    needs_review: int | None
    """Answers left to a human reviewer; null as ``scored``."""
    points: int | None
    """Sum of the 0-3 scores; null until the session is scored (except for platform roles),
    since its change after one answer would say whether that answer was right."""


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


class JudgePairOut(BaseModel):
    first: str
    second: str
    pearson_r: float | None
    """Null with fewer than two shared answers, or when a judge gave them all one score."""
    exact: float | None
    n: int


class PanelAgreementOut(BaseModel):
    """Item-level agreement of the judges on the answers several of them scored (ReLE
    §3.2): Pearson r and exact agreement per pair, their means, and the answers whose
    judges differ by ``min_gap`` points or more (those go to human review)."""

    prompt_version: str
    answers: int
    split: int
    min_gap: int
    judges: list[str]
    pairs: list[JudgePairOut]
    mean_pearson_r: float | None
    mean_exact: float | None

    @classmethod
    def of(cls, found: PanelAgreement, *, prompt_version: str, min_gap: int) -> PanelAgreementOut:
        agreement = found.agreement
        return cls(
            prompt_version=prompt_version,
            answers=found.answers,
            split=found.split,
            min_gap=min_gap,
            judges=list(agreement.judges),
            pairs=[
                JudgePairOut(
                    first=pair.first,
                    second=pair.second,
                    pearson_r=_finite(pair.pearson_r),
                    exact=_finite(pair.exact),
                    n=pair.n,
                )
                for pair in agreement.pairs.values()
            ],
            mean_pearson_r=_finite(agreement.mean_pearson_r),
            mean_exact=_finite(agreement.mean_exact),
        )
