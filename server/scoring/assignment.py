"""Which judges score an answer: the default judge, or a panel (globally or per discipline).

Only judges that pass the calibration gate and are not drifting are eligible
(``server.calibration.gate``); a configured panel keeps its eligible members, and a panel
left empty by the gate falls back to the default judge. The assignment is computed by the
sweeper and the lifespan and kept on the runtime, so answering an item costs no query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from judge.panel import PanelRule
from server.calibration.gate import eligible_judges
from server.config import Settings
from server.scoring.judges import NO_JUDGE

__all__ = ["JudgeAssignment", "assign_judges", "assignment_from"]


@dataclass(frozen=True, slots=True)
class JudgeAssignment:
    """The judges of new answers, and the rule that combines a panel's scores."""

    default: str = NO_JUDGE
    panel: tuple[str, ...] = ()
    """Eligible members of ``judge_panel``; empty: the default judge alone."""
    by_discipline: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rule: PanelRule = PanelRule.MEDIAN

    def judges_for(self, discipline: str | None) -> tuple[str, ...]:
        """The judges an answer of ``discipline`` is queued for (at least one)."""
        if discipline is not None and self.by_discipline.get(discipline):
            return self.by_discipline[discipline]
        return self.panel or (self.default,)

    @property
    def every_judge(self) -> tuple[str, ...]:
        """Every judge of any panel, the default first."""
        names = [self.default, *self.panel]
        for panel in self.by_discipline.values():
            names.extend(panel)
        return tuple(dict.fromkeys(names))

    @classmethod
    def single(cls, judge: str, rule: PanelRule = PanelRule.MEDIAN) -> JudgeAssignment:
        """Every answer by ``judge`` alone (a per-judge view of the scores)."""
        return cls(default=judge, rule=rule)


def assignment_from(
    settings: Settings, *, default: str, eligible: Sequence[str]
) -> JudgeAssignment:
    """The assignment of ``settings`` restricted to the ``eligible`` judges (pure)."""
    allowed = set(eligible)

    def gated(panel: Sequence[str]) -> tuple[str, ...]:
        return tuple(name for name in panel if name in allowed)

    return JudgeAssignment(
        default=default,
        panel=gated(settings.judge_panel),
        by_discipline={
            discipline: members
            for discipline, panel in settings.judge_panel_by_discipline.items()
            if (members := gated(panel))
        },
        rule=settings.judge_panel_rule,
    )


async def assign_judges(db: AsyncSession, settings: Settings) -> JudgeAssignment:
    """The current assignment: the gate decides which configured judges may score."""
    eligible = await eligible_judges(db, settings)
    return assignment_from(
        settings, default=eligible[0] if eligible else NO_JUDGE, eligible=eligible
    )
