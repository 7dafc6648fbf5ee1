"""The console's live figures over Server-Sent Events: one stream loop for every page that
follows something moving (a session, a run).

A page marks an element ``data-live="URL"`` and the figures inside it ``data-field="NAME"``
(``static/console.js``). The stream at URL reads the thing again every ``TICK_S`` in a unit
of work of its own, as the cookie's user, and sends the figures that changed as one JSON
message; ``event: end`` once nothing moves any more, or once the login or the right to read
it has gone. The reader of a page (``Read``) is the same function that gives the page its
first figures, so the page and its stream cannot disagree.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from server.api.problems import is_unavailable
from server.api.runtime import Runtime
from server.auth.console_logins import resolve_login
from server.auth.permissions import Permission, Principal
from server.console.dependencies import login_limits
from server.errors import Forbidden, NotFound, Unauthorized

log = logging.getLogger(__name__)

TICK_S = 1.0
"""How often a live stream reads its figures again."""
KEEPALIVE_S = 15.0
"""A quiet stream sends a comment this often (proxies close idle connections)."""
MAX_STREAM_S = 600.0
"""A stream ends (without ``end``) after this long; the browser's EventSource reconnects,
authenticated afresh."""
END = "event: end\ndata: {}\n\n"
KEEPALIVE = ": keepalive\n\n"

Figures = Mapping[str, str | int]
"""A page's moving figures by ``data-field`` name."""


@dataclass(frozen=True, slots=True)
class LiveReading:
    figures: Figures
    finished: bool
    """Nothing on the page moves any more: the stream ends after these figures."""


Read = Callable[[AsyncSession, Principal], Awaitable[LiveReading]]
"""Reads the figures as ``principal`` may see them; ``NotFound``/``Forbidden`` if it may not."""


def message(figures: Figures) -> str:
    """One SSE message carrying ``figures``."""
    return f"data: {json.dumps(dict(figures), ensure_ascii=True)}\n\n"


async def read_as_login(
    runtime: Runtime, *, secret: str, permission: Permission, read: Read
) -> LiveReading:
    """``read`` as the console login ``secret`` now, in a unit of work of its own:
    ``Unauthorized`` once the login has ended (logout, revoked key, idle or too old),
    ``Forbidden`` without ``permission``."""
    async with runtime.sessions() as db, db.begin():
        user = await resolve_login(
            db,
            secret=secret,
            now=datetime.now(UTC),
            limits=login_limits(runtime.settings),
            touch=False,  # an open page is not activity: the login still ends when idle
        )
        if not user.principal.can(permission):
            raise Forbidden(f"this role may not {permission.value}")
        return await read(db, user.principal)


async def live_figures(
    runtime: Runtime,
    *,
    secret: str,
    permission: Permission,
    read: Read,
    disconnected: Callable[[], Awaitable[bool]],
    name: str,
) -> AsyncIterator[str]:
    """The SSE stream of ``read``: every ``TICK_S`` the figures are read again and, if any
    changed, sent (the first message has them all); a comment every ``KEEPALIVE_S`` of
    quiet; ``event: end`` once the reading is finished or the login or the right to read
    has gone; nothing more after ``MAX_STREAM_S`` (the browser reconnects), once the client
    has gone, or while the database is unavailable (logged under ``name``)."""
    started = quiet_since = time.monotonic()
    sent: dict[str, str | int] = {}
    while time.monotonic() - started < MAX_STREAM_S and not await disconnected():
        try:
            reading = await read_as_login(runtime, secret=secret, permission=permission, read=read)
        except (Unauthorized, Forbidden, NotFound):
            yield END
            return
        except Exception as error:
            if not is_unavailable(error):
                raise
            log.warning("live stream of %s stops: the database is unavailable", name)
            return
        changed = {k: v for k, v in reading.figures.items() if sent.get(k) != v}
        if changed:
            sent.update(changed)
            quiet_since = time.monotonic()
            yield message(changed)
        elif time.monotonic() - quiet_since >= KEEPALIVE_S:
            quiet_since = time.monotonic()
            yield KEEPALIVE
        if reading.finished:
            yield END
            return
        await asyncio.sleep(TICK_S)


def event_stream(stream: AsyncIterator[str]) -> StreamingResponse:
    """``stream`` as a ``text/event-stream`` response that proxies do not buffer."""
    return StreamingResponse(
        stream, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
    )
