"""Benchmark: ``proctor demo`` wall time with default settings, against its previous code path.

Run (not collected by pytest; one demo at a time on the machine)::

    cd /work/main && . .venv/bin/activate
    flock /tmp/bench.lock python tests/benchmarks/bench_demo.py [--rounds 2]
        [--items 150] [--sessions 3] [--models 4]

Each round runs, one after the other:

* ``demo``     -- ``python -m server demo`` exactly as a newcomer types it (the API in a
  process of its own, started while the bank is imported);
* ``baseline`` -- the same demo with ``DemoConfig(api_in_process=True)``: the API served from
  a thread of the demo's own process, as before, so the runner, the local models, the API and
  the scoring worker share one interpreter lock.

For each run: the wall time from spawning the interpreter to its exit (start-up and imports
included), the CPU seconds of the demo's process tree (user + system of it and of the
children it waited for), the stage marks the demo prints (seconds after spawn), and the
cores the *rest of the machine* used meanwhile (other work on the machine slows both
variants; the figures are comparable only when that column is low). ``CPU / cores`` is the
wall-time floor of a run that kept every core busy.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET_S = 60.0
STAGES = ("1/5", "2/5", "3/5", "4/5", "5/5")
BASELINE_CODE = """
import sys
from pathlib import Path
from server.cli.demo_config import DemoConfig
from server.cli.demo_runner import run_demo
from server.cli.output import table_console
items, sessions, models, report = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
result = run_demo(
    DemoConfig(items=items, sessions=sessions, models=models, report=Path(report),
               api_in_process=True),
    table_console(),
)
sys.exit(1 if result.failures or not result.ranking_matches else 0)
"""


@dataclass
class Run:
    variant: str
    wall_s: float
    cpu_s: float
    others_cores: float
    stages: dict[str, float]
    ok: bool


def machine_busy() -> float:
    """Busy CPU seconds of the whole machine since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(variant: str, args: argparse.Namespace, workdir: Path) -> Run:
    report = str(workdir / f"{variant}.html")
    sizes = ["--items", str(args.items), "--sessions", str(args.sessions)]
    sizes += ["--models", str(args.models)]
    if variant == "demo":
        cmd = [sys.executable, "-m", "server", "demo", *sizes, "--report", report]
    else:
        cmd = [sys.executable, "-c", BASELINE_CODE]
        cmd += [str(args.items), str(args.sessions), str(args.models), report]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(COLUMNS="160", PROCTOR_DATA_DIR=str(workdir / f"data-{variant}"))
    cpu0, busy0, t0 = children_cpu(), machine_busy(), time.monotonic()
    process = subprocess.Popen(
        cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    stages: dict[str, float] = {}
    tail: list[str] = []
    for line in process.stdout:
        mark = line.strip()[:3]
        if mark in STAGES and mark not in stages:
            stages[mark] = time.monotonic() - t0
        tail = [*tail, line][-40:]
    code = process.wait()
    wall = time.monotonic() - t0
    cpu = children_cpu() - cpu0
    others = max(0.0, (machine_busy() - busy0 - cpu) / wall)
    ok = code == 0 and any("The ranking matches" in line for line in tail)
    if not ok:
        print("".join(tail), file=sys.stderr)
    return Run(variant, wall, cpu, others, stages, ok)


def print_run(run: Run) -> None:
    marks = "  ".join(f"{k} {v:5.1f}" for k, v in run.stages.items())
    print(
        f"{run.variant:9} wall {run.wall_s:6.1f} s  cpu {run.cpu_s:6.1f} s  "
        f"cpu/cores {run.cpu_s / (os.cpu_count() or 1):5.1f} s  "
        f"others {run.others_cores:4.2f} cores  ok {run.ok}  stages: {marks}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--items", type=int, default=150)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--only", choices=("demo", "baseline"), help="run one variant (profiling)")
    args = parser.parse_args()
    variants = [args.only] if args.only else ["demo", "baseline"]
    runs: list[Run] = []
    print(
        f"proctor demo: {args.models} models x {args.sessions} sessions x {args.items} items, "
        f"{os.cpu_count()} cores, {args.rounds} round(s)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        for round_ in range(args.rounds):
            order = variants if round_ % 2 == 0 else variants[::-1]
            for variant in order:
                run = run_once(variant, args, Path(tmp))
                print_run(run)
                runs.append(run)
    print()
    print("| figure | measured (median) | target |")
    print("|---|---|---|")
    for variant in variants:
        mine = [r for r in runs if r.variant == variant]
        wall = statistics.median(r.wall_s for r in mine)
        cpu = statistics.median(r.cpu_s for r in mine)
        others = statistics.median(r.others_cores for r in mine)
        target = f"<= {TARGET_S:.0f} s" if variant == "demo" else "(baseline)"
        print(
            f"| {variant} wall (cpu {cpu:.1f} s, others {others:.2f} cores) | {wall:.1f} s | "
            f"{target} |"
        )
    if not all(r.ok for r in runs):
        sys.exit(1)


if __name__ == "__main__":
    main()
