"""The kinds of session (``EvalSession.mode``), one module each.

* ``fixed``: a stratified sample of unseen items, scored and ranked.
* ``replay``: contamination check by fill-in replay, counted, not ranked.
* ``anchor``: the private anchor set, for the generalisation gap, not ranked.
* ``adaptive``: the server picks each next item and stops early; ranked by its estimate.
* ``item_set``: drawn from a named item set an admin saved, not ranked.

Each implements ``base.ModeSpec`` (how it draws, what the client sees of an item, whether
delivery goes on, its traits); ``registry`` maps ``SessionMode`` to it. Why a subset is a
mode of its own and not an option of ``fixed``: a fixed session is a random sample of the
whole bank, which is what the leaderboard pools and what item histories and bank health
read; a sample of a chosen subset is not, and its mode's traits say so.
"""

from __future__ import annotations

from clients.sdk.types import SessionMode
from server.sessions.modes.base import DeliveredItem, ModeSpec, Traits
from server.sessions.modes.registry import MODES, mode_spec, modes_where

__all__ = [
    "MODES",
    "DeliveredItem",
    "ModeSpec",
    "SessionMode",
    "Traits",
    "mode_spec",
    "modes_where",
]
