"""How the test processes' interpreter runs: bytecode caches kept, a garbage collector
that does not rescan what lives for the whole session.

Bytecode. Container images often set ``PYTHONDONTWRITEBYTECODE``. Without the caches, every
xdist worker compiles and assertion-rewrites all the test modules again on every run (pytest
keeps its rewritten modules only as ``__pycache__`` files), and every server and ``proctor``
process the tests start compiles the sources again. Collecting the suite in one process
took 23.0 s of CPU with the variable set and 11.7 s with a warm cache. The caches go where
Python puts them by default, ``__pycache__`` directories (ignored by ``.gitignore``); the
variable is dropped from the environment before the xdist workers start, so the workers and
everything they start inherit the change.

Garbage collector. After collection a worker holds millions of objects that live until it
exits (modules, the collected items, SQLAlchemy's and scipy's tables), and every full
collection walked them all again: in ``tests/server/review`` and ``tests/server/scoring`` on
two workers the collector took about 4 s of a worker's 33 s of CPU. They are frozen
(``gc.freeze``: moved to a generation the collector never scans) once collection ends, and
the youngest generation is collected after 10,000 allocations instead of 700, so the many
short-lived objects of a request are collected in fewer, larger passes: about 2 s of 27 s.
"""

from __future__ import annotations

import gc
import os
import sys

import pytest

NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"
GC_THRESHOLDS = (10_000, 50, 50)
"""Allocations before a young collection, and young (then middle) collections before the
next older one (``gc.set_threshold``)."""


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Write bytecode caches from here on, here and in every process started later."""
    os.environ.pop(NO_BYTECODE, None)
    sys.dont_write_bytecode = False


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what the session keeps (after one last full collection) and space out the
    young collections."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
