"""Record every ``full`` experiment the book reads, on a GPU, in pieces that fit short calls.

    python tools/gpu_run.py --plan                 # what would run, with the estimate per experiment
    python tools/gpu_run.py --budget 540           # run (experiment, seed) pairs for at most ~9 minutes
    python tools/gpu_run.py --summary              # the recorded GPU times, as a table for the guides

Each call first runs the ``full`` dry run of every experiment still to do (seconds on a GPU; it stops
the call before anything long when one fails), then runs one seed at a time and writes the record
after each seed (records merge by seed, so nothing recorded is ever lost). A seed that already has
a ``full`` record on this kind of device is skipped, so calling the script again continues where
the last call stopped. It starts a seed only when the time left in ``--budget`` covers that
experiment's expected time (from its measured dry run, or from a seed it already ran); a seed cut
off by an outer time limit resumes from its last finished epoch (``attn_tutorial.runs``).

Order: the experiments the book's chapters read first, cheap ones first within a chapter, so
that a partial run already fills whole chapters.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROFILE = "full"


def plan(names: list[str] | None, seeds: list[int] | None) -> list[tuple[str, int]]:
    """(experiment, seed) pairs still to record, in chapter order."""
    from attn_tutorial import results
    from attn_tutorial.profiles import PROFILES, describe_device

    results._load_all_experiments()
    chosen = names or sorted(results.EXPERIMENTS)  # the book reads the record of every one
    chosen = sorted(chosen, key=lambda n: (n[:4], n))  # chapter by chapter
    device = describe_device()
    todo = []
    for name in chosen:
        recorded = {run["seed"] for rec in results.load_records(name) if rec["profile"] == PROFILE
                    for run in rec["runs"] if run.get("device") == device}
        todo += [(name, s) for s in (seeds or PROFILES[PROFILE].seeds) if s not in recorded]
    return todo


def summary() -> str:
    """A markdown table of the recorded ``full`` runs: device, seeds, seconds per epoch and per seed."""
    from attn_tutorial.results import recorded_times

    rows = recorded_times(PROFILE)
    if not rows:
        return "no full-profile run recorded yet"
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join("–" if row[c] is None else str(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments (default: every registered one; the book reads them all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the full profile's seeds")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds this call may use (default 540)")
    parser.add_argument("--plan", action="store_true", help="print what would run and its estimate; run nothing")
    parser.add_argument("--summary", action="store_true", help="print the recorded full-profile times")
    args = parser.parse_args(argv)

    from attn_tutorial import results, runs
    from attn_tutorial.profiles import PROFILES, describe_device

    if args.summary:
        print(summary())
        return 0
    start = time.perf_counter()
    todo = plan(args.names, args.seeds)
    device = describe_device()
    print(f"gpu_run: {len(todo)} (experiment, seed) pair(s) to record in the {PROFILE} profile on {device}", flush=True)
    if not todo:
        return 0
    if not device.startswith("cuda"):
        print("warning: no CUDA device here; the full profile on this device takes days (see the estimate)")
    expected: dict[str, float] = {}
    for name in dict.fromkeys(n for n, _ in todo):  # dry run first: a broken path fails in seconds
        try:
            row = results.dry_run_one(name, PROFILES[PROFILE])
        except Exception as error:
            print(f"  dry run of {name} FAILED: {type(error).__name__}: {error}", flush=True)
            return 1
        expected[name] = row["estimate_s"]
        print(f"  {name:26s} dry run {row['seconds']:5.1f} s, one seed about {runs.fmt_duration(row['estimate_s'])}",
              flush=True)
    if args.plan:
        total = sum(expected[n] for n, _ in todo)
        print(f"plan: {len(todo)} seed runs, about {runs.fmt_duration(total)} in all on {device}")
        return 0
    done = 0
    for name, seed in todo:
        left = args.budget - (time.perf_counter() - start)
        if expected[name] > left:
            print(f"  stop: {name} seed {seed} needs about {runs.fmt_duration(expected[name])}, "
                  f"{runs.fmt_duration(left)} left in this call; call again to continue", flush=True)
            break
        record = results.run_experiment(name, PROFILES[PROFILE], seed, progress=False)
        command = f"python tools/gpu_run.py {name} --seeds {seed}"
        path = results.write_record(name, [record], command)
        expected[name] = max(record["wall_time_s"], 1.0)  # the measured time replaces the estimate
        done += 1
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"  {name} seed {seed}: {record['metrics']} in {record['wall_time_s']:.0f} s -> {shown}", flush=True)
    remaining = len(todo) - done
    print(f"gpu_run: {done} recorded, {remaining} left" + (" (call again)" if remaining else "; all done"))
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
