"""The pinned environment: one lock file, mirrored by environment.yml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import ROOT


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_key_pins():
    pins = lock_pins()
    assert pins["torch"] == "2.13.0"
    assert pins["jupyter-book"].startswith("1.")
    for needed in ("jupytext", "nbval", "matplotlib", "seaborn", "datasets", "scikit-learn", "tqdm",
                   "sphinx-exercise", "sphinxcontrib-bibtex", "sphinx-book-theme", "django-static-mathjax",
                   "pytest-socket", "playwright", "ipykernel", "setuptools", "nbgrader"):
        assert needed in pins, needed


def test_conda_environment_mirrors_the_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_pins = {n.lower().replace("_", "-"): v for n, v in (p.split("==") for p in pip_section)}
    assert conda_pins == lock_pins()
    assert "python=3.11" in env["dependencies"]


def test_the_environment_is_compiled_to_bytecode_once():
    """make setup writes the .pyc files: a process that cannot write them (a grading sandbox, whose
    environment is read-only, or any under PYTHONDONTWRITEBYTECODE) would otherwise compile torch's
    sources at every import, about twice the import's time."""
    import importlib.util
    import sys

    import torch

    cached = importlib.util.cache_from_source(torch.__file__)
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("not make setup's environment (.venv)")
    assert __import__("os").path.isfile(cached), f"{cached} is missing: install with uv's --compile-bytecode"
