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


def print_run_header(profile: Profile | None = None, device=None) -> Profile:
    """Print the line every notebook starts with; return the profile."""
    profile = profile or current_profile()
    info = run_info(profile, device)
    print(
        f"Run profile: {info['profile']}  |  device: {info['device']}  |  "
        f"torch {info['torch']}  |  python {info['python']}"
    )
    print(f"  ({profile.description}; change with {PROFILE_ENV}=smoke|cpu|full)")
    return profile
