"""Options that several ``proctor`` commands share, spelt and explained the same way."""

from __future__ import annotations

from typing import Annotated

import typer

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]
"""``--json``: print the result as JSON instead of text and tables."""
JudgeName = Annotated[
    str | None, typer.Option("--judge", help="Judge name (default: the default judge).")
]
"""``--judge``: a configured judge; ``None`` means the default judge."""
