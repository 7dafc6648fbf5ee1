"""How log lines are written (``PROCTOR_LOG_FORMAT``)."""

from __future__ import annotations

from enum import StrEnum


class LogFormat(StrEnum):
    """``auto``: human-readable on a terminal, one JSON object per line otherwise."""

    AUTO = "auto"
    JSON = "json"
    CONSOLE = "console"


class LogLevel(StrEnum):
    """The lowest level written (``PROCTOR_LOG_LEVEL``)."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
