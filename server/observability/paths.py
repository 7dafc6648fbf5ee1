"""The operational routes: probes and the metrics scrape (no imports, so that any layer
can name them)."""

from __future__ import annotations

HEALTHZ = "/healthz"
READYZ = "/readyz"
METRICS = "/metrics"
QUIET_PATHS = frozenset({HEALTHZ, READYZ, METRICS})
"""Called every few seconds by machines: not audited as API calls, logged at debug level
unless they fail."""
