"""A rate-limit probe: refused authentications from one client address, through the proxy.

Run by :mod:`tests.multihost.run` inside the worker namespace, from one of its extra
addresses (the proxy passes it on in ``X-Forwarded-For`` and the API trusts the proxy)::

    python -m tests.multihost.probe --server http://10.231.0.40 --source 10.231.0.31 --count 30

``GET /v1/whoami`` with a bad token, ``--count`` times in a row. Past
``PROCTOR_AUTH_FAILURES_PER_MINUTE`` refusals from one address in a minute the API answers
429 (the counter is in Redis); with Redis unreachable the limiter lets every request through
(each gets its 401). Prints ``{"statuses": {...}, "max_s": ..., "total_s": ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

import httpx


def probe(server: str, source: str, count: int, until: float | None) -> dict[str, object]:
    """``count`` refused requests; with ``until`` (a wall time) only those answered before it
    count, and none is sent after it."""
    statuses: Counter[str] = Counter()
    durations: list[float] = []
    transport = httpx.HTTPTransport(local_address=source)
    started = time.monotonic()
    with httpx.Client(base_url=server, transport=transport, timeout=45) as client:
        for _ in range(count):
            if until is not None and time.time() >= until:
                break
            t = time.monotonic()
            try:
                response = client.get("/v1/whoami", headers={"Authorization": "Bearer bad"})
                outcome = str(response.status_code)
            except httpx.HTTPError as error:
                outcome = type(error).__name__
            if until is None or time.time() < until:
                statuses[outcome] += 1
                durations.append(time.monotonic() - t)
    return {
        "statuses": dict(statuses),
        "max_s": round(max(durations, default=0.0), 3),
        "total_s": round(time.monotonic() - started, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--until", type=float, help="wall time (epoch s) to stop at")
    args = parser.parse_args(argv)
    print(json.dumps(probe(args.server, args.source, args.count, args.until)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
