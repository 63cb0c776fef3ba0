# Hand-written course infrastructure (not generated from a notebook).
"""Named experiments and their recorded results.

A chapter registers an experiment with :func:`experiment`; the function gets a
:class:`RunContext` and returns a dict with at least ``metrics`` (test-split numbers) and
``n_params``. :func:`run_experiment` adds what every printed number must carry (profile, device,
seed, versions, git commit, timing) and, with ``record=True``, writes
``book/results/<experiment>/<profile>.json``. The book shows those files, so a CPU rebuild can
still show GPU (``full``) numbers.

Command line::

    python -m attn_tutorial.results list
    python -m attn_tutorial.results run ch00_bow --profile cpu --seeds 0 1 2
    python -m attn_tutorial.results show ch00_bow
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import pkgutil
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from attn_tutorial.paths import checkpoint_path, repo_root, results_dir
from attn_tutorial.profiles import Profile, current_profile, describe_device

EXPERIMENTS: dict[str, "Experiment"] = {}


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    function: Callable
    module: str


@dataclass(frozen=True)
class RunContext:
    """What an experiment function receives."""

    profile: Profile
    seed: int
    device: object  # torch.device
    checkpoint: Path  # where the trained weights live; reused when present
    retrain: bool  # ignore an existing checkpoint
    progress: bool | None  # False hides progress bars; None leaves it to tqdm


def experiment(name: str, description: str):
    """Register ``function(ctx: RunContext) -> dict`` as experiment ``name``."""

    def register(function):
        EXPERIMENTS[name] = Experiment(name, description, function, function.__module__)
        return function

    return register


def _load_all_experiments() -> None:
    import attn_tutorial
    from attn_tutorial import INFRASTRUCTURE

    for info in pkgutil.iter_modules(attn_tutorial.__path__):
        if info.name not in INFRASTRUCTURE and not info.name.startswith("_"):
            importlib.import_module(f"attn_tutorial.{info.name}")


def get_experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        _load_all_experiments()
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}: expected one of {sorted(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def git_commit() -> str | None:
    root = repo_root()
    if root is None:
        return None
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def run_experiment(
    name: str,
    profile: str | Profile | None = None,
    seed: int = 0,
    *,
    device=None,
    retrain: bool | None = None,
    progress: bool | None = None,
) -> dict:
    """Run one seed of an experiment and return its full record (nothing is written)."""
    import torch

    from attn_tutorial.training import get_device, seed_everything

    exp = get_experiment(name)
    prof = profile if isinstance(profile, Profile) else current_profile(profile)
    device = torch.device(device) if device is not None else get_device()
    if retrain is None:
        retrain = os.environ.get("ATTN_RETRAIN", "").lower() in ("1", "true", "yes")
    ckpt = checkpoint_path(name, prof.name, seed)
    seed_everything(seed)
    ctx = RunContext(prof, seed, device, ckpt, retrain, progress)
    start = time.perf_counter()
    out = exp.function(ctx)
    wall = time.perf_counter() - start
    if "metrics" not in out:
        raise ValueError(f"experiment {name!r} returned no 'metrics' entry")
    import numpy, sklearn  # noqa: E401  (versions only)

    return {
        "experiment": name,
        "description": exp.description,
        "profile": prof.name,
        "profile_sizes": prof.as_dict(),
        "seed": seed,
        "device": describe_device(device),
        "metrics": out["metrics"],
        "n_params": out.get("n_params"),
        "epochs_run": out.get("epochs_run"),
        "time_per_epoch_s": out.get("time_per_epoch_s"),
        "reused_checkpoint": out.get("reused_checkpoint", False),
        "wall_time_s": round(wall, 2),
        "extra": out.get("extra", {}),
        "versions": {
            "torch": torch.__version__,
            "numpy": numpy.__version__,
            "scikit-learn": sklearn.__version__,
            "python": sys.version.split()[0],
            "platform": platform.platform(terse=True),
        },
        "git_commit": git_commit(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def summarise(runs: list[dict]) -> dict:
    """Mean and sample standard deviation of every numeric metric over seeds."""
    summary = {}
    for key in runs[0]["metrics"]:
        values = [r["metrics"][key] for r in runs if isinstance(r["metrics"].get(key), (int, float))]
        if len(values) == len(runs):
            summary[key] = {
                "mean": statistics.fmean(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "n": len(values),
            }
    return summary


def record_path(name: str, profile: str, directory: Path | None = None) -> Path:
    return Path(directory or results_dir()) / name / f"{profile}.json"


# a list that json.dumps(indent=...) spread over lines and that holds only numbers (never a string)
_NUMBER_LIST = re.compile(r"\[\n\s*(-?[\d.eE+-]+(?:,\n\s*-?[\d.eE+-]+)*)\n\s*\]")


def dumps_record(record: dict) -> str:
    """JSON text of a record: indented for reading and diffs, except that a list of plain numbers
    (a history column, an attention map's row) stays on one line; indenting those one number per
    line doubled the size of records that carry attention maps."""
    text = json.dumps(record, indent=2, sort_keys=False)
    return _NUMBER_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text) + "\n"


def write_record(name: str, runs: list[dict], command: str, directory: Path | None = None) -> Path:
    """Write the record of a (multi-seed) run atomically; return its path.

    ``directory`` defaults to the book's ``book/results``; notebooks pass their local cache.
    """
    if not runs:
        raise ValueError("write_record needs at least one run")
    path = record_path(name, runs[0]["profile"], directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "experiment": name,
        "description": runs[0]["description"],
        "profile": runs[0]["profile"],
        "device": runs[0]["device"],
        "seeds": [r["seed"] for r in runs],
        "summary": summarise(runs),
        "produced_by": command,
        "runs": runs,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(dumps_record(record), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_records(name: str) -> list[dict]:
    """All recorded profiles of an experiment (may be empty)."""
    folder = results_dir() / name
    order = {"smoke": 0, "cpu": 1, "full": 2}
    records = [json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")] if folder.is_dir() else []
    return sorted(records, key=lambda r: order.get(r["profile"], 9))


PERCENT_METRICS = ("accuracy", "f1", "precision", "recall")


def _is_percent(metric: str) -> bool:
    """Accuracy-like metrics (``accuracy``, ``accuracy_chunks``, ``f1``...) print in percent."""
    return metric.split("_")[0] in PERCENT_METRICS


def records_table(name: str, metrics: tuple[str, ...] | None = None):
    """Recorded results as a pandas table: one row per profile, mean ± sample std over seeds.

    ``metrics`` defaults to every metric the record has. Accuracy-like metrics are shown in
    percent, others (ratios, times) as recorded. :func:`provenance` says how each row was produced.
    """
    import pandas as pd

    records = load_records(name)
    if metrics is None:
        metrics = tuple(dict.fromkeys(k for rec in records for k in rec["summary"])) or ("accuracy", "f1")
    rows = []
    for rec in records:
        row = {"profile": rec["profile"], "device": rec["device"], "seeds": len(rec["seeds"])}
        for metric in metrics:
            s = rec["summary"].get(metric)
            if s is None:
                continue
            if _is_percent(metric):
                mean, std, label = 100 * s["mean"], 100 * s["std"], f"{metric} (%)"
                row[label] = f"{mean:.2f} ± {std:.2f}" if s["n"] > 1 else f"{mean:.2f}"
            else:
                mean = f"{s['mean']:,.0f}" if abs(s["mean"]) >= 1000 else f"{s['mean']:.3g}"
                row[metric] = f"{mean} ± {s['std']:.2g}" if s["n"] > 1 else mean
        first = rec["runs"][0]
        if first.get("n_params") is not None:
            row["parameters"] = first.get("n_params")
        epoch_times = [run["time_per_epoch_s"] for run in rec["runs"] if run.get("time_per_epoch_s") is not None]
        if epoch_times:  # the median over seeds: one run slowed by a neighbouring job does not set it
            row["s / epoch"] = round(statistics.median(epoch_times), 1)
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=["profile", "device", "seeds", *metrics]).set_index("profile")
    return pd.DataFrame(rows).set_index("profile")


def comparison_table(names, metrics: tuple[str, ...] = ("accuracy", "f1")):
    """Several experiments in one table, one row per (experiment, recorded profile)."""
    import pandas as pd

    tables = [records_table(name, metrics).assign(experiment=name) for name in names]
    tables = [t for t in tables if len(t)]
    if not tables:
        return pd.DataFrame()
    return pd.concat(tables).reset_index().set_index(["experiment", "profile"])


def provenance(name: str) -> list[str]:
    """One line per recorded profile: seeds, versions, commit, date and the producing command."""
    lines = []
    for rec in load_records(name):
        first = rec["runs"][0]
        lines.append(
            f"`{rec['profile']}`: seeds {', '.join(map(str, rec['seeds']))} on {rec['device']}, "
            f"torch {first['versions']['torch']}, commit {first.get('git_commit') or 'unknown'}, "
            f"{first['created'][:10]}; produced by `{rec['produced_by']}`"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attn_tutorial.results", description="Run and record experiments.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the registered experiments")
    run = sub.add_parser("run", help="run an experiment and write book/results/<name>/<profile>.json")
    run.add_argument("name")
    run.add_argument("--profile", default=None, help="smoke | cpu | full (default: $ATTN_PROFILE or the hardware)")
    run.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the profile's seeds")
    run.add_argument("--retrain", action="store_true", help="ignore existing checkpoints")
    run.add_argument("--no-progress", action="store_true")
    show = sub.add_parser("show", help="print the recorded results of an experiment")
    show.add_argument("name")
    args = parser.parse_args(argv)

    if args.command == "list":
        _load_all_experiments()
        for exp in EXPERIMENTS.values():
            print(f"{exp.name:20s} {exp.description}  [{exp.module}]")
        return 0
    if args.command == "show":
        print(records_table(args.name).to_string())
        return 0
    prof = current_profile(args.profile)
    seeds = args.seeds if args.seeds is not None else list(prof.seeds)
    runs = []
    for seed in seeds:
        rec = run_experiment(args.name, prof, seed, retrain=args.retrain, progress=False if args.no_progress else None)
        print(f"{args.name} [{rec['profile']}, {rec['device']}, seed {seed}]: {rec['metrics']}")
        runs.append(rec)
    command = f"python -m attn_tutorial.results run {args.name} --profile {prof.name} --seeds {' '.join(map(str, seeds))}"
    path = write_record(args.name, runs, command)
    print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    # Run main() from the imported module, not from __main__: experiments register themselves in
    # attn_tutorial.results.EXPERIMENTS, which a second copy of this file would not see.
    from attn_tutorial.results import main as _main

    sys.exit(_main())
