from __future__ import annotations

import pytest
import torch

from attn_tutorial import profiles


def test_env_selects_profile(monkeypatch):
    monkeypatch.setenv("ATTN_PROFILE", "cpu")
    assert profiles.current_profile().name == "cpu"
    assert profiles.current_profile("full").name == "full"  # an explicit name wins


def test_default_follows_hardware(monkeypatch):
    monkeypatch.delenv("ATTN_PROFILE")
    expected = "full" if torch.cuda.is_available() else "cpu"
    assert profiles.current_profile().name == expected


def test_unknown_profile_names_the_choices(monkeypatch):
    monkeypatch.setenv("ATTN_PROFILE", "huge")
    with pytest.raises(ValueError, match=r"unknown run profile 'huge': expected one of \['cpu', 'full', 'smoke'\]"):
        profiles.current_profile()


def test_profiles_grow_from_smoke_to_full():
    smoke, cpu, full = (profiles.PROFILES[n] for n in ("smoke", "cpu", "full"))
    assert smoke.train_size is not None and cpu.train_size is None
    assert smoke.epochs < cpu.epochs < full.epochs
    assert smoke.vocab_size < cpu.vocab_size < full.vocab_size
    assert len(full.seeds) >= 3 and len(cpu.seeds) >= 3


def test_run_header_names_profile_and_device(capsys):
    profiles.print_run_header(profiles.PROFILES["smoke"], device="cpu")
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("Run profile: smoke  |  device: cpu (")
    assert f"torch {torch.__version__}" in line
