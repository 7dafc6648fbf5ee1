"""A per-process memory of tokens recently found live, so that a request does not always
ask the database whether its token was revoked (``server.auth.service.is_revoked``).

A token is remembered by its whole verified claim set, never by its ``jti`` alone: a token
that reuses a live ``jti`` with another subject, organisation, role or session is another
token and is checked in full (it could otherwise borrow the live token's verdict that its
key is live and that its platform role belongs to the operator).

Staleness bound: a token found live is trusted for ``LIVE_FOR_S`` seconds (5 s) in this
process without asking again. A revocation made through this process
(``server.auth.service.revoke_token`` / ``revoke_api_key``: the API, the console) clears
the memory at once and again when its transaction commits, so it takes effect on the
next request this process serves. A revocation made by another process (another worker
of ``proctor serve``, another replica) takes effect here within ``LIVE_FOR_S`` seconds.
Only "live" is remembered: a refused token is asked about every time.

The memory also cannot keep a verdict read before a revocation in this process: each
lookup notes the ``generation`` it started in and a verdict is remembered only if no
revocation happened meanwhile.

What the cache skips is only the request's authentication check; the session lease still
refuses a revoked holder in SQL (``server.sessions.service``), exactly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

LIVE_FOR_S = 5.0
"""How long a token found live is trusted without asking the database (the staleness
bound for revocations made by other processes)."""
MAX_ENTRIES = 100_000
"""Past this many remembered tokens the memory starts again empty (bounded memory)."""


class RevocationCache:
    """Tokens (their verified claim sets) found live, with when; see the module
    docstring."""

    def __init__(
        self,
        *,
        live_for_s: float = LIVE_FOR_S,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.live_for_s = live_for_s
        self.max_entries = max_entries
        self._clock = clock
        self._live: dict[Hashable, float] = {}
        self.generation = 0
        """Incremented by every revocation this process makes (``forget_all``)."""

    def is_known_live(self, token: Hashable) -> bool:
        """Whether ``token`` was found live less than ``live_for_s`` seconds ago."""
        found = self._live.get(token)
        if found is None:
            return False
        if self._clock() - found < self.live_for_s:
            return True
        del self._live[token]
        return False

    def remember_live(self, token: Hashable, *, generation: int) -> None:
        """Remember ``token`` as live, unless a revocation happened since ``generation``
        (the value of ``self.generation`` when the database was asked)."""
        if generation != self.generation:
            return
        if len(self._live) >= self.max_entries:
            self._live.clear()
        self._live[token] = self._clock()

    def forget_all(self) -> None:
        """A token or key is being revoked: trust nothing remembered."""
        self.generation += 1
        self._live.clear()


REVOCATIONS = RevocationCache()
"""This process's memory (one per ``proctor serve`` worker)."""
