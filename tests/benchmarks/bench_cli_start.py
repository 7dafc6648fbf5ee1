"""Benchmark: how long ``proctor --help`` and every ``proctor GROUP --help`` take to start.

Run (not collected by pytest; nothing else busy on the machine)::

    cd /work/main && . .venv/bin/activate
    python tests/benchmarks/bench_cli_start.py [--rounds 7] [--against /path/to/other/checkout]

Each page is shown by a fresh interpreter, ``python -m server [GROUP] --help``, as a user's
shell starts it: the wall time from spawning the process to its exit, interpreter start-up
and imports included. With ``--against``, the same command runs in the other checkout too
(its own code on ``PYTHONPATH``, the same interpreter and packages), alternating with this
one round by round, so that both are measured under the same conditions. Figures are the
minimum, median and maximum over the rounds; the target is a median under 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET_S = 1.0


def pages() -> list[tuple[str, ...]]:
    sys.path.insert(0, str(ROOT))
    from server.cli.main import COMMANDS

    return [(), *((entry.name,) for entry in COMMANDS)]


def start(checkout: Path, page: tuple[str, ...]) -> float:
    """Seconds from spawning ``python -m server PAGE --help`` in ``checkout`` to its exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PYTHONPATH"] = str(checkout)
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "server", *page, "--help"],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: proctor {' '.join(page)} --help failed: {done.stderr!r}")
    return elapsed


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--against", type=Path, help="another checkout to measure beside")
    args = parser.parse_args()
    checkouts = [ROOT] + ([args.against.resolve()] if args.against else [])
    times: dict[tuple[Path, tuple[str, ...]], list[float]] = {}
    for _ in range(args.rounds):
        for page in pages():
            for checkout in checkouts:
                times.setdefault((checkout, page), []).append(start(checkout, page))
    header = "page".ljust(24) + "".join(
        f"{c.name + ' (min / median / max s)':>36}" for c in checkouts
    )
    print(f"{args.rounds} rounds, {os.cpu_count()} cores; target: median < {TARGET_S:g} s")
    print(header)
    misses = 0
    for page in pages():
        label = "proctor " + " ".join([*page, "--help"])
        cells = "".join(f"{spread(times[(c, page)]):>36}" for c in checkouts)
        print(label.ljust(24) + cells)
        misses += statistics.median(times[(ROOT, page)]) >= TARGET_S
    print(f"{misses} page(s) at or over {TARGET_S:g} s in {ROOT.name}")


if __name__ == "__main__":
    main()
