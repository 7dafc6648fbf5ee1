"""``proctor run-worker``: the process that drives evaluation runs next to a PostgreSQL +
Redis deployment (``server.runs.process``); ``proctor runs`` starts and follows them."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from server.cli.groups import command_registrar
from server.cli.output import fail


def worker_command() -> None:
    """Drive runs until SIGTERM or Ctrl-C (with PostgreSQL).

    It claims sessions of queued runs, drives each through Proctor's API and the model's
    endpoint, and on SIGTERM gives the sessions in hand back at once for another worker."""
    from server.cli.unit_of_work import require_bank_keyring
    from server.config import get_settings
    from server.observability.logs import configure_logging

    settings = get_settings()
    configure_logging(settings.log_format, settings.log_level)
    require_bank_keyring(settings)  # the endpoints' secret headers are sealed with it
    if settings.is_embedded:
        fail("proctor run-worker needs PostgreSQL: the embedded default drives runs in process")
    asyncio.run(_work_until_signalled(settings))


async def _work_until_signalled(settings: Any) -> None:
    from server.runs.process import run_worker_process

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await run_worker_process(settings, stop)


register = command_registrar("run-worker", worker_command, "proctor run-worker")
