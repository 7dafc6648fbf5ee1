"""Item-level agreement between the judges that scored the same answers (a panel).

ReLE §3.2 scores with several judges and reports their inter-judge Pearson r on the
answers they share; the statistics are pure (``judge.agreement.inter_judge``), this module
reads the judges' verdicts of answers that more than one judge scored.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from judge.agreement.inter_judge import InterJudgeAgreement, disagreements, inter_judge_agreement
from server.review.raters import HUMAN_PREFIX
from server.scoring.models import Verdict

__all__ = ["PanelAgreement", "panel_agreement"]


@dataclass(frozen=True, slots=True)
class PanelAgreement:
    """Pairwise agreement of the judges, and how many answers they split on."""

    agreement: InterJudgeAgreement
    answers: int
    """Answers scored by two judges or more."""
    split: int
    """Of those, answers whose judges' scores differ by ``min_gap`` points or more."""


async def panel_agreement(
    db: AsyncSession, *, prompt_version: str, min_gap: int, limit: int
) -> PanelAgreement:
    """Agreement over the newest ``limit`` answers that several judges scored under
    ``prompt_version`` (readable verdicts only; people's scores are not a judge's)."""
    judged = (
        Verdict.prompt_version == prompt_version,
        Verdict.score.is_not(None),
        ~Verdict.judge.startswith(HUMAN_PREFIX, autoescape=True),
    )
    shared = (
        select(Verdict.session_id, Verdict.position)
        .where(*judged)
        .group_by(Verdict.session_id, Verdict.position)
        .having(func.count() > 1)
        .order_by(func.max(Verdict.id).desc())
        .limit(limit)
        .subquery()
    )
    rows = await db.execute(
        select(Verdict.session_id, Verdict.position, Verdict.judge, Verdict.score)
        .join(
            shared,
            (shared.c.session_id == Verdict.session_id) & (shared.c.position == Verdict.position),
        )
        .where(*judged)
    )
    scores: dict[str, dict[str, int | None]] = {}
    for session_id, position, judge, score in rows.tuples():
        scores.setdefault(f"{session_id}:{position}", {})[judge] = score
    return PanelAgreement(
        inter_judge_agreement(scores),
        answers=len(scores),
        split=len(disagreements(scores, min_gap=min_gap)),
    )
