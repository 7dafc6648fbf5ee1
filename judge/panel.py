"""Several judges on one answer: the rule that turns their scores into the answer's verdict.

ReLE (its §3.2) scores with several judges and reports their item-level agreement;
LLMEval-Fair (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and
Fair Evaluation of Large Language Models", §3.4) checks its judge against human experts.
A panel of k judges gives each answer k scores on the fig. 11 scale 0-3; the verdict is
their median by default (robust to one judge gone astray), or their mean.

People outrank judges: an answer a reviewer scored takes the reviewers' mean, whatever the
judges said (LLMEval-Fair §3.4 checks its judge against human experts, so the experts are
the reference). The verdict is a rubric point: a mean or the median of an even number of
scores is rounded half to even, which neither favours nor penalises models on average.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from enum import StrEnum

__all__ = ["PanelRule", "answer_verdict", "combine"]


class PanelRule(StrEnum):
    """How a panel's scores of one answer become its verdict."""

    MEDIAN = "median"
    """The median score (of an even number of scores, the mean of the middle two)."""
    MEAN = "mean"


def combine(scores: Sequence[float], rule: PanelRule) -> float:
    """The verdict of the panel scores ``scores`` (at least one) under ``rule``.

    Raises
    ------
    ValueError
        No scores.
    """
    if not scores:
        raise ValueError("a panel verdict needs at least one score")
    if rule is PanelRule.MEDIAN:
        return float(statistics.median(scores))
    return float(statistics.fmean(scores))


def answer_verdict(
    judge_scores: Sequence[float | None], human_scores: Sequence[float], rule: PanelRule
) -> int | None:
    """The score (0-3) an answer counts with: the reviewers' rounded mean if any person
    scored it, else the panel's rounded ``rule`` over the judges that gave a score, else
    None (it waits for review and is left out of every score, never counted as 0)."""
    if human_scores:
        return round(combine(human_scores, PanelRule.MEAN))
    given = [score for score in judge_scores if score is not None]
    if not given:
        return None
    return round(combine(given, rule))
