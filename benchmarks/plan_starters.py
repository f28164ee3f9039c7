"""Wall time of ``hitkit plan`` on each protocol's starter study, as a new user runs it (issue 46).

For each task it writes the starter with ``hitkit init DIR --task TASK`` into a temporary folder, then times
the whole command ``hitkit plan DIR/study.yaml --json`` in a fresh process (interpreter start, imports,
designs, the simulated studies, writing plan.csv), with the default time budget (20 s) unless ``--seconds``
says otherwise. Before each run it reads the 1-minute load average (``/proc/loadavg``): other processes share
the CPU, and the budget then fits fewer simulated studies per size, so each line gives the studies run and
the precision they reached. Target: every starter answers within 30 s on a loaded 2-core machine.

Run: ``.venv/bin/python benchmarks/plan_starters.py [--tasks pairwise,rating] [--seconds 20] [--repeat 1]
[--nice 19]`` (``--nice``: the plan runs at that niceness, so it gets the CPU only when the other processes
leave it: a busier machine than the load average shows, without loading anyone else more).
Last line: ``RESULT plan_s_pairwise=… plan_s_rating=… plan_s_live_chat=… plan_s_arena=…
plan_s_spot_the_bot=… max_s=… replicates_min=… precision_max=… load=LOW-HIGH``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASKS = ("pairwise", "rating", "live_chat", "arena", "spot_the_bot")
TARGET_S = 30.0


def hitkit_command() -> list[str]:
    """The ``hitkit`` program of this interpreter's environment (as a user types it), else the CLI via ``-c``."""
    script = Path(sys.executable).parent / "hitkit"
    if script.is_file():
        return [sys.executable, str(script)]
    return [sys.executable, "-c", "import sys; from hitkit.cli import main; sys.exit(main())"]


def load_average() -> float:
    """The 1-minute load average, or NaN where the system has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def time_plan(task: str, folder: Path, seconds: float | None, nice: int = 0) -> dict:
    """Write the starter of ``task`` in ``folder`` and time ``hitkit plan`` on it (the whole process), at
    ``nice`` (a positive niceness: the plan yields the CPU to every other process, as on a busier machine)."""
    hitkit = hitkit_command()
    study_dir = folder / task
    subprocess.run([*hitkit, "init", str(study_dir), "--task", task], check=True, capture_output=True, text=True)
    budget = [] if seconds is None else ["--seconds", str(seconds)]
    load = load_average()
    began = time.monotonic()
    run = subprocess.run(
        [
            *(["nice", "-n", str(nice)] if nice else []),
            *hitkit,
            "plan",
            str(study_dir / "study.yaml"),
            "--json",
            *budget,
        ],
        capture_output=True,
        text=True,
        cwd=study_dir,
    )
    wall = time.monotonic() - began
    if run.returncode != 0:
        raise SystemExit(f"hitkit plan on the {task} starter failed:\n{run.stderr or run.stdout}")
    out = json.loads(run.stdout)
    return {
        "task": task,
        "wall_s": wall,
        "load": load,
        "replicates": out["replicates"],
        "precision": out["precision"],
        "plan_s": out["seconds"],
        "sizes": len(out["table"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated starters to time")
    parser.add_argument("--seconds", type=float, default=None, help="plan's --seconds (default: its own, 20 s)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per starter (the slowest is reported)")
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="run plan at this niceness (e.g. 19): it then gets the CPU only when the other processes leave "
        "it, a harsher machine than the load average says, without loading the others more",
    )
    args = parser.parse_args()
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        raise SystemExit(f"--tasks: unknown {', '.join(unknown)}; choose from {', '.join(TASKS)}")
    folder = Path(tempfile.mkdtemp(prefix="hitkit-plan-bench-"))
    runs = []
    try:
        print(f"{'starter':<13}{'wall s':>8}{'load':>7}{'studies/size':>14}{'sizes':>7}{'precision':>11}", flush=True)
        for task in tasks:
            for i in range(args.repeat):
                run = time_plan(task, folder / f"run{i}", args.seconds, args.nice)
                runs.append(run)
                flag = "" if run["wall_s"] <= TARGET_S else f"  over {TARGET_S:g} s"
                print(
                    f"{task:<13}{run['wall_s']:>8.1f}{run['load']:>7.1f}{run['replicates']:>14}"
                    f"{run['sizes']:>7}{'±' + format(run['precision'], '.2f'):>11}{flag}",
                    flush=True,
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    slowest = {t: max(r["wall_s"] for r in runs if r["task"] == t) for t in tasks}
    loads = [r["load"] for r in runs]
    fields = " ".join(f"plan_s_{t}={s:.1f}" for t, s in slowest.items())
    print(
        f"RESULT {fields} max_s={max(slowest.values()):.1f} "
        f"replicates_min={min(r['replicates'] for r in runs)} "
        f"precision_max={max(r['precision'] for r in runs):.2f} load={min(loads):.1f}-{max(loads):.1f}"
        + (f" nice={args.nice}" if args.nice else "")
    )


if __name__ == "__main__":
    main()
