# Hand-written course infrastructure (not generated from a notebook).
"""Run profiles: how big every experiment is, chosen once per run.

=========  ==========================================  ===============================
profile    meant for                                   choose with
=========  ==========================================  ===============================
``smoke``  CI and nbval: every notebook in seconds      ``ATTN_PROFILE=smoke``
``cpu``    a student's laptop: minutes, real results    default without a GPU
``full``   a GPU: the real experiment                   default when CUDA is available
=========  ==========================================  ===============================

Chapters read every size from :func:`current_profile` so one switch scales the whole course.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field

PROFILE_ENV = "ATTN_PROFILE"


@dataclass(frozen=True)
class Profile:
    """Sizes for one run profile. ``None`` in a size means "the whole split"."""

    name: str
    description: str
    train_size: int | None  # reviews/examples taken from the training split
    test_size: int | None  # examples taken from the test split
    val_fraction: float  # share of the training subset held out for model selection
    epochs: int
    batch_size: int
    embed_dim: int
    hidden_dim: int
    max_len: int  # tokens kept per text
    vocab_size: int  # max vocabulary size / hash buckets
    patience: int  # early-stopping patience in epochs
    seeds: tuple[int, ...] = (0,)  # seeds for repeated experiments
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        description="CI and nbval: tiny subsets, one or two epochs; numbers only prove the code runs",
        train_size=2_000, test_size=1_000, val_fraction=0.1, epochs=2, batch_size=64,
        embed_dim=32, hidden_dim=32, max_len=200, vocab_size=2**14, patience=1, seeds=(0,),
    ),
    "cpu": Profile(
        name="cpu",
        description="a laptop CPU: full IMDB splits for cheap models, a few epochs, minutes per notebook",
        train_size=None, test_size=None, val_fraction=0.1, epochs=4, batch_size=64,
        embed_dim=64, hidden_dim=64, max_len=400, vocab_size=2**18, patience=2, seeds=(0, 1, 2),
    ),
    "full": Profile(
        name="full",
        description="a GPU: full data, wider models, more epochs, several seeds",
        train_size=None, test_size=None, val_fraction=0.1, epochs=10, batch_size=64,
        embed_dim=128, hidden_dim=128, max_len=800, vocab_size=2**20, patience=3, seeds=(0, 1, 2, 3, 4),
    ),
}


def default_profile_name() -> str:
    """``full`` when CUDA is available, else ``cpu``."""
    import torch

    return "full" if torch.cuda.is_available() else "cpu"


def current_profile(name: str | None = None) -> Profile:
    """The profile named by ``name``, else by ``$ATTN_PROFILE``, else the hardware default."""
    chosen = name or os.environ.get(PROFILE_ENV, "").strip() or default_profile_name()
    chosen = chosen.lower()
    if chosen not in PROFILES:
        raise ValueError(
            f"unknown run profile {chosen!r}: expected one of {sorted(PROFILES)} "
            f"(set {PROFILE_ENV} or pass name=...)"
        )
    return PROFILES[chosen]


def describe_device(device=None) -> str:
    """Human-readable device, e.g. ``cuda (NVIDIA H200)`` or ``cpu (2 threads)``."""
    import torch

    device = torch.device(device) if device is not None else None
    if device is None:
        if torch.cuda.is_available():
            device = torch.device("cuda")
        elif getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            device = torch.device("mps")
        else:
            device = torch.device("cpu")
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        return f"cpu ({torch.get_num_threads()} threads, {platform.machine()})"
    return device.type


def run_info(profile: Profile | None = None, device=None) -> dict:
    """Everything a printed number must carry: profile, device and versions."""
    import torch

    profile = profile or current_profile()
    return {
        "profile": profile.name,
        "device": describe_device(device),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
    }


THREADS_ENV = ("ATTN_THREADS", "OMP_NUM_THREADS")  # a thread count set by hand wins over the choice


def cores_available() -> int:
    """The CPU cores this process may run on (its affinity mask, else all of them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of the whole machine from ``/proc/stat``; None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [float(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    return total - idle, total


def busy_cores(sample_s: float = 0.3) -> float | None:
    """How many cores other processes keep busy now, measured over ``sample_s`` seconds while this
    one sleeps (``/proc/stat``); None where it cannot be measured."""
    first = _cpu_times()
    if first is None:
        return None
    time.sleep(sample_s)
    second = _cpu_times()
    if second is None or second[1] <= first[1]:
        return None
    return (second[0] - first[0]) / (second[1] - first[1]) * (os.cpu_count() or 1)


def choose_cpu_threads(sample_s: float = 0.3) -> tuple[int, str]:
    """Set torch's CPU threads to the cores that are free now; return (threads, why).

    PyTorch starts one OpenMP thread per core. When another program keeps a core busy, the thread
    that shares that core is descheduled for whole time slices while the others spin at every
    barrier, waiting for it: small-tensor training (this course's) then runs tens of times slower
    (seen: 125x, a BiLSTM on 2 cores beside one single-threaded process). One thread per free core
    avoids the wait. A count set by hand (``ATTN_THREADS`` or ``OMP_NUM_THREADS``) is kept.
    """
    import torch

    for name in THREADS_ENV:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                threads = int(value)
            except ValueError:
                raise ValueError(f"{name} must be a whole number of threads, got {value!r}") from None
            if threads < 1:
                raise ValueError(f"{name} must be at least 1, got {threads}")
            torch.set_num_threads(threads)
            return threads, f"set by {name}"
    cores = cores_available()
    busy = busy_cores(sample_s) if cores > 1 else 0.0
    if busy is None:
        torch.set_num_threads(cores)
        return cores, "one per core (the machine's load cannot be read here)"
    free = max(1, min(cores, int(cores - busy + 0.25)))  # a core 75 % busy is not free
    torch.set_num_threads(free)
    if free == cores:
        return free, "one per core"
    return free, (f"{cores - free} of {cores} cores busy with other programs: one thread per free core, "
                  "so that no thread waits for a descheduled one")


def print_run_header(profile: Profile | None = None, device=None) -> Profile:
    """Print the line every notebook starts with; return the profile. On the CPU it first chooses
    the number of threads (:func:`choose_cpu_threads`) and says why."""
    profile = profile or current_profile()
    why = None
    if _runs_on_cpu(device):
        _, why = choose_cpu_threads()
    info = run_info(profile, device)
    print(
        f"Run profile: {info['profile']}  |  device: {info['device']}  |  "
        f"torch {info['torch']}  |  python {info['python']}"
    )
    print(f"  ({profile.description}; change with {PROFILE_ENV}=smoke|cpu|full)")
    if why and why not in ("one per core", "set by OMP_NUM_THREADS"):
        print(f"  (CPU threads: {why})")
    return profile


def _runs_on_cpu(device) -> bool:
    import torch

    if device is not None:
        return torch.device(device).type == "cpu"
    return not torch.cuda.is_available() and not (
        getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
