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
  Its score is the stratified estimate with its interval; ranked with the fixed sessions
  (``server.leaderboard.service.RANKED_MODES``: each adaptive session counts with its
  estimate).
* ``item_set``: items of a named item set an admin saved (``bank.item_sets``; e.g. a
  selective subset chosen from the bank-health figures), drawn like the anchor set: active
  members only, one per family, families the organisation has not been served; scored as
  usual, not ranked.

Why a mode of its own and not an option of ``fixed``: a fixed session is a stratified
random sample of the whole bank, which is what the leaderboard pools and what adaptive
item histories read (``EvalSession.mode == "fixed"``). A sample from a chosen subset is
not, so its score must not be pooled with them; a separate mode keeps every existing
reader of ``fixed`` right without a change, and makes the session say what it is. The set
is named at creation (``SessionCreate.item_set``); the sample itself records which items
were served.

Who may open one: admins and evaluators (``ITEM_SET_PERMISSION``), not vendors. A
vendor driving sessions from a set of its choosing could learn which items the set holds
(session after session, each serving families not yet seen) and tune to the subset the
operator uses to tell models apart; the set's name and existence are not revealed to
roles that may not use it (their request is refused before the name is looked up).
"""

from __future__ import annotations

from clients.sdk.types import SessionMode
from judge.contamination.replay import MaskedText, mask_question
from server.auth.permissions import Permission

__all__ = [
    "CONTAMINATION_MODES",
    "ITEM_SET_PERMISSION",
    "REPLAY_QTYPE",
    "SessionMode",
    "replay_mask",
]

CONTAMINATION_MODES: frozenset[SessionMode] = frozenset({SessionMode.REPLAY, SessionMode.ANCHOR})
"""Modes that only admins and evaluators may open, and that never enter the ranking."""

ITEM_SET_PERMISSION = Permission.SESSIONS_SIZE
"""What opening an ``item_set`` session takes: choosing what a session holds, as choosing
its size does (admins and evaluators; not vendors)."""

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
