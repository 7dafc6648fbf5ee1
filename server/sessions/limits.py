"""Per-organisation and per-session quotas, read from the settings once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clients.sdk.types import AdaptiveBound, AdaptivePolicy
from server.review.sampling import ReviewPolicy

if TYPE_CHECKING:  # only from_settings reads them (`proctor simulate` starts without them)
    from server.config import Settings


@dataclass(frozen=True, slots=True)
class AdaptiveDefaults:
    """What an adaptive session uses for what its request leaves out."""

    policy: AdaptivePolicy = AdaptivePolicy.MODEL_ASSISTED
    bound: AdaptiveBound = AdaptiveBound.NORMAL
    target_halfwidth: float = 7.25
    """Score points (0-100)."""
    delta: float = 0.05
    check_every: int = 10
    pilot: int = 2


@dataclass(frozen=True, slots=True)
class SessionLimits:
    max_concurrent: int = 5
    max_per_period: int = 50
    period_s: int = 86_400
    default_items: int = 1000
    max_items: int = 5000
    pending_window: int = 1
    deadline_s: int = 7 * 86_400
    lease_idle_s: float = 60.0
    adaptive: AdaptiveDefaults = AdaptiveDefaults()
    review: ReviewPolicy = field(default_factory=ReviewPolicy)
    """Opens the review tasks of an adaptive session that its stopping rule scores."""

    @classmethod
    def from_settings(cls, settings: Settings) -> SessionLimits:
        return cls(
            max_concurrent=settings.max_concurrent_sessions,
            max_per_period=settings.max_sessions_per_period,
            period_s=settings.session_period_s,
            default_items=settings.default_session_items,
            max_items=settings.max_session_items,
            pending_window=settings.pending_window,
            deadline_s=settings.session_deadline_s,
            lease_idle_s=settings.lease_idle_s,
            adaptive=AdaptiveDefaults(
                policy=settings.adaptive_policy,
                bound=settings.adaptive_bound,
                target_halfwidth=settings.adaptive_target_halfwidth,
                delta=settings.adaptive_delta,
                check_every=settings.adaptive_check_every,
                pilot=settings.adaptive_pilot,
            ),
            review=ReviewPolicy.from_settings(settings),
        )
