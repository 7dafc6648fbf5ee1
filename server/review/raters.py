"""Who gave a score: the rater names of human verdicts.

A human score is a ``Verdict`` like a judge's (``server.scoring.models``); its rater name and
prompt version say that a person gave it. Kept apart from the tables so that what only names
raters (the settings' check of judge names, say) imports no database code.
"""

from __future__ import annotations

HUMAN_PREFIX = "human:"
"""Rater names of human verdicts start with this; the rest is the reviewer's key id."""
HUMAN_PROMPT_VERSION = "human"
"""The ``prompt_version`` of every human verdict."""
HUMAN_METHOD = "human"
"""The ``method`` of every human verdict."""


def human_rater(reviewer: str) -> str:
    """The rater name of the verdicts of ``reviewer`` (an API key id)."""
    return f"{HUMAN_PREFIX}{reviewer}"
