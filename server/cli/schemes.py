"""The ``--schemes`` file of ``proctor analyze`` and ``proctor leaderboard``: weighting
schemes over the dimensions, for the Rank Stability Amplitude."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from judge.ranking.diagnostics import SchemeError, validate_schemes
from server.cli.output import CommandInputError


def read_schemes(path: Path, dimensions: Sequence[str]) -> dict[str, dict[str, float]]:
    """The schemes in ``path``, JSON ``{"scheme": {"dimension": weight, ...}}``, checked
    against ``dimensions``.

    Raises
    ------
    CommandInputError
        One line per problem: ``--schemes: PATH: ...`` when the file cannot be read,
        ``PATH:LINE: json: ...`` when it is not JSON, ``PATH: ...`` per bad scheme.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as error:
        raise CommandInputError(f"--schemes: {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise CommandInputError(f"--schemes: {path}: not valid UTF-8") from None
    except json.JSONDecodeError as error:
        raise CommandInputError(f"{path}:{error.lineno}: json: {error.msg}") from None
    try:
        return validate_schemes(raw, dimensions)
    except SchemeError as error:
        raise CommandInputError(*(f"{path}: {problem}" for problem in error.problems)) from None
