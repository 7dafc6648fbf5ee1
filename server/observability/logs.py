"""Log lines: structlog for ours, the same formatter for every stdlib ``logging`` call.

``configure_logging`` sends every log record of the process (structlog's, the code
base's ``logging.getLogger(__name__)`` lines, uvicorn's, arq's) through one
``structlog.stdlib.ProcessorFormatter`` on stderr: one JSON object per line, or a
human-readable line on a terminal (``PROCTOR_LOG_FORMAT``). The request id and what the
request middleware binds (``structlog.contextvars``) appear on every line logged while
the request is handled. ``redact`` blanks fields that could carry a secret or an answer
key, as a second line of defence: no caller should pass one in the first place.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from structlog.typing import EventDict, Processor

from server.observability.log_format import LogFormat, LogLevel

REDACTED = "[redacted]"
SECRET_KEYS = frozenset(
    {
        "authorization",
        "cookie",
        "set_cookie",
        "token",
        "access_token",
        "refresh_token",
        "api_key",
        "password",
        "secret",
        "jwt_secret",
        "metrics_token",
        "answer",
        "reference",
        "explanation",
        "reasoning",
        "body",
    }
)
"""Field names whose values never reach a log line (compared lower-cased)."""

# Loggers that install handlers of their own; theirs are dropped so that each record is
# written once, by the root handler.
OWN_HANDLERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "arq")
QUIETER = ("httpx", "httpcore", "aiosqlite", "asyncio")
"""Only their warnings, at any level: httpx writes a line per judge call at INFO, and
aiosqlite's debug lines hold every SQL statement with its parameters."""


def redact(_: Any, __: str, event_dict: EventDict) -> EventDict:
    """Blank every field named in ``SECRET_KEYS``."""
    for key in [k for k in event_dict if k.lower() in SECRET_KEYS]:
        event_dict[key] = REDACTED
    return event_dict


def wants_json(log_format: LogFormat, stream: Any = None) -> bool:
    """JSON unless asked for the console format, or ``auto`` on a terminal."""
    if log_format is LogFormat.AUTO:
        stream = stream or sys.stderr
        return not (hasattr(stream, "isatty") and stream.isatty())
    return log_format is LogFormat.JSON


def shared_processors() -> list[Processor]:
    """What every line gets, whether structlog or stdlib ``logging`` wrote it."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact,
    ]


def configure_logging(log_format: LogFormat, level: LogLevel, stream: Any = None) -> None:
    """Route every log record of the process to ``stream`` (default stderr) in
    ``log_format`` at ``level`` and above; safe to call again (it replaces the setup)."""
    as_json = wants_json(log_format, stream)
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=_is_tty(stream or sys.stderr))
    )
    final: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if as_json:
        final.append(structlog.processors.dict_tracebacks)
    final.append(renderer)
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared_processors(), processors=final
    )
    handler = _Handler(stream or sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):  # ours from an earlier call, and logging.basicConfig's
        if isinstance(old, _Handler) or type(old) is logging.StreamHandler:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.value)
    for name in OWN_HANDLERS:
        named = logging.getLogger(name)
        named.handlers.clear()
        named.propagate = True
    for name in QUIETER:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.getEffectiveLevel()))
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared_processors(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``configure_logging`` installs (and replaces when called again)."""


def _is_tty(stream: Any) -> bool:
    return bool(hasattr(stream, "isatty") and stream.isatty())
