"""The transport for calls to URLs someone else gave the server (a model's endpoint), as
the settings configure it: ``clients.llm.egress.GuardedTransport`` with the operator's
allowed addresses, proxy and response limit."""

from __future__ import annotations

from typing import Any

from clients.llm.egress import EgressPolicy, GuardedTransport
from server.config import Settings

__all__ = ["guarded_transport"]


def guarded_transport(settings: Settings, **options: Any) -> GuardedTransport:
    """A new guarded transport for ``settings`` (``options``: the resolver in tests, or
    httpx transport options); the caller closes it, or the client that owns it does."""
    return GuardedTransport(
        EgressPolicy.allowing(settings.egress_allow),
        proxy=settings.egress_proxy,
        max_response_bytes=settings.egress_max_response_bytes,
        **options,
    )
