"""The ``full`` profile, proven on a CPU before a GPU sees it: every registered experiment runs its
model, data pipeline and loops at the full profile's sizes (two optimisation steps, batches of 2,
a 64-row data slice, contexts of at most 128 tokens) under bfloat16 autocast, then one experiment per
model family under float16 with a gradient scaler (GPUs without bfloat16: Colab's T4, for one). Its
time is a benchmark, reported against a budget (``make bench``), never asserted: a busy machine must
not fail the test."""

from __future__ import annotations

import contextlib
import io
import time

import pytest

from attn_tutorial import results, runs
from attn_tutorial.profiles import PROFILES
from conftest import report_benchmark

# seconds for all the experiments of one precision: the bf16 sweep took 25 s on a quiet CI machine (two
# threads), 54-104 s on a busy one; the fp16 families 18 s
BUDGET_S = {"bf16": 100.0, "fp16": 60.0}
# Experiments whose code the sweep already runs elsewhere, so that it stays short: a
# change of settings only (epochs, a flag), or a model dry-run from pixels whose feature path
# (chapter 5's cached features and RegionProjection) ch05_san_features runs.
COVERED_BY = {**{f"ch09_{model}_features_short": (f"{chapter}_{model}_relational", "ch05_san_features")  # settings only
                 for chapter, model in (("ch05", "san"), ("ch07", "coatt"), ("ch07", "hiecoatt"), ("ch08", "ban"))},
              "ch09_transformer_noself_features": ("ch09_transformer_features",),
              **{f"{model}_features": (f"{model}_relational", "ch05_san_features")
                 for model in ("ch05_none", "ch07_coatt", "ch07_hiecoatt", "ch08_ban")},
              # chapter 10's full-length runs differ only in the attention layer, which its unit tests train
              **{f"ch10_imdb_{variant}": ("ch10_imdb_linformer",) for variant in ("exact", "window", "linear")},
              "ch11_copy_none": ("ch11_copy_bahdanau",),  # the same code without the attention layer
              # chapter 12's recipe ablations change settings only (post-norm's layers are unit-tested)
              **{name: ("ch12_transformer",) for name in ("ch12_transformer_nols", "ch12_postnorm",
                                                          "ch12_postnorm_nowarmup")},
              "ch12_bahdanau_recipe": ("ch11_bahdanau",),
              # the clean-text runs at 2,048 symbols are those at 384 with a larger tokenizer
              "ch13_lm_v2048": ("ch13_lm_v384",), "ch13_trigram_v2048": ("ch13_trigram_v384",),
              # chapter 13's variants differ from the base model only in the attention layer or the positions,
              # which its unit tests run (cached and uncached, every variant)
              **{f"ch13_{variant}": ("ch13_rope",) for variant in ("sinusoidal", "alibi", "gqa", "mqa", "diff", "moh", "wide")},
              "ch14_noisy_recall_lr1e3": ("ch14_noisy_recall",),  # another learning rate only
              # chapter 13's base model trained by ch13_rope's code; its head scores and ablation on that
              # decoder are unit-tested (tests/test_recall.py)
              "ch14_lm_heads": ("ch13_rope",),
              **{name: ("ch14_mqar",) for name in ("ch14_mqar_long", "ch14_mqar_pairs32", "ch14_mqar_pairs64")}}  # the same sweep, other sizes
BATCH = 2
LENGTH = 128  # the smoke profile's context: every position-dependent path (needles, 4x evaluation) still runs
FP16_FAMILIES = ("ch00_bow", "ch01_bilstm", "ch02_selfattentive", "ch03_mhsa", "ch04_diff", "ch05_san_relational",
                 "ch06_han_polarity", "ch07_hiecoatt_relational", "ch08_ban_relational", "ch13_rope")


def dry(name: str, precision: str) -> dict:
    with contextlib.redirect_stdout(io.StringIO()):
        # batches of two: more than one row (a bug that broadcasts over the batch still shows), half the
        # CPU time of four (the full-size decoder's bf16 backward alone took 17 s per step at four)
        # and contexts of at most LENGTH tokens: the decoder's bf16 steps at its full 256 took 8 s each
        return results.dry_run_one(name, PROFILES["full"], precision, batch=BATCH, examples=64, length=LENGTH)


results._load_all_experiments()
SWEEP = [(name, "bf16") for name in sorted(set(results.EXPERIMENTS) - set(COVERED_BY))]
SWEEP += [(name, "fp16") for name in FP16_FAMILIES]


@pytest.mark.benchmark
@pytest.mark.parametrize("name, precision", SWEEP, ids=[f"{n}-{p}" for n, p in SWEEP])
def test_full_dry_run(name, precision, data_dir):
    """One experiment at the full profile's sizes; one test each, so that pytest's workers share them."""
    start = time.perf_counter()
    row = dry(name, precision)
    report_benchmark(f"full dry run {name} ({precision})", time.perf_counter() - start, None,
                     group=f"full dry run of every experiment ({precision})", group_budget_s=BUDGET_S[precision])
    if row["train_steps"]:
        assert row["train_steps"] <= 2 * 12  # a dry run never trains for real
        assert row["planned_train_steps"] > row["train_steps"]


def test_the_sweep_covers_every_experiment():
    swept = {name for name, _ in SWEEP}
    assert set(results.EXPERIMENTS) == swept | set(COVERED_BY)
    assert {twin for twins in COVERED_BY.values() for twin in twins} <= swept  # each twin runs itself
    assert set(FP16_FAMILIES) <= swept


def test_dry_run_of_a_trained_experiment_reports_an_estimate(data_dir):
    row = dry("ch01_bilstm", "bf16")
    assert row["train_steps"] == 2
    # the real run: full IMDB (22,500 training reviews), batches of BATCH here, 10 epochs
    assert row["planned_train_steps"] == pytest.approx(10 * 22_500 / BATCH, rel=0.05)
    assert row["estimate_s"] > row["seconds"]


def test_dry_run_cli_names_each_failure(monkeypatch, capsys):
    @results.experiment("zz_broken", "fails on purpose")
    def broken(ctx):
        raise RuntimeError("boom")

    try:
        assert results.main(["dry-run", "zz_broken", "--profile", "smoke"]) == 1
        out = capsys.readouterr().out
        assert "zz_broken" in out and "FAILED: RuntimeError: boom" in out
        assert "not reachable here (CUDA only)" in out
    finally:
        results.EXPERIMENTS.pop("zz_broken")


def test_cuda_only_paths_are_listed_with_a_reason():
    assert runs.CUDA_ONLY and all(path and len(why) > 20 for path, why in runs.CUDA_ONLY)
