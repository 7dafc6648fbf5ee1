"""Seconds of test time per test folder, from JUnit reports: the before/after table of the
suite's speed (docs/benchmarks.md, "The suite's wall clock").

    python tests/benchmarks/junit_by_folder.py BEFORE.xml AFTER.xml

Each report's ``testcase`` times are summed per folder (``tests/server/sessions``: the
module's package), with the number of tests. Under pytest-xdist the sum is worker time, not
wall time: with several workers the wall clock is shorter than the sum.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def by_folder(report: Path) -> dict[str, tuple[float, int]]:
    """Folder -> (seconds, tests) of one JUnit report."""
    seconds: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "")
        folder = "/".join(module.split(".")[:-1]) or "(top)"
        # tests.server.cli.test_x's folder is tests/server/cli; a class adds one more component
        if module.split(".")[-1][:1].isupper():
            folder = "/".join(module.split(".")[:-2])
        seconds[folder] += float(case.get("time", 0) or 0)
        tests[folder] += 1
    return {folder: (seconds[folder], tests[folder]) for folder in seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = by_folder(args.before), by_folder(args.after)
    print("| folder | tests before / after | seconds before | seconds after | after / before |")
    print("|---|---|---|---|---|")
    totals = [0.0, 0.0, 0, 0]
    for folder in sorted(before.keys() | after.keys()):
        (s0, n0), (s1, n1) = before.get(folder, (0.0, 0)), after.get(folder, (0.0, 0))
        ratio = f"{s1 / s0:.2f}" if s0 else "-"
        print(f"| {folder} | {n0} / {n1} | {s0:.0f} | {s1:.0f} | {ratio} |")
        totals = [totals[0] + s0, totals[1] + s1, totals[2] + n0, totals[3] + n1]
    s0, s1, n0, n1 = totals
    print(f"| all | {n0} / {n1} | {s0:.0f} | {s1:.0f} | {s1 / s0:.2f} |")


if __name__ == "__main__":
    main()
