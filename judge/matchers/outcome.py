"""What a matcher returns (:class:`Match`) and its 0-3 rubric score (:class:`ScorePolicy`).

Every matcher returns a :class:`Match`:

* ``correct=True`` / ``False``: decided objectively, with ``method`` naming the matcher and
  ``detail`` saying what was compared;
* ``correct=None``: the matcher cannot decide (no recognisable verdict, letter or number,
  an expression it will not parse, a reference of the wrong shape). The caller then uses
  the similarity filter or the LLM judge. A matcher never guesses: when in doubt it says
  None.

The 0-3 rubric (LLMEval-Fair (Zhang et al.) fig. 11) maps an objective decision through
:class:`ScorePolicy`: correct -> 3, wrong -> 0 by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from judge.rubric import MAX_SCORE, MIN_SCORE


@dataclass(frozen=True, slots=True)
class Match:
    """The outcome of an objective matcher.

    ``correct`` is True (the answer matches the reference), False (it does not) or None
    (the matcher cannot decide objectively). ``method`` names the matcher that decided
    (``true_false``, ``choice``, ``number``, ``symbolic``, ``exact``) and ``detail`` is a
    short human-readable explanation for audit logs.
    """

    correct: bool | None
    method: str
    detail: str


@dataclass(frozen=True, slots=True)
class ScorePolicy:
    """Maps an objective :class:`Match` onto the 0-3 rubric (LLMEval-Fair fig. 11).

    The rubric's 3 is "correct answer with a reasonable explanation" and 0 is "wrong answer
    with a wrong explanation"; an objective item has no explanation to weigh, so a correct
    answer scores ``correct`` (3) and a wrong one ``wrong`` (0). ``correct`` must exceed
    ``wrong`` and both must be non-negative.
    """

    correct: int = MAX_SCORE
    wrong: int = MIN_SCORE

    def __post_init__(self) -> None:
        if self.wrong < 0:
            raise ValueError(f"wrong must be >= 0, got {self.wrong}")
        if self.correct <= self.wrong:
            raise ValueError(f"correct must be > wrong, got correct={self.correct}")

    def score(self, match: Match) -> int | None:
        """The rubric score of ``match``; None when the match is undecided."""
        if match.correct is None:
            return None
        return self.correct if match.correct else self.wrong
