from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import f1_score
from torch import nn

from attn_tutorial import training


class Linear(nn.Module):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.linear = nn.Linear(dim, 2)

    def forward(self, features):
        return self.linear(features)


def toy_batches(seed: int = 0, n: int = 512, dim: int = 8, batch: int = 64):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(n, dim, generator=generator)
    labels = (features[:, 0] + 0.5 * features[:, 1] > 0).long()
    batches = [{"features": features[i:i + batch], "labels": labels[i:i + batch]} for i in range(0, n, batch)]
    return batches[:6], batches[6:]


def train_once(seed: int, **kwargs):
    training.seed_everything(seed)
    train, val = toy_batches()
    model = Linear()
    history = training.fit(model, train, val, epochs=3, lr=0.05, device=torch.device("cpu"), progress=False, **kwargs)
    return model, history


def test_get_device_on_this_machine():
    device = training.get_device()
    assert device.type in ("cpu", "cuda", "mps")
    assert training.get_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_requesting_missing_cuda_is_an_error():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        training.get_device("cuda")


def test_cpu_runs_in_float32():
    assert training.autocast_dtype(torch.device("cpu")) is None


def test_fit_learns_above_chance():
    _, history = train_once(0)
    assert history["epochs"][-1]["val_accuracy"] > 0.9
    assert history["epochs"][-1]["train_loss"] < history["epochs"][0]["train_loss"]
    assert not history["reused_checkpoint"]


def test_same_seed_same_metrics_on_cpu():
    model_a, history_a = train_once(7)
    model_b, history_b = train_once(7)
    assert history_a["epochs"][-1]["val_accuracy"] == history_b["epochs"][-1]["val_accuracy"]
    assert history_a["epochs"][-1]["train_loss"] == history_b["epochs"][-1]["train_loss"]
    assert torch.equal(model_a.linear.weight, model_b.linear.weight)


def test_fit_keeps_the_best_epoch_weights():
    model, history = train_once(1)
    _, val = toy_batches()
    best = max(row["val_accuracy"] for row in history["epochs"])
    assert history["best_value"] == best
    assert training.evaluate(model, val)["accuracy"] == pytest.approx(best)


def test_finished_checkpoint_is_reused_instead_of_training(tmp_path):
    path = tmp_path / "ckpt" / "run.pt"
    model_a, history_a = train_once(0, checkpoint=path)
    assert path.is_file() and not list(path.parent.glob("*.tmp"))
    training.seed_everything(123)  # different init: equal weights can only come from the checkpoint
    train, val = toy_batches()
    model_b = Linear()
    # the same configuration (a different lr would retrain: see test_runs.py)
    history_b = training.fit(model_b, train, val, epochs=3, lr=0.05, device=torch.device("cpu"), checkpoint=path,
                             progress=False)
    assert history_b["reused_checkpoint"]
    assert history_b["epochs"] == history_a["epochs"]
    assert torch.equal(model_a.linear.weight, model_b.linear.weight)
    _, history_c = train_once(0, checkpoint=path, retrain=True)
    assert not history_c["reused_checkpoint"]


def test_a_checkpoint_made_from_other_data_is_not_reused(tmp_path, capsys):
    """``data_key`` (e.g. which frozen encoder made cached features) is part of the configuration."""
    path = tmp_path / "ckpt" / "run.pt"
    train, val = toy_batches()
    settings = dict(epochs=2, lr=0.05, device=torch.device("cpu"), checkpoint=path, progress=False)
    training.fit(Linear(), train, val, data_key="encoder v1", **settings)
    assert training.fit(Linear(), train, val, data_key="encoder v1", **settings)["reused_checkpoint"]
    capsys.readouterr()
    assert not training.fit(Linear(), train, val, data_key="encoder v2", **settings)["reused_checkpoint"]
    assert "changed: data" in capsys.readouterr().out


