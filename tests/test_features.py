"""Chapter 5's pretrained, frozen region features and chapter 9's models between regions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_tutorial import features
from attn_tutorial.features import (FEATURES, OBJECTNESS, POSITION, FeatureCacheError, RegionProjection,
                                    attention_mass, cached_features, cell_targets, feature_cache_path,
                                    object_cells)
from attn_tutorial.relations import RegionTransformerVQA, RelationNetworkVQA, propose
from attn_tutorial.vqa_data import VQASplit, generate_relational, question_vocab
from attn_tutorial.vqa_models import StackedAttentionVQA

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def splits():  # conftest gives every test its own cache folder
    return generate_relational(24, questions_per_image=4, seed=3), generate_relational(8, questions_per_image=4, seed=4)


def test_cell_targets_put_each_object_in_the_cell_of_its_centre(splits):
    train, _ = splits
    targets = cell_targets(train)
    assert targets["colour"].shape == targets["shape"].shape == (24, 64)
    centres, shapes = train.scenes["centres"][0].numpy(), train.scenes["shapes"][0].numpy()
    for colour, ((x, y), shape) in enumerate(zip(centres, shapes)):
        cell = int(y // 8) * 8 + int(x // 8)  # row-major, y down
        assert targets["colour"][0, cell] == colour + 1 and targets["shape"][0, cell] == shape + 1
        np.testing.assert_allclose(targets["offset"][0, cell].numpy(), [x / 8 - x // 8, y / 8 - y // 8], atol=1e-6)
    assert (targets["colour"] > 0).sum(-1).eq(6).all()  # six objects, six different cells
    assert ((targets["offset"] == 0.5).all(-1) | (targets["colour"] > 0)).all()  # empty cells: the centre


def test_feature_cache_is_reused_recomputed_when_stale_and_a_damaged_file_is_named(splits, capsys):
    train, test = splits
    first = cached_features(train, test, "smoke", seed=0)
    assert first["train"].shape[:2] == (24, 64) and first["test"].shape[:2] == (8, 64)
    assert first["train"].shape[-1] == 3 + 64
    assert ((first["train"][..., POSITION] >= -1) & (first["train"][..., POSITION] <= 1)).all()
    assert ((first["train"][..., OBJECTNESS] >= 0) & (first["train"][..., OBJECTNESS] <= 1)).all()
    path, key = feature_cache_path("smoke", 0, 24, 8)
    assert path.exists()
    stamp = path.stat().st_mtime_ns
    again = cached_features(train, test, "smoke", seed=0)
    torch.testing.assert_close(again["train"], first["train"])
    assert path.stat().st_mtime_ns == stamp  # read, not recomputed
    # another profile, seed or encoder version is another key: computed, never the old file
    assert feature_cache_path("cpu", 0, 24, 8)[0] != path and feature_cache_path("smoke", 1, 24, 8)[0] != path
    old_version = features.ENCODER_VERSION
    try:
        features.ENCODER_VERSION = old_version + 1
        assert feature_cache_path("smoke", 0, 24, 8)[0] != path
    finally:
        features.ENCODER_VERSION = old_version
    # a file whose stored key disagrees (e.g. copied from elsewhere) is stale: recomputed, overwritten
    stale = torch.load(path, weights_only=True)
    stale["key"] = {**key, "encoder": -1}
    torch.save(stale, path)
    cached_features(train, test, "smoke", seed=0)
    assert "stale" in capsys.readouterr().out
    assert torch.load(path, weights_only=True)["key"] == key
    # a damaged file stops with its name and the way out
    path.write_bytes(b"not a torch file")
    with pytest.raises(FeatureCacheError, match=rf"{path.name}.*delete it"):
        cached_features(train, test, "smoke", seed=0)


def test_attention_mass_on_a_hand_made_scene():
    """One image, the red object's centre in cell (2, 5): a model that puts 0.7 of its first hop
    there and 0.3 on cell 0 scores 0.7."""
    centres = torch.tensor([[[20.0, 44.0], [60, 4], [4, 60], [36, 36], [52, 20], [12, 12]]])  # (1, 6, 2)
    split = VQASplit(images=torch.zeros(1, 3, 64, 64, dtype=torch.uint8),
                     questions=["what shape is the red object?", "what shape is the blue object?"],
                     image_index=torch.tensor([0, 0]), answers=torch.tensor([0, 0]),
                     question_types=["shape", "shape"], relational=torch.tensor([False, False]),
                     answer_names=["square", "circle"],
                     scenes={"centres": centres, "shapes": torch.zeros(1, 6, dtype=torch.long),
                             "question_colour": torch.tensor([0, 2])})
    cells = object_cells(split)
    assert cells.tolist() == [5 * 8 + 2, 7 * 8 + 0]

    class Fixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(1))

        def forward(self, images, ids, lengths, mask, image_of_question=None):
            weights = torch.zeros(len(ids), 2, 64)
            weights[:, 0, 5 * 8 + 2], weights[:, 0, 0] = 0.7, 0.3  # hop 1; hop 2 is ignored
            return {"logits": torch.zeros(len(ids), 2), "weights": weights}

    mass = attention_mass(Fixed(), split, question_vocab(split))
    assert mass["mass"] == pytest.approx(0.35)  # 0.7 for the red question, 0 for the blue one
    assert mass["mass_shape"] == mass["mass_non_relational"] == pytest.approx(0.35)
    assert mass["mass_best_non_relational"] == pytest.approx(0.35)  # hop 2 puts nothing there


def _features_batch(n_images=3, regions=64, width=3 + 16, seed=0):
    torch.manual_seed(seed)
    cached = torch.randn(n_images, regions, width)
    cached[..., POSITION] = torch.rand(n_images, regions, 2) * 2 - 1
    cached[..., OBJECTNESS] = torch.rand(n_images, regions)
    ids = torch.tensor([[2, 3, 4, 0], [5, 6, 0, 0], [2, 7, 8, 9]])
    lengths = torch.tensor([3, 2, 4])
    return cached, ids, lengths, ids != 0


@pytest.mark.parametrize("model_class", [RegionTransformerVQA, RelationNetworkVQA])
def test_models_between_regions_ignore_region_order_and_question_padding(model_class):
    cached, ids, lengths, mask = _features_batch()
    model = model_class(10, 5, dim=16, feature_dim=cached.shape[-1], k=4).eval()
    out = model(cached, ids, lengths, mask)
    assert out["logits"].shape == (3, 5)
    permutation = torch.randperm(64)
    shuffled = model(cached[:, permutation], ids, lengths, mask)
    torch.testing.assert_close(shuffled["logits"], out["logits"], atol=1e-5, rtol=1e-5)
    padded_ids = torch.cat([ids, torch.zeros(3, 3, dtype=torch.long)], 1)  # three more pad columns
    padded = model(cached, padded_ids, lengths, padded_ids != 0)
    torch.testing.assert_close(padded["logits"], out["logits"], atol=1e-5, rtol=1e-5)
    # only the k proposals matter: changing a cell outside them changes nothing
    _, chosen = propose(cached, 4)
    outside = [r for r in range(64) if r not in chosen[0].tolist()][0]
    changed = cached.clone()
    changed[0, outside, FEATURES] += 5.0
    torch.testing.assert_close(model(changed, ids, lengths, mask)["logits"], out["logits"])


def test_region_transformer_weights_are_a_distribution_on_the_proposals():
    cached, ids, lengths, mask = _features_batch()
    model = RegionTransformerVQA(10, 5, dim=16, feature_dim=cached.shape[-1], k=4).eval()
    weights = model(cached, ids, lengths, mask, image_of_question=torch.tensor([0, 2, 2]))["region_weights"]
    _, chosen = propose(cached, 4)  # (3, 4)
    assert weights.shape == (3, 64)
    for row, image in enumerate([0, 2, 2]):
        assert set(weights[row].nonzero().flatten().tolist()) <= set(chosen[image].tolist())
    assert ((weights.sum(-1) > 0) & (weights.sum(-1) < 1)).all()  # the rest stays on the question token


def test_feature_models_refuse_pixels_and_pixel_models_refuse_features():
    cached, ids, lengths, mask = _features_batch()
    with pytest.raises(ValueError, match="pass feature_dim"):
        RegionTransformerVQA(10, 5, dim=16)
    with pytest.raises(ValueError, match=r"cached regions \(U, R, 19\)"):
        StackedAttentionVQA(10, 5, dim=16, feature_dim=19)(torch.zeros(3, 3, 64, 64), ids, lengths, mask)
    with pytest.raises(ValueError, match="expected images"):
        StackedAttentionVQA(10, 5, dim=16)(cached, ids, lengths, mask)
    with pytest.raises(ValueError, match="1 <= k <= R"):
        propose(cached, 65)
    assert RegionProjection(19, 8)(cached).shape == (3, 64, 8)


def test_attention_mass_is_none_for_a_model_without_attention_over_regions(splits):
    from attn_tutorial.vqa_models import NoAttentionVQA

    _, test = splits
    vocab = question_vocab(test)
    model = NoAttentionVQA(len(vocab), len(test.answer_names), dim=16)  # pixels in, logits out
    assert attention_mass(model, test, vocab) is None


@pytest.mark.parametrize("kind", ["none", "san", "coatt", "hiecoatt", "ban", "transformer", "relnet"])
def test_every_vqa_model_reads_cached_features_and_reports_its_first_map(kind):
    import attn_tutorial.bilinear  # noqa: F401  (each chapter registers its models)
    import attn_tutorial.coattention  # noqa: F401
    from attn_tutorial.features import first_region_map
    from attn_tutorial.vqa_models import VQA_MODELS

    cached, ids, lengths, mask = _features_batch()
    model = VQA_MODELS[kind](10, 5, dim=16, feature_dim=cached.shape[-1]).eval()
    out = model(cached, ids, lengths, mask, image_of_question=torch.tensor([0, 1, 1]))
    logits = out["logits"] if isinstance(out, dict) else out
    assert logits.shape == (3, 5) and torch.isfinite(logits).all()
    weights = first_region_map(out)
    if kind in ("none", "relnet"):
        assert weights is None
    else:
        assert weights.shape == (3, 64) and (weights >= 0).all() and (weights.sum(-1) <= 1 + 1e-5).all()


def test_a_region_that_may_not_attend_to_itself_gives_itself_no_weight():
    cached, ids, lengths, mask = _features_batch()
    model = RegionTransformerVQA(10, 5, dim=16, feature_dim=cached.shape[-1], k=4, attend_self=False).eval()
    seen = []
    model.blocks[0].attention.register_forward_hook(lambda module, args, out: seen.append(out[1]))
    model(cached, ids, lengths, mask)
    weights = seen[0]  # (B, H, 1 + k, 1 + k)
    regions = torch.arange(1, 5)
    assert (weights[:, :, regions, regions] == 0).all()  # no region attends to itself
    assert (weights[:, :, 0, 0] > 0).all()  # the question token still may
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


def test_bad_settings_are_clear_errors(splits):
    from attn_tutorial.features import pretrain_detector
    from attn_tutorial.relations import BiasedSelfAttention

    train, test = splits
    with pytest.raises(ValueError, match="epochs >= 1"):
        pretrain_detector(train, epochs=0)
    with pytest.raises(ValueError, match="profile_name must be one of"):
        cached_features(train, test, "laptop")
    with pytest.raises(ValueError, match=r"bias must be \(B, H, T, T\) = \(2, 2, 5, 5\)"):
        BiasedSelfAttention(8, 2)(torch.randn(2, 5, 8), torch.zeros(2, 1, 5, 5))
