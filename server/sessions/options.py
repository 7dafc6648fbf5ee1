"""What a client chose when it opened a session, beside its size: the options one mode
reads (``server.sessions.modes``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from clients.sdk.types import AdaptiveBound, AdaptivePolicy


@dataclass(frozen=True, slots=True)
class AdaptiveRequest:
    """An adaptive session's choices; None takes the server's default."""

    policy: AdaptivePolicy | None = None
    bound: AdaptiveBound | None = None
    target_halfwidth: float | None = None
    """Score points (0-100)."""
    delta: float | None = None


class SessionOption(StrEnum):
    """The mode-specific options of a session request (``SessionOptions``' fields)."""

    ADAPTIVE = "adaptive"
    ITEM_SET = "item_set"


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """The mode-specific part of a session request: ``adaptive`` only for adaptive
    sessions, ``item_set`` (a set's name) only for item-set sessions; each mode refuses
    the options it does not read (``ModeSpec.check_options``)."""

    adaptive: AdaptiveRequest | None = None
    item_set: str | None = None