def test_checkpoints_load_with_weights_only(tmp_path):
    model = Linear()
    training.save_checkpoint(tmp_path / "m.pt", model, note="hello", history={"epochs": [{"loss": 1.0}]})
    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    assert payload["note"] == "hello"
    fresh = Linear()
    training.load_checkpoint(tmp_path / "m.pt", fresh)
    assert torch.equal(fresh.linear.bias, model.linear.bias)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        training.load_checkpoint(tmp_path / "missing.pt")


def test_unfinished_checkpoint_is_not_trusted(tmp_path):
    path = tmp_path / "partial.pt"
    training.save_checkpoint(path, Linear(), finished=False)
    _, history = train_once(0, checkpoint=path)
    assert not history["reused_checkpoint"]


def test_metrics_match_sklearn_and_reject_bad_input():
    labels, preds = [1, 0, 1, 1, 0], [1, 1, 1, 0, 0]
    metrics = training.classification_metrics(labels, preds)
    assert metrics["accuracy"] == pytest.approx(0.6)
    assert metrics["f1"] == pytest.approx(f1_score(labels, preds))
    three = training.classification_metrics([0, 1, 2, 2], [0, 2, 2, 2], num_classes=3)
    assert three["f1"] == pytest.approx(f1_score([0, 1, 2, 2], [0, 2, 2, 2], average="macro", zero_division=0))
    with pytest.raises(ValueError, match="equal length"):
        training.classification_metrics([1, 0], [1])
    with pytest.raises(ValueError, match="empty"):
        training.classification_metrics([], [])


def test_early_stopping():
    stopper = training.EarlyStopping(patience=1)
    assert stopper.step(0.5) and not stopper.should_stop
    assert not stopper.step(0.4) and not stopper.should_stop
    assert not stopper.step(0.45) and stopper.should_stop
    loss_stopper = training.EarlyStopping(patience=0, mode="min")
    assert loss_stopper.step(1.0) and not loss_stopper.step(1.1) and loss_stopper.should_stop
    with pytest.raises(ValueError, match="NaN"):
        stopper.step(math.nan)
    with pytest.raises(ValueError, match="mode"):
        training.EarlyStopping(1, mode="up")


def test_early_stopping_ends_training():
    class Constant(nn.Module):  # cannot improve: predictions never change
        def __init__(self):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(2), requires_grad=False)
            self.dummy = nn.Parameter(torch.zeros(1))

        def forward(self, features):
            return self.bias.expand(len(features), 2) + 0 * self.dummy

    train, val = toy_batches()
    history = training.fit(Constant(), train, val, epochs=10, patience=1, device=torch.device("cpu"), progress=False)
    assert len(history["epochs"]) == 3  # one best epoch, then patience + 1 without improvement


def test_bad_inputs_are_explained():
    train, val = toy_batches()
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        training.fit(Linear(), train, val, epochs=0)
    with pytest.raises(ValueError, match="monitor"):
        training.fit(Linear(), train, val, epochs=1, monitor="precision")
    with pytest.raises(TypeError, match="'labels' entry"):
        training.move_batch((torch.zeros(2), torch.zeros(2)), torch.device("cpu"))
    with pytest.raises(ValueError, match="no examples"):
        training.evaluate(Linear(), [])
    with pytest.raises(ValueError, match="non-negative int"):
        training.seed_everything(-1)


def test_diverging_training_raises_instead_of_returning_nan():
    class Exploding(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.tensor(1.0))

        def forward(self, features):
            return self.scale * torch.full((len(features), 2), float("nan"))

    train, val = toy_batches()
    with pytest.raises(FloatingPointError, match="training loss became nan"):
        training.fit(Exploding(), train, val, epochs=1, device=torch.device("cpu"), progress=False)


def test_seed_everything_seeds_numpy_and_python():
    import random

    training.seed_everything(5)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    training.seed_everything(5)
    assert first == (random.random(), np.random.rand(), torch.rand(1).item())


