"""``replay``: a contamination check by fill-in replay. Each item of a stratified sample
is delivered with the end of its question hidden and the model is asked to continue the
text; a completion that reproduces the hidden end near-exactly is counted (LLMEval-Fair:
"LLMEval-Fair: a large-scale longitudinal study on robust and fair evaluation of large
language models", Zhang et al., §3.3), not ranked. Admins and evaluators only."""

from __future__ import annotations

from typing import Any, ClassVar

from clients.sdk.types import SessionMode
from judge.contamination.replay import MaskedText, completion_match, mask_question, replay_prompt
from judge.ranking.scores import MAX_SCORE
from server.auth.permissions import Permission
from server.sessions.modes.base import BaseMode, DeliveredItem, Traits

REPLAY_QTYPE = "replay"
"""The ``qtype`` a replay session's items are delivered with: a text to continue."""


def replay_mask(question: str) -> MaskedText | None:
    """How a replay session splits ``question``: the delivered beginning and the hidden
    end, the same in the API and in the scoring worker. A question too short for the
    default mask (fewer than 9 units) hides what it can; None for a single word."""
    try:
        return mask_question(question)
    except ValueError:
        try:
            return mask_question(question, min_hidden=1)
        except ValueError:
            return None


class ReplayMode(BaseMode):
    mode: ClassVar[str] = SessionMode.REPLAY
    traits: ClassVar[Traits] = Traits(
        ranked=False,
        feeds_history=False,
        read_by_health=False,
        scored=False,
        contamination=True,
        open_permission=Permission.SESSIONS_CONTAMINATION,
    )
    refusal: ClassVar[str] = "only admins and evaluators may open replay sessions"

    def view(self, row: Any, *, position: int) -> DeliveredItem:
        """The instruction to continue the beginning of the question; options and the
        rest stay on the server."""
        masked = replay_mask(row.question)
        prefix = masked.prefix if masked is not None else row.question
        return DeliveredItem(
            position=position,
            item_id=row.id,
            question=replay_prompt(prefix, language=row.language),
            options=None,
            qtype=REPLAY_QTYPE,
            discipline=row.discipline,
        )

    def verdict_without_judge(self, *, question: str, answer: str) -> dict[str, Any] | None:
        """The top of the rubric when the completion reproduces the hidden end of the
        question near-exactly, else 0; the similarity is kept in ``detail``."""
        masked = replay_mask(question)
        if masked is None:
            return {"score": 0, "method": "replay", "detail": "question too short to replay"}
        match = completion_match(answer, masked.hidden, prefix=masked.prefix)
        return {
            "score": MAX_SCORE if match.near_exact else 0,
            "method": "replay",
            "detail": f"similarity {match.similarity:.3f}",
        }
