"""The hybrid scoring cascade (ReLE §3.2).

Three tiers, cheapest first:

1. objective: true/false, choice letters, numbers, symbolic math and normalised exact match
   are decided by deterministic matchers (``judge.matchers``) and mapped to 0-3 by a
   ``ScorePolicy``;
2. similarity: for semi-objective items (fill-in, cloze, dictation, error correction,
   calculation) an answer the matchers cannot decide is compared with the reference; a
   confident match or mismatch is decided there (``judge.similarity.SimilarityFilter``);
3. the LLM judge: everything still undecided, and every open item (short answer, essay,
   material analysis, reading comprehension).

``route`` is pure: it returns a ``Decision`` or None ("ask the judge"). The caller (the
scoring worker) owns the judge call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from judge.matchers import ScorePolicy, objective_match
from judge.similarity import SimilarityFilter

OBJECTIVE_QTYPES = frozenset({"true_false", "multiple_choice"})
SEMI_OBJECTIVE_QTYPES = frozenset(
    {"fill_in", "cloze", "dictation", "error_correction", "calculation"}
)
"""Everything else (short answer, essay, material analysis, reading comprehension, and any
type we do not know) is open: the judge decides."""
DECIDABLE_QTYPES = OBJECTIVE_QTYPES | SEMI_OBJECTIVE_QTYPES

Method = Literal["objective", "similarity", "judge"]


@dataclass(frozen=True, slots=True)
class Decision:
    """A score decided before the judge, and how."""

    score: int
    method: Method
    detail: str


@dataclass(frozen=True, slots=True)
class Cascade:
    """The configuration of the early tiers."""

    policy: ScorePolicy = field(default_factory=ScorePolicy)
    similarity: SimilarityFilter = field(default_factory=SimilarityFilter)

    def route(
        self,
        *,
        qtype: str,
        answer: str,
        reference: str,
        options: Sequence[str] | None,
        language: str,
    ) -> Decision | None:
        """The decision of the objective or similarity tier, or None to ask the judge.

        ``answer`` is the final answer (reasoning trace already split off). An empty answer
        to an objective or semi-objective item is wrong; to an open item it goes to the
        judge like any other.
        """
        if qtype not in DECIDABLE_QTYPES:
            return None
        if not answer.strip():
            return Decision(self.policy.wrong, "objective", "empty answer")
        match = objective_match(
            qtype=qtype, answer=answer, reference=reference, options=options, language=language
        )
        score = self.policy.score(match)
        if score is not None:
            return Decision(score, "objective", f"{match.method}: {match.detail}")
        if qtype in OBJECTIVE_QTYPES:
            return None
        verdict = self.similarity.decide(answer, reference)
        if verdict == "match":
            return Decision(self.policy.correct, "similarity", "confident match")
        if verdict == "mismatch":
            return Decision(self.policy.wrong, "similarity", "confident mismatch")
        return None
