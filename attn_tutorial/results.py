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
    python -m attn_tutorial.results dry-run --profile full           # every experiment, 2 steps each
    python -m attn_tutorial.results estimate --profile full          # how long the real runs take here

A record is merged by seed: running seeds that a record already holds replaces those seeds
only (with a warning) and keeps the others.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import importlib
import json
import math
import os
import pkgutil
import platform
import re
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from attn_tutorial import runs as _runs
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
    dry_run: bool = False  # sizes of the profile, two steps per loop (see attn_tutorial.runs)


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


@functools.lru_cache(maxsize=1)
def code_commit() -> str | None:
    """The commit of the code this process runs: taken once, at its first run, because a commit made
    while a long run trains does not change the code the process has already loaded."""
    return git_commit()


CODE_PATHS = ("attn_tutorial", "pyproject.toml", "requirements.lock")


def git_commit() -> str | None:
    root = repo_root()
    if root is None:
        return None
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        # "-dirty" when the code that runs differs from the commit, a new module not yet committed
        # included; edited prose does not count
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=normal", "--", *CODE_PATHS], cwd=root,
            capture_output=True, text=True, timeout=10,
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
    dry_run: bool = False,
) -> dict:
    """Run one seed of an experiment and return its full record (nothing is written).

    ``dry_run`` runs it inside :func:`attn_tutorial.runs.dry_run` (the caller may instead open
    one itself to choose its precision and read its measurements): the profile's sizes, two
    optimisation steps per loop, no checkpoint read or written; its metrics mean nothing.
    """
    import torch

    from attn_tutorial.training import get_device, seed_everything

    exp = get_experiment(name)
    commit = code_commit()  # now, before training: the experiment's modules are loaded
    prof = profile if isinstance(profile, Profile) else current_profile(profile)
    device = torch.device(device) if device is not None else get_device()
    if retrain is None:
        retrain = os.environ.get("ATTN_RETRAIN", "").lower() in ("1", "true", "yes")
    ckpt = checkpoint_path(name, prof.name, seed)
    seed_everything(seed)
    dry = dry_run or _runs.active() is not None
    ctx = RunContext(prof, seed, device, ckpt, retrain, progress, dry)
    device_name = describe_device(device)
    try:
        expected = _runs.recorded_epoch_seconds(load_records(name), prof.name, device_name)
    except RecordError:
        expected = None
    start = time.perf_counter()
    with _runs.current_run(experiment=name, profile=prof.name, seed=seed, expected_epoch_s=expected):
        if dry_run and _runs.active() is None:
            with _runs.dry_run():
                out = exp.function(ctx)
        else:
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
        **({"dry_run": True} if dry else {}),
        "wall_time_s": round(wall, 2),
        "extra": out.get("extra", {}),
        "versions": {
            "torch": torch.__version__,
            "numpy": numpy.__version__,
            "scikit-learn": sklearn.__version__,
            "python": sys.version.split()[0],
            "platform": platform.platform(terse=True),
        },
        "git_commit": commit,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def decimals_for(std: float) -> int:
    """The book's rounding rule: a standard deviation keeps two significant digits, with at least
    one decimal and at most two, and its mean keeps the same decimals (87.87 ± 0.53, 74.7 ± 3.2,
    92.3 ± 13.2, 14.04 ± 0.08)."""
    if not math.isfinite(std) or std < 0:
        raise ValueError(f"a standard deviation must be finite and >= 0, got {std}")
    if std == 0:
        return 1
    return min(max(1 - math.floor(math.log10(std)), 1), 2)


def mean_std(mean: float, std: float | None = None, n: int = 2) -> str:
    """``"mean ± std"`` under :func:`decimals_for`; with one run (``n < 2`` or ``std is None``) the
    value alone, with two decimals."""
    if std is None or n < 2:
        return f"{mean:.2f}"
    places = decimals_for(std)
    return f"{mean:.{places}f} ± {std:.{places}f}"


def summarise(runs: list[dict]) -> dict:
    """Mean and sample standard deviation of every numeric metric over seeds."""
    summary = {}
    for key in runs[0]["metrics"]:
        values = [r["metrics"][key] for r in runs if isinstance(r["metrics"].get(key), (int, float))]
        if any(not math.isfinite(v) for v in values):
            bad = [r.get("seed") for r in runs if not math.isfinite(r["metrics"].get(key, 0.0))]
            raise ValueError(f"metric {key!r} is not a finite number in seed(s) {bad}: an experiment must "
                             f"record a number (or leave the metric out), not NaN or infinity")
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


