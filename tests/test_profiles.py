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


def test_run_header_names_profile_and_device(capsys, monkeypatch):
    monkeypatch.setenv("ATTN_THREADS", str(torch.get_num_threads()))  # keep this worker's thread count
    profiles.print_run_header(profiles.PROFILES["smoke"], device="cpu")
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("Run profile: smoke  |  device: cpu (")
    assert f"torch {torch.__version__}" in line


@pytest.fixture
def keep_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("cores, busy, expected", [(2, 0.0, 2), (2, 0.2, 2), (2, 0.3, 1), (2, 1.0, 1), (2, 2.0, 1),
                                                   (8, 3.1, 5), (8, 3.3, 4), (1, 0.9, 1)])
def test_one_thread_per_free_core(monkeypatch, keep_threads, cores, busy, expected):
    for name in profiles.THREADS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(profiles, "cores_available", lambda: cores)
    monkeypatch.setattr(profiles, "busy_cores", lambda sample_s=0.3: busy)
    threads, why = profiles.choose_cpu_threads()
    assert threads == expected and torch.get_num_threads() == expected
    assert ("busy with other programs" in why) == (expected < cores)


def test_a_thread_count_set_by_hand_wins_and_is_checked(monkeypatch, keep_threads):
    monkeypatch.setattr(profiles, "busy_cores", lambda sample_s=0.3: 1.0)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("ATTN_THREADS", "3")
    assert profiles.choose_cpu_threads() == (3, "set by ATTN_THREADS")
    for bad, says in (("two", "whole number"), ("0", "at least 1")):
        monkeypatch.setenv("ATTN_THREADS", bad)
        with pytest.raises(ValueError, match=f"ATTN_THREADS must be .*{says}"):
            profiles.choose_cpu_threads()


def test_busy_cores_reads_the_machine():
    busy = profiles.busy_cores(0.05)
    if busy is None:
        pytest.skip("no /proc/stat here")
    assert 0.0 <= busy <= (__import__("os").cpu_count() or 1) + 1e-6
