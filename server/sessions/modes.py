"""The kinds of session (``EvalSession.mode``).

* ``fixed``: a stratified sample of unseen items (``bank.sampling``), scored and ranked.
* ``replay``: contamination check by fill-in replay: each item is delivered with the end
  of its question hidden and the model is asked to continue the text; near-exact
  completions are counted, not ranked.
* ``anchor``: items of the private anchor set (``Item.status == "anchor"``, never served
  in any other session), scored as usual; the score is compared with the model's fixed
  sessions for the generalisation gap, not ranked.
* ``adaptive``: the server picks each next item from what has been scored so far and
  ends the session when the stopping rule fires (``server.sessions.adaptive``).
  Its score is the stratified estimate with its interval; not ranked yet (the leaderboard
  pools plain means of fixed sessions).
"""

from __future__ import annotations

from clients.sdk.types import SessionMode
from judge.contamination.replay import MaskedText, mask_question

__all__ = ["CONTAMINATION_MODES", "REPLAY_QTYPE", "SessionMode", "replay_mask"]

CONTAMINATION_MODES: frozenset[SessionMode] = frozenset({SessionMode.REPLAY, SessionMode.ANCHOR})
"""Modes that only admins and evaluators may open, and that never enter the ranking."""

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
