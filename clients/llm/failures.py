"""Why a call to a model failed, as one word of the API's vocabulary (``CallFailure``).

The chat client raises its own exception tree (:mod:`clients.llm.chat`) and the egress guard
its own (:mod:`clients.llm.egress`); reports, endpoint checks and run progress count
failures by kind, so the mapping from exception to kind is written once, here.
"""

from __future__ import annotations

from clients.llm.chat import (
    ChatContextOverflow,
    ChatDeferred,
    ChatError,
    ChatProtocolError,
    ChatRejected,
    ChatRetriesExhausted,
)
from clients.llm.egress import EgressError, EgressRefused, EgressResponseTooLarge
from clients.sdk.types import CallFailure

__all__ = ["MODEL_CALL_ERRORS", "failure_kind"]

MODEL_CALL_ERRORS: tuple[type[Exception], ...] = (ChatError, EgressError, TimeoutError)
"""Everything a guarded call to a model may raise besides a bug."""

_KINDS: tuple[tuple[type[Exception], CallFailure], ...] = (
    (EgressRefused, CallFailure.EGRESS_REFUSED),
    (EgressResponseTooLarge, CallFailure.RESPONSE_TOO_LARGE),
    (ChatContextOverflow, CallFailure.CONTEXT_OVERFLOW),  # before its base, ChatRejected
    (ChatRejected, CallFailure.REJECTED),
    (ChatRetriesExhausted, CallFailure.RETRIES_EXHAUSTED),
    (ChatDeferred, CallFailure.DEFERRED),
    (ChatProtocolError, CallFailure.PROTOCOL),
    (TimeoutError, CallFailure.TIMEOUT),
)


def failure_kind(error: BaseException) -> CallFailure | None:
    """The kind of ``error`` (one of ``MODEL_CALL_ERRORS``), or None for anything else."""
    for kind, failure in _KINDS:
        if isinstance(error, kind):
            return failure
    return None
