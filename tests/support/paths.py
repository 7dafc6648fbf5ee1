"""Where the real data sets live: ``$PROCTOR_SHARED_DATA``, else ``shared/data`` beside the
repository (where CI puts it), else ``/work/shared/data``."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _shared_data() -> Path:
    configured = os.environ.get("PROCTOR_SHARED_DATA")
    if configured:
        return Path(configured)
    beside = REPO_ROOT.parent / "shared" / "data"
    return beside if beside.is_dir() else Path("/work/shared/data")


SHARED_DATA = _shared_data()