def test_penalty_returned_by_a_model_is_added_to_the_loss():
    class Penalised(Linear):
        def forward(self, features):
            return {"logits": self.linear(features), "penalty": 10.0 * self.linear.weight.square().sum()}

    train, val = toy_batches()
    training.seed_everything(0)
    plain = Linear()
    training.fit(plain, train, val, epochs=3, lr=0.05, device=torch.device("cpu"), progress=False)
    training.seed_everything(0)
    penalised = Penalised()
    training.fit(penalised, train, val, epochs=3, lr=0.05, device=torch.device("cpu"), progress=False)
    assert penalised.linear.weight.norm() < 0.5 * plain.linear.weight.norm()
    assert "accuracy" in training.evaluate(penalised, val)
    with pytest.raises(TypeError, match="without 'logits'"):
        training.split_output({"scores": torch.zeros(1)})


def rates_of_fit(monkeypatch, train, val, **fit_kwargs) -> list[float]:
    """The learning rate of every training step of ``fit`` (read from its AdamW before each step)."""
    optimizers = []
    original = torch.optim.AdamW

    def recording_adamw(*args, **kwargs):
        optimizers.append(original(*args, **kwargs))
        return optimizers[-1]

    class Spy(Linear):
        def forward(self, features):
            if self.training:
                rates.append(optimizers[-1].param_groups[0]["lr"])
            return super().forward(features)

    rates = []
    monkeypatch.setattr(torch.optim, "AdamW", recording_adamw)
    training.fit(Spy(), train, val, device=torch.device("cpu"), progress=False, **fit_kwargs)
    return rates


def test_cosine_schedule_decays_the_learning_rate_to_zero(monkeypatch):
    """With schedule="cosine" the rate starts at lr and falls monotonically to about 0 by the
    last step (lr * (1 + cos(pi * step / total)) / 2, per step)."""
    training.seed_everything(0)
    train, val = toy_batches()
    rates = rates_of_fit(monkeypatch, train, val, epochs=2, lr=0.1, schedule="cosine")
    assert len(rates) == 2 * len(train) and rates[0] == pytest.approx(0.1)
    assert all(a > b for a, b in zip(rates, rates[1:])) and rates[-1] < 0.005
    with pytest.raises(ValueError, match="schedule must be"):
        training.fit(Linear(), train, val, epochs=1, schedule="linear", progress=False)


def test_warmup_rises_linearly_then_the_cosine_decays(monkeypatch):
    """warmup_epochs=1: the rate climbs lr/W, 2 lr/W, ..., lr over the first epoch's W steps, then
    the cosine decays from lr over the remaining steps; a warm-up as long as training is an error."""
    training.seed_everything(0)
    train, val = toy_batches()
    steps = len(train)
    rates = rates_of_fit(monkeypatch, train, val, epochs=3, lr=0.1, schedule="cosine", warmup_epochs=1)
    assert rates[:steps] == pytest.approx([0.1 * (i + 1) / steps for i in range(steps)])
    assert rates[steps] == pytest.approx(0.1)  # the cosine starts at the peak
    assert all(a > b for a, b in zip(rates[steps:], rates[steps + 1:])) and rates[-1] < 0.005
    with pytest.raises(ValueError, match="warmup_epochs"):
        training.fit(Linear(), train, val, epochs=1, warmup_epochs=1, progress=False)


def test_training_summary_has_what_a_record_needs():
    model, history = train_once(0)
    summary = training.training_summary(model, history, {"accuracy": 0.9, "f1": 0.8, "loss": 0.3}, note="x")
    assert summary["metrics"] == {"accuracy": 0.9, "f1": 0.8}
    assert summary["n_params"] == 8 * 2 + 2 and summary["epochs_run"] == 3
    assert summary["extra"]["note"] == "x" and len(summary["extra"]["history"]) == 3
