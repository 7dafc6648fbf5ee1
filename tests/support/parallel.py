"""How many pytest-xdist workers ``-n auto`` (the suite's default, ``addopts``) starts.

One more worker than the machine has cores: the suite's tests spend much of their time
waiting on other processes (``proctor`` subprocesses, PostgreSQL, servers on 127.0.0.1, a
browser), so a third worker fills the time two would leave idle. On the 2-core machine the
whole suite took 1,023 s with 2 workers, 907 s with 3 and 1,167 s with 4 (4 overloads the
machine: timing tests begin to fail). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides the
figure, ``-n 0`` runs in one process (best for a single test: no worker start-up).

Each worker is its own session: it starts its own PostgreSQL and Redis servers and builds
its own migrated templates (``tests.support.service_fixtures``, ``tests.support.database``),
so workers share nothing but the machine.
"""

from __future__ import annotations

import os

import pytest

WORKERS_ENV = "PYTEST_XDIST_AUTO_NUM_WORKERS"


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Cores available to this process, plus one (or ``PYTEST_XDIST_AUTO_NUM_WORKERS``)."""
    configured = os.environ.get(WORKERS_ENV, "").strip()
    if configured.isdigit():
        return int(configured)
    return len(os.sched_getaffinity(0)) + 1
