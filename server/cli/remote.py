"""What the ``proctor`` commands that talk to a running server share: ``--server`` and
``--api-key``, the SDK client they use (any SDK error is ``error: ...``, status 1), and
the JSON of its response bodies."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

import typer

from server.cli.output import fail

ServerUrl = Annotated[
    str,
    typer.Option("--server", envvar="PROCTOR_SERVER_URL", help="Proctor's base URL."),
]
ApiKey = Annotated[
    str,
    typer.Option("--api-key", envvar="PROCTOR_API_KEY", help="Your Proctor API key."),
]
TIMEOUT_S = 60.0
"""Seconds one request to Proctor may take (a check waits for the model's reply)."""


@contextmanager
def connected(server: str, api_key: str) -> Iterator[Any]:
    """A ``ProctorClient`` on ``server``; any SDK error is ``error: ...``, status 1."""
    from clients.sdk import ProctorClient, ProctorError

    try:
        with ProctorClient(server, api_key, timeout=TIMEOUT_S, max_retries=2) as client:
            yield client
    except ProctorError as error:
        fail(str(error))


def jsonable(body: Any) -> dict[str, Any]:
    """An SDK response body (a dataclass) as a JSON object: times in ISO 8601."""
    fields = dataclasses.asdict(body)
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in fields.items()}
