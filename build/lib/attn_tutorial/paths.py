# Hand-written course infrastructure (not generated from a notebook).
"""Where the course keeps things: repository root, cache, checkpoints, recorded results."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path | None:
    """The course repository containing this package, or None for an installed copy."""
    root = PACKAGE_DIR.parent
    return root if (root / "_toc.yml").is_file() else None


def cache_dir() -> Path:
    """Writable cache (``ATTN_CACHE_DIR``; else ``<repo>/.cache``; else ``~/.cache/attn_tutorial``).

    Holds processed datasets, checkpoints and local run records. Never the data directory,
    which may be read-only.
    """
    env = os.environ.get("ATTN_CACHE_DIR")
    if env:
        path = Path(env).expanduser()
    elif repo_root() is not None:
        path = repo_root() / ".cache"
    else:
        path = Path.home() / ".cache" / "attn_tutorial"
    path.mkdir(parents=True, exist_ok=True)
    return path


def results_dir() -> Path:
    """Recorded results shown in the book (``ATTN_RESULTS_DIR``, else ``<repo>/book/results``)."""
    env = os.environ.get("ATTN_RESULTS_DIR")
    if env:
        return Path(env).expanduser()
    root = repo_root()
    if root is None:
        return cache_dir() / "results"
    return root / "book" / "results"


def checkpoint_path(experiment: str, profile: str, seed: int) -> Path:
    """Checkpoint file of one experiment run: one per (experiment, profile, seed)."""
    return cache_dir() / "checkpoints" / experiment / f"{profile}-seed{seed}.pt"
