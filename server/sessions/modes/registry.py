"""Every kind of session, by ``SessionMode`` value (as polarsource/polar maps benefit
types to their strategies). A new mode: one module under ``server.sessions.modes``, one
``SessionMode`` member, one entry here."""

from __future__ import annotations

from collections.abc import Callable

from server.sessions.modes.adaptive import AdaptiveMode
from server.sessions.modes.anchor import AnchorMode
from server.sessions.modes.base import ModeSpec, Traits
from server.sessions.modes.fixed import FixedMode
from server.sessions.modes.item_set import ItemSetMode
from server.sessions.modes.replay import ReplayMode

MODES: dict[str, ModeSpec] = {
    spec.mode: spec
    for spec in (
        FixedMode(),
        ReplayMode(),
        AnchorMode(),
        AdaptiveMode(history_modes=lambda: modes_where(lambda traits: traits.feeds_history)),
        ItemSetMode(),
    )
}


def mode_spec(mode: str) -> ModeSpec:
    """The spec of ``mode`` (a ``SessionMode`` or its stored value); ``LookupError`` for a
    mode no module implements."""
    try:
        return MODES[mode]
    except KeyError:
        raise LookupError(f"no session mode {mode!r}") from None


def modes_where(trait: Callable[[Traits], bool]) -> tuple[str, ...]:
    """The stored values of the modes whose traits satisfy ``trait``, in registry order
    (for ``EvalSession.mode.in_(...)``)."""
    return tuple(mode for mode, spec in MODES.items() if trait(spec.traits))