class RecordError(ValueError):
    """A record file that cannot be read (truncated, hand-edited, or not a record)."""


def read_record(path: Path) -> dict:
    """One record file, checked; a malformed one is a :class:`RecordError` naming the file."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RecordError(f"the record {path} cannot be read ({type(error).__name__}: {error}); "
                          "restore it with `git checkout -- <file>` or run the experiment again") from error
    missing = [key for key in ("experiment", "profile", "seeds", "summary", "runs") if not isinstance(record, dict)
               or key not in record]
    if missing or not isinstance(record["runs"], list) or not record["runs"]:
        raise RecordError(f"the record {path} is malformed (missing or empty: {', '.join(missing) or 'runs'}); "
                          "restore it with `git checkout -- <file>` or run the experiment again")
    for i, run in enumerate(record["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("metrics"), dict) or "seed" not in run:
            raise RecordError(f"the record {path} is malformed: run {i} has no 'seed' or 'metrics'")
    return record


def _merged_record(path: Path, name: str, runs: list[dict], command: str) -> dict:
    """The record to write at ``path``: ``runs`` merged by seed into the record already there."""
    seeds_now = [r["seed"] for r in runs]
    commands = [command]
    if path.exists():
        old = read_record(path)
        replaced = sorted(set(seeds_now) & {r["seed"] for r in old["runs"]})
        if replaced:
            warnings.warn(f"{path}: seed(s) {', '.join(map(str, replaced))} run again; the new runs replace "
                          "the recorded ones, the other seeds are kept", stacklevel=3)
        kept = [r for r in old["runs"] if r["seed"] not in seeds_now]
        runs = sorted(kept + list(runs), key=lambda r: r["seed"])
        if kept:
            previous = old.get("produced_by")
            commands = [c for c in (previous if isinstance(previous, list) else [previous]) if c] + [command]
    devices = list(dict.fromkeys(r["device"] for r in runs))
    record = {
        "experiment": name,
        "description": runs[0]["description"],
        "profile": runs[0]["profile"],
        "device": " + ".join(devices),
        "seeds": [r["seed"] for r in runs],
        "summary": summarise(runs),
        "produced_by": commands[0] if len(commands) == 1 else list(dict.fromkeys(commands)),
        "runs": runs,
    }
    return record


def write_record(name: str, runs: list[dict], command: str, directory: Path | None = None) -> Path:
    """Write the record of a (multi-seed) run atomically; return its path.

    An existing record of the same experiment and profile is merged by seed: the seeds run now
    replace theirs (with a warning naming them), every other recorded seed is kept.
    ``directory`` defaults to the book's ``book/results``; notebooks pass their local cache.
    """
    if not runs:
        raise ValueError("write_record needs at least one run")
    if any(run.get("dry_run") for run in runs):
        raise ValueError("a dry run's metrics mean nothing: it is never recorded")
    seeds_now = [r["seed"] for r in runs]
    if len(set(seeds_now)) != len(seeds_now):
        raise ValueError(f"write_record got the same seed twice: {seeds_now}")
    path = record_path(name, runs[0]["profile"], directory)
    # two processes recording seeds of one experiment at once: one reads, merges and writes at a time
    with _runs.exclusive(path, doing="recording"):
        record = _merged_record(path, name, runs, command)
        _runs.atomic_write_text(path, dumps_record(record))  # never half a record under the final name
    return path


def load_records(name: str) -> list[dict]:
    """All recorded profiles of an experiment (may be empty); a malformed file is a RecordError."""
    folder = results_dir() / name
    order = {"smoke": 0, "cpu": 1, "full": 2}
    records = [read_record(p) for p in folder.glob("*.json")] if folder.is_dir() else []
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
                row[label] = mean_std(mean, std, s["n"])
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


def provenance(name: str, markdown: bool = False) -> list[str]:
    """One line per recorded profile: seeds, versions, commit, date and the producing command.

    Plain text, for ``print`` in a notebook; ``markdown`` puts the profile and the commands in code
    spans (the results page displays the lines as Markdown)."""
    code = (lambda text: f"`{text}`") if markdown else (lambda text: text)
    lines = []
    for rec in load_records(name):
        first = rec["runs"][0]
        lines.append(
            f"{code(rec['profile'])}: seeds {', '.join(map(str, rec['seeds']))} on {rec['device']}, "
            f"torch {first['versions']['torch']}, commit {first.get('git_commit') or 'unknown'}, "
            f"{first['created'][:10]}; produced by "
            + ", ".join(code(c) for c in (rec["produced_by"] if isinstance(rec["produced_by"], list)
                                          else [rec["produced_by"]]))
        )
    return lines


def recorded_times(profile: str = "full") -> list[dict]:
    """Per experiment recorded in ``profile``: device, seeds, median seconds per epoch and per seed."""
    _load_all_experiments()
    rows = []
    for name in sorted(EXPERIMENTS):
        for record in load_records(name):
            if record["profile"] != profile:
                continue
            epochs = [r["time_per_epoch_s"] for r in record["runs"] if r.get("time_per_epoch_s")]
            walls = [r["wall_time_s"] for r in record["runs"] if r.get("wall_time_s")]
            rows.append({"experiment": name, "device": record["device"], "seeds": len(record["seeds"]),
                         "s / epoch (median)": round(statistics.median(epochs), 1) if epochs else None,
                         "s / seed (median)": round(statistics.median(walls), 1) if walls else None})
    return rows


def book_experiments(profile: str | None = None) -> list[str]:
    """Registered experiments that executing the notebooks may train (seed 0).

    Those a notebook runs with an unconditional ``run_experiment`` call always; those it only names
    (read through ``recorded_or_run``, a record table or a call in a branch) only where ``profile``
    has no record yet.
    """
    _load_all_experiments()
    root = repo_root()
    if root is None:
        return sorted(EXPERIMENTS)
    lines = [line for p in sorted((root / "notebooks").glob("*.md")) for line in p.read_text(encoding="utf-8").splitlines()]
    quoted = lambda name, text: f'"{name}"' in text or f"'{name}'" in text  # noqa: E731
    chosen = []
    for name in EXPERIMENTS:
        # an unindented call runs on every execution; an indented one sits in a branch (e.g. "no record yet")
        direct = any("run_experiment(" in line and quoted(name, line) and not line[:1].isspace() for line in lines)
        named = any(quoted(name, line) for line in lines)
        if direct or (named and not (profile and record_path(name, profile).is_file())):
            chosen.append(name)
    return chosen


def dry_run_one(name: str, profile: Profile, precision: str | None = None, seed: int = 0,
                batch: int | None = None, examples: int | None = None, length: int | None = None) -> dict:
    """Dry-run one experiment; return its time, loop measurements and estimated real run time.

    ``batch`` caps the profile's batch size, ``examples`` the data slice and ``length`` a sequence
    model's context (CI uses all three to stay within its time budget; every other size stays the
    profile's). Estimates need none of them.
    """
    import dataclasses

    import torch

    if batch is not None:
        profile = dataclasses.replace(profile, batch_size=min(profile.batch_size, batch))
    threads = torch.get_num_threads()
    settings = {"max_examples": examples} if examples else {}
    with _runs.dry_run(precision=precision, max_length=length, **settings) as state:
        start = time.perf_counter()
        run_experiment(name, profile, seed, progress=False, retrain=True)
        wall = time.perf_counter() - start
    torch.set_num_threads(threads)  # a timing experiment may have pinned one thread
    measured = sum(sum(r.seconds) for r in state.loops)
    return {"experiment": name, "precision": precision or "float32", "seconds": wall,
            "train_steps": sum(len(r.seconds) for r in state.loops if r.kind == "train"),
            "planned_train_steps": sum(r.planned * r.repeat for r in state.loops if r.kind == "train"),
            # the real run: every loop at its full length, plus what the dry run spent outside loops
            "estimate_s": state.estimate_seconds() + max(wall - measured, 0.0)}


def _quiet():
    import contextlib
    import io

    return contextlib.redirect_stdout(io.StringIO())


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
    run.add_argument("--dry-run", action="store_true", help="two steps per loop at the profile's sizes; nothing recorded")
    dry = sub.add_parser("dry-run", help="dry-run experiments (default: all) at a profile's sizes")
    dry.add_argument("names", nargs="*")
    dry.add_argument("--profile", default="full")
    dry.add_argument("--batch", type=int, default=None, help="cap the batch size (default: the profile's)")
    dry.add_argument("--examples", type=int, default=None, help="rows of the data slice (default 256)")
    dry.add_argument("--precision", choices=("float32", *_runs.PRECISIONS), default=None,
                     help="autocast to emulate (default: what the profile's GPU would use, bf16, for full)")
    est = sub.add_parser("estimate", help="time a few steps of each experiment here and print the expected total")
    est.add_argument("names", nargs="*")
    est.add_argument("--profile", default=None, help="default: $ATTN_PROFILE or the hardware")
    est.add_argument("--book", action="store_true",
                     help="only what `make book` may train: the notebooks' experiments without a record, seed 0")
    show = sub.add_parser("show", help="print the recorded results of an experiment")
    show.add_argument("name")
    args = parser.parse_args(argv)

    if args.command == "list":
        _load_all_experiments()
        for exp in EXPERIMENTS.values():
            print(f"{exp.name:20s} {exp.description}  [{exp.module}]")
        return 0
    if args.command == "show":
        try:
            print(records_table(args.name).to_string())
        except RecordError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        return 0
    if args.command in ("dry-run", "estimate"):
        prof = current_profile(args.profile)
        _load_all_experiments()
        names = args.names or (book_experiments(prof.name) if getattr(args, "book", False) else sorted(EXPERIMENTS))
        for name in names:
            get_experiment(name)  # an unknown name fails before anything runs
        precision = getattr(args, "precision", None)
        if precision is None and args.command == "dry-run" and prof.name == "full":
            precision = "bf16"  # what a current GPU runs (chapter 0's autocast_dtype)
        precision = None if precision == "float32" else precision
        seeds = 1 if getattr(args, "book", False) else len(prof.seeds)
        reusable = []
        if getattr(args, "book", False):  # a rebuild reuses finished checkpoints (if their configuration holds)
            reusable = [n for n in names if checkpoint_path(n, prof.name, 0).is_file()]
            names = [n for n in names if n not in reusable]
        print(f"{args.command}: {len(names)} experiment(s), profile {prof.name}, device "
              f"{describe_device()}, autocast {precision or 'as on this device'}", flush=True)
        total = total_estimate = 0.0
        failures = []
        for name in names:
            try:
                with _quiet():
                    row = dry_run_one(name, prof, precision, batch=getattr(args, "batch", None),
                                      examples=getattr(args, "examples", None))
            except Exception as error:  # report every failing experiment, not just the first
                failures.append(name)
                print(f"  {name:26s} FAILED: {type(error).__name__}: {str(error)[:300]}", flush=True)
                continue
            total += row["seconds"]
            total_estimate += seeds * row["estimate_s"]
            print(f"  {name:26s} {row['seconds']:6.1f} s dry run"
                  + (f"   estimate {_runs.fmt_duration(seeds * row['estimate_s'])}"
                     f" ({seeds} seed{'s' if seeds > 1 else ''})" if args.command == "estimate" else ""),
                  flush=True)
        print(f"dry runs: {total:.1f} s in all; {len(failures)} failed" + (f": {', '.join(failures)}" if failures else ""))
        if reusable:
            print(f"not counted, a checkpoint exists (reused if its configuration is unchanged): {', '.join(reusable)}")
        if args.command == "estimate":
            print(f"estimated time of the {prof.name} runs on {describe_device()}: about "
                  f"{_runs.fmt_duration(total_estimate)} (an upper bound: early stopping and finished "
                  "checkpoints shorten it; preparing full-size data is not included)")
        if args.command == "dry-run":
            print("not reachable here (CUDA only): " + "; ".join(path for path, _ in _runs.CUDA_ONLY))
        return 1 if failures else 0
    prof = current_profile(args.profile)
    seeds = args.seeds if args.seeds is not None else list(prof.seeds)
    command = f"python -m attn_tutorial.results run {args.name} --profile {prof.name} --seeds {' '.join(map(str, seeds))}"
    runs = []
    for seed in seeds:
        rec = run_experiment(args.name, prof, seed, retrain=args.retrain,
                             progress=False if args.no_progress else None, dry_run=args.dry_run)
        print(f"{args.name} [{rec['profile']}, {rec['device']}, seed {seed}{', dry run' if args.dry_run else ''}]: "
              f"{rec['metrics']}")
        runs.append(rec)
        if not args.dry_run:  # after each seed (records merge by seed): an interrupted run keeps its seeds
            print(f"recorded {write_record(args.name, [rec], command)} (seed {seed})")
    if args.dry_run:
        print("dry run: nothing recorded")
    return 0


if __name__ == "__main__":
    # Run main() from the imported module, not from __main__: experiments register themselves in
    # attn_tutorial.results.EXPERIMENTS, which a second copy of this file would not see.
    from attn_tutorial.results import main as _main

    sys.exit(_main())
