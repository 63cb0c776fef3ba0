"""Runs a reader can trust: checkpoints keyed by configuration, resumable training, records
merged by seed, malformed files named, the heartbeat, autocast emulation and dry runs."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from torch import nn

from attn_tutorial import results, runs
from attn_tutorial.training import autocast_dtype, fit, load_checkpoint


class Linear(nn.Module):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.linear = nn.Linear(dim, 2)

    def forward(self, features):  # (B, dim) -> (B, 2)
        return self.linear(features)


class Deeper(Linear):
    def __init__(self, dim: int = 8):
        super().__init__(dim)
        self.hidden = nn.Linear(dim, dim)

    def forward(self, features):
        return self.linear(self.hidden(features).relu())


class Interrupting(Linear):
    """Raises KeyboardInterrupt (what a cell time limit sends) at one training step."""

    def __init__(self, at_call: int):
        super().__init__()
        self.calls, self.at_call = 0, at_call

    def forward(self, features):
        if self.training:
            self.calls += 1
            if self.calls == self.at_call:
                raise KeyboardInterrupt
        return super().forward(features)


def batches(n: int = 512, dim: int = 8, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=generator)
    y = (x.sum(1) > 0).long()
    data = [{"features": x[i:i + 64], "labels": y[i:i + 64]} for i in range(0, n, 64)]
    return data[:6], data[6:]


def train(model, checkpoint, epochs=3, lr=0.05, **kwargs):
    train_set, val_set = batches()
    return fit(model, train_set, val_set, epochs=epochs, lr=lr, device=torch.device("cpu"),
               checkpoint=checkpoint, progress=False, **kwargs)


# --- checkpoints keyed by their configuration ------------------------------------------------

def test_finished_checkpoint_reused_only_with_the_same_configuration(tmp_path, capsys):
    path = tmp_path / "run.pt"
    first = train(Linear(), path)
    assert not first["reused_checkpoint"]
    assert not runs.resume_path(path).exists()  # a finished run leaves no resume state behind
    again = train(Linear(), path)
    assert again["reused_checkpoint"]
    changed_lr = train(Linear(), path, lr=0.01)
    assert not changed_lr["reused_checkpoint"]
    assert "another configuration (changed: lr)" in capsys.readouterr().out
    deeper = train(Deeper(), path, lr=0.01)  # same file and settings, another model
    assert not deeper["reused_checkpoint"]
    assert "(changed: architecture, model, model_code, parameters)" in capsys.readouterr().out


def test_changed_layer_code_changes_the_key():
    class A(nn.Module):
        def forward(self, x):
            return x

    class B(nn.Module):
        def forward(self, x):
            return 2 * x

    # classes typed into a console have no source file: their qualified names differ
    assert runs.model_code_version(A()) != runs.model_code_version(B())
    assert runs.model_code_version(Linear()) == runs.model_code_version(Linear())


class _Documented(nn.Module):
    """Doubles its input."""

    def forward(self, x):
        return 2 * x  # twice


class _Redocumented(nn.Module):
    """Multiplies its input by two: the same layer, documented again."""

    def forward(self, x):
        # the factor is 2
        return 2 * x


class _Changed(nn.Module):
    """Doubles its input."""

    def forward(self, x):
        return 3 * x  # twice


def test_documentation_does_not_change_the_key_but_code_does():
    def source(cls):  # the class name is part of the key: compare what the key hashes besides it
        return runs._class_source(cls).replace(cls.__name__, "Layer")

    assert source(_Documented) == source(_Redocumented)
    assert source(_Documented) != source(_Changed)
    assert "twice" not in source(_Documented) and "Doubles" not in source(_Documented)
    assert runs.model_code_version(_Documented()) != runs.model_code_version(_Changed())


def test_checkpoint_without_a_key_is_not_reused(tmp_path, capsys):
    path = tmp_path / "old.pt"
    model = Linear()
    torch.save({"model": model.state_dict(), "finished": True,
                "history": {"epochs": [], "best_epoch": 1, "best_value": 1.0, "time_per_epoch_s": 0.0}}, path)
    out = train(Linear(), path)
    assert not out["reused_checkpoint"]
    assert "predates configuration keys" in capsys.readouterr().out


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated", b"not a checkpoint at all"])
def test_corrupt_checkpoint_is_named_with_the_way_out(tmp_path, content):
    path = tmp_path / "broken.pt"
    path.write_bytes(content)
    with pytest.raises(runs.CheckpointError, match=r"broken\.pt.*retrain=True"):
        train(Linear(), path)
    with pytest.raises(runs.CheckpointError, match=r"broken\.pt"):
        load_checkpoint(path, Linear())


def test_foreign_checkpoint_is_named(tmp_path):
    path = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(runs.CheckpointError, match=r"foreign\.pt is not a checkpoint of this course"):
        load_checkpoint(path)
    torch.save({"model": nn.Linear(3, 3).state_dict()}, path)
    with pytest.raises(runs.CheckpointError, match=r"foreign\.pt holds weights of another model"):
        load_checkpoint(path, Linear())


# --- resuming an interrupted run ----------------------------------------------------------------

def test_interrupted_training_resumes_after_its_last_finished_epoch(tmp_path, capsys):
    path = tmp_path / "resume.pt"
    model = Interrupting(at_call=6 + 3)  # 6 steps per epoch: interrupted inside epoch 2
    with pytest.raises(KeyboardInterrupt):
        train(model, path, epochs=3)
    assert runs.resume_path(path).is_file() and not path.exists()
    capsys.readouterr()
    resumed = Interrupting(at_call=10**9)
    out = train(resumed, path, epochs=3)
    assert "after epoch 1." in capsys.readouterr().out
    assert [row["epoch"] for row in out["epochs"]] == [1, 2, 3]
    assert resumed.calls == 2 * 6  # epochs 2 and 3 only
    assert path.is_file() and not runs.resume_path(path).exists()
    # the resumed model ends where an uninterrupted run would: it learned the task
    assert out["epochs"][-1]["val_accuracy"] > 0.9


def test_resume_state_of_another_configuration_is_discarded(tmp_path, capsys):
    path = tmp_path / "resume.pt"
    with pytest.raises(KeyboardInterrupt):
        train(Interrupting(at_call=9), path, epochs=3)
    capsys.readouterr()
    out = train(Linear(), path, epochs=3, lr=0.02)
    assert len(out["epochs"]) == 3
    assert "another configuration: training from the start" in capsys.readouterr().out


# --- the heartbeat --------------------------------------------------------------------------------

def test_heartbeat_writes_progress_and_flags_a_slow_machine(tmp_path, monkeypatch):
    log = tmp_path / "progress.log"
    monkeypatch.setenv("ATTN_PROGRESS_FILE", str(log))
    monkeypatch.setenv("ATTN_HEARTBEAT_S", "0")
    monkeypatch.setenv("ATTN_THREADS", str(torch.get_num_threads()))  # a count set by hand: kept
    with runs.current_run(experiment="ch99_demo", profile="cpu", seed=1, expected_epoch_s=1e-6):
        train(Linear(), None, epochs=1)
    lines = log.read_text().splitlines()
    assert len(lines) == 6  # one per step with a zero interval
    assert not any("CPU threads" in line for line in lines)
    assert lines[-1].startswith("[ch99_demo · cpu · seed 1] epoch 1/1, step 6/6")
    assert "left in it" in lines[0] and "slower: the machine is busy" in lines[0]


def test_a_slow_heartbeat_lowers_the_cpu_threads_to_the_free_cores(tmp_path, monkeypatch):
    from attn_tutorial import profiles

    log = tmp_path / "progress.log"
    monkeypatch.setenv("ATTN_PROGRESS_FILE", str(log))
    monkeypatch.setenv("ATTN_HEARTBEAT_S", "0")
    for name in profiles.THREADS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(profiles, "cores_available", lambda: 2)
    monkeypatch.setattr(profiles, "busy_cores", lambda sample_s=0.3: 1.0)  # another program holds a core
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with runs.current_run(experiment="ch99_demo", profile="cpu", seed=1, expected_epoch_s=1e-6):
            train(Linear(), None, epochs=1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    lines = log.read_text().splitlines()
    assert "slower: the machine is busy or slower); CPU threads 2 -> 1, one per free core;" in lines[0]
    assert not any("CPU threads" in line for line in lines[1:])  # once: already one thread


def test_no_heartbeat_without_a_progress_file(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTN_PROGRESS_FILE", raising=False)
    beat = runs.Heartbeat(1)
    beat.every = 0
    beat.beat(1, 1, 1)  # nothing to write to, nothing written, no error


# --- autocast emulation and dry runs ------------------------------------------------------------

def test_autocast_can_be_forced_and_rejects_unknown_values(monkeypatch):
    cpu = torch.device("cpu")
    assert autocast_dtype(cpu) is None
    monkeypatch.setenv("ATTN_AUTOCAST", "bf16")
    assert autocast_dtype(cpu) is torch.bfloat16
    monkeypatch.setenv("ATTN_AUTOCAST", "fp8")
    with pytest.raises(ValueError, match="ATTN_AUTOCAST must be one of"):
        autocast_dtype(cpu)


def test_dry_run_caps_a_context_length_and_rejects_a_bad_cap():
    assert runs.cap_length(256) == 256  # no dry run: unchanged
    with runs.dry_run(max_length=128):
        assert runs.cap_length(256) == 128 and runs.cap_length(64) == 64
    with runs.dry_run():
        assert runs.cap_length(256) == 256  # no cap set
    for bad in (0, -5, 12.5, True, "128"):
        with pytest.raises(ValueError, match="max_length must be a positive number of tokens"):
            with runs.dry_run(max_length=bad):
                pass


@pytest.mark.parametrize("precision", [None, "bf16", "fp16"])
def test_dry_run_takes_two_steps_under_the_requested_precision(precision):
    train_set, val_set = batches()
    with runs.dry_run(precision=precision) as state:
        out = fit(Linear(), train_set, val_set, epochs=5, device=torch.device("cpu"), progress=False)
    assert len(out["epochs"]) == 1
    trained = [r for r in state.loops if r.kind == "train"]
    assert len(trained) == 1 and len(trained[0].seconds) == 2 and trained[0].repeat == 5
    assert trained[0].planned == 6 and state.estimate_seconds() > 0
    import os
    assert "ATTN_AUTOCAST" not in os.environ  # restored


def test_lstm_runs_inside_bf16_autocast_during_a_dry_run():
    lstm = nn.LSTM(4, 3, batch_first=True, bidirectional=True)
    with runs.dry_run(precision="bf16"), torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = lstm(torch.randn(2, 5, 4))
    assert out.shape == (2, 5, 6)
    assert nn.LSTM.forward is not None and "dry" not in nn.LSTM.forward.__qualname__


def test_cap_slices_and_remembers_the_full_size():
    assert runs.cap(None, 25_000) is None  # no dry run: unchanged
    with runs.dry_run() as state:
        assert runs.cap(None, 25_000) == 256
        assert runs.cap(100, 25_000) == 100
        assert runs.epochs(10) == 1
    assert state.scale == pytest.approx(25_000 / 256)


# --- records merged by seed -----------------------------------------------------------------------

def fake_run(seed: int, accuracy: float, profile: str = "cpu") -> dict:
    return {"experiment": "demo", "description": "a demo", "profile": profile, "seed": seed,
            "device": "cpu (2 threads)", "metrics": {"accuracy": accuracy}, "versions": {"torch": "x"},
            "created": "2026-12-05T00:00:00+00:00"}


def test_records_merge_by_seed_and_warn_on_replacement(tmp_path):
    results.write_record("demo", [fake_run(0, 0.8), fake_run(1, 0.9), fake_run(2, 0.7)], "cmd a", tmp_path)
    with pytest.warns(UserWarning, match=r"seed\(s\) 1 run again"):
        path = results.write_record("demo", [fake_run(1, 0.95)], "cmd b", tmp_path)
    record = json.loads(path.read_text())
    assert record["seeds"] == [0, 1, 2]
    assert [r["metrics"]["accuracy"] for r in record["runs"]] == [0.8, 0.95, 0.7]
    assert record["produced_by"] == ["cmd a", "cmd b"]
    assert record["summary"]["accuracy"]["n"] == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results.write_record("demo", [fake_run(3, 0.5)], "cmd c", tmp_path)  # a new seed: no warning
    assert json.loads(path.read_text())["seeds"] == [0, 1, 2, 3]
    assert not list(tmp_path.glob("demo/*.tmp"))  # the atomic write leaves no temporary file


def test_dry_run_is_never_recorded(tmp_path):
    with pytest.raises(ValueError, match="never recorded"):
        results.write_record("demo", [{**fake_run(0, 0.5), "dry_run": True}], "cmd", tmp_path)


@pytest.mark.parametrize("text, match", [
    ('{"experiment": "demo", "profile": "cpu", "seeds": [0], "summ', "cannot be read"),
    ('{"experiment": "demo", "profile": "cpu"}', "malformed"),
    ('{"experiment": "demo", "profile": "cpu", "seeds": [0], "summary": {}, "runs": [{"seed": 0}]}', "run 0"),
])
def test_malformed_record_is_an_error_naming_the_file(tmp_path, monkeypatch, capsys, text, match):
    monkeypatch.setenv("ATTN_RESULTS_DIR", str(tmp_path))
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "cpu.json").write_text(text)
    with pytest.raises(results.RecordError, match=match) as error:
        results.load_records("demo")
    assert "demo/cpu.json" in str(error.value)
    assert results.main(["show", "demo"]) == 2
    assert "demo/cpu.json" in capsys.readouterr().err
    with pytest.raises(results.RecordError):  # writing over a broken record never discards it silently
        results.write_record("demo", [fake_run(0, 0.5)], "cmd", tmp_path)


# --- the prepared GPU run ---------------------------------------------------------------------------

def test_gpu_run_records_seed_by_seed_and_continues_where_it_stopped(tmp_path, monkeypatch, capsys):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("gpu_run", Path(__file__).parent.parent / "tools" / "gpu_run.py")
    gpu_run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_run)
    calls = []

    @results.experiment("zz_fake", "a quick fake experiment")
    def fake(ctx):
        calls.append((ctx.seed, ctx.dry_run))
        return {"metrics": {"accuracy": 0.5 + ctx.seed / 10}}

    try:
        assert gpu_run.main(["zz_fake", "--seeds", "0", "1", "--budget", "0"]) == 0  # no time: nothing runs
        assert "call again to continue" in capsys.readouterr().out
        assert calls == [(0, True)]  # only the dry run
        assert gpu_run.main(["zz_fake", "--seeds", "0", "1"]) == 0
        record = results.load_records("zz_fake")[0]
        assert record["profile"] == "full" and record["seeds"] == [0, 1]
        calls.clear()
        assert gpu_run.main(["zz_fake", "--seeds", "0", "1", "2"]) == 0  # seeds 0 and 1 are recorded already
        assert calls == [(0, True), (2, False)]  # the dry run (seed 0), then seed 2 only
        assert results.load_records("zz_fake")[0]["seeds"] == [0, 1, 2]
        assert "| zz_fake |" in gpu_run.summary()
    finally:
        results.EXPERIMENTS.pop("zz_fake")
