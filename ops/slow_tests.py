"""Write tests/slow_tests.txt from a test run's JUnit XML: every test (all its parameters together) that
took at least --seconds, so that ``ops/test.sh --fast`` leaves it to the full suite.

    .venv/bin/python -m pytest --junitxml=/tmp/junit.xml ...   # a whole run, e.g. ops/test.sh --junitxml=...
    .venv/bin/python ops/slow_tests.py /tmp/junit.xml
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "slow_tests.txt"


def durations(junit: Path) -> dict[str, float]:
    """Seconds per test id without parameters, summed over its parameters."""
    out: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname is tests.test_x (or tests.test_x.TestClass); name is test_y[params]
        path = "/".join(module[:2]) + ".py"
        cls = "::".join(module[2:])
        name = case.get("name", "").split("[")[0]
        out["::".join(x for x in (path, cls, name) if x)] += float(case.get("time", 0))
    return dict(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    times = durations(args.junit)
    slow = sorted((t, name) for name, t in times.items() if t >= args.seconds)
    fast_total = sum(t for t in times.values() if t < args.seconds)
    header = (
        f"# Tests that took at least {args.seconds:g} s (all parameters together) in one whole run; the fast "
        f"tier leaves them out.\n# Written by ops/slow_tests.py. The rest took {fast_total:.0f} s in that run.\n"
    )
    OUT.write_text(header + "".join(f"{name}  # {t:.1f} s\n" for t, name in reversed(slow)), encoding="utf-8")
    print(f"{len(slow)} slow of {len(times)} tests; the rest took {fast_total:.0f} s; wrote {OUT}")


if __name__ == "__main__":
    main()
