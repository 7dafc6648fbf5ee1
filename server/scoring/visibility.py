"""Who may see figures that move with single verdicts, and when.

Points, review counts and an adaptive session's estimate change with each verdict. Shown
while a session runs, they are an answer-key oracle: answer one item, wait until it is
scored, and the change says whether the answer was right. So they are shown to platform
roles (``Permission.SCORES_LIVE``: admins and auditors, who hold the key anyway) at any
time, and to everyone else only once the session is ``scored`` (or ``reviewed``), when they are the
session's aggregate result. Counts of answers judged and waiting are always shown: they
move with the scoring's progress, not with what it found.
"""

from __future__ import annotations

from server.auth.permissions import Permission, Principal
from server.sessions.states import SCORED_STATES, SessionState


def shows_verdict_figures(principal: Principal, state: str) -> bool:
    """Whether ``principal`` may see verdict-dependent figures of a session in ``state``."""
    return principal.can(Permission.SCORES_LIVE) or state in SCORED_STATES


def visible_state(principal: Principal, state: str) -> SessionState:
    """The state ``principal`` is shown: ``reviewed`` reads ``scored`` to everyone who does
    not see live scores, so nothing a reviewer does shows to vendors but the final score."""
    shown = SessionState(state)
    if shown is SessionState.REVIEWED and not principal.can(Permission.SCORES_LIVE):
        return SessionState.SCORED
    return shown
