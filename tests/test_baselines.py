"""Chapter 1: the NB-weighted logistic regression reference."""

from __future__ import annotations

import numpy as np
import pytest

from attn_tutorial.baselines import NBLogisticRegression

POS = ["a great film, loved it", "wonderful acting, great story", "loved every minute, wonderful"]
NEG = ["a terrible film, hated it", "awful acting, boring story", "hated every minute, awful"]


def test_learns_and_weights_features_by_log_count_ratio():
    model = NBLogisticRegression(C=10.0, min_df=1).fit(POS * 5 + NEG * 5, [1] * 15 + [0] * 15)
    assert (model.predict(["great and wonderful", "boring and awful"]) == np.array([1, 0])).all()
    vocabulary = model.vectorizer.vocabulary_
    assert model.r[vocabulary["great"]] > 0 > model.r[vocabulary["awful"]]
    assert abs(model.r[vocabulary["film"]]) < 1e-9  # as frequent in both classes


def test_rejects_non_binary_labels():
    with pytest.raises(ValueError, match="binary labels"):
        NBLogisticRegression(min_df=1).fit(POS, [1, 1, 1])


def test_chapter_experiment_beats_chance_on_imdb(data_dir, monkeypatch):
    from attn_tutorial.results import run_experiment

    monkeypatch.setenv("ATTN_DATA_DIR", str(data_dir))
    record = run_experiment("ch01_nblr", "smoke", seed=0, device="cpu")
    assert record["metrics"]["accuracy"] > 0.8  # 1,800 training reviews
    assert record["extra"]["C"] in (0.1, 1.0, 10.0)
