"""Part III's VQA data: easy-VQA from its package, the generated relational set, question ids."""

from __future__ import annotations

import builtins

import numpy as np
import pytest
import torch

from attn_tutorial.paths import cache_dir
from attn_tutorial.text import tokenize
from attn_tutorial.vqa_data import (COLOURS, RELATIONAL_ANSWERS, RELATIONAL_QUESTIONS, SHAPES, VQASplit,
                                    encode_questions, generate_relational, load_easy_vqa, question_vocab,
                                    render_scene, sample_scene)


@pytest.fixture
def relational():  # conftest gives every test its own cache folder
    return generate_relational(60, questions_per_image=10, seed=3)


def objects_from_pixels(image: np.ndarray) -> list[tuple[float, float, str]]:
    """Each colour's centre and shape read back from the rendered pixels alone: a square of
    radius r covers (2r + 1)^2 pixels, a circle about pi r^2."""
    found = []
    for colour in COLOURS.values():
        ys, xs = np.nonzero((image == np.array(colour, dtype=np.uint8)).all(-1))
        assert len(xs) > 0, f"colour {colour} is missing from the image"
        side = xs.max() - xs.min() + 1
        found.append((xs.mean(), ys.mean(), "square" if len(xs) == side * side else "circle"))
    return found


def answer_from_pixels(objects, colour: int, question_type: str, size: int) -> str:
    x, y, shape = objects[colour]
    centres = np.array([(ox, oy) for ox, oy, _ in objects])
    distances = np.hypot(*(centres - centres[colour]).T)
    if question_type == "shape":
        return shape
    if question_type == "horizontal":
        return "left" if x < size / 2 else "right"
    if question_type == "vertical":
        return "top" if y < size / 2 else "bottom"
    if question_type == "count":
        return str(sum(s == shape for _, _, s in objects))
    others = [i for i in range(len(objects)) if i != colour]
    pick = min if question_type == "closest" else max
    return objects[pick(others, key=lambda i: distances[i])][2]


def test_relational_answers_agree_with_the_pixels(relational):
    size = relational.images.shape[-1]
    colour_names = list(COLOURS)
    for q, question in enumerate(relational.questions):
        image = relational.images[relational.image_index[q]].permute(1, 2, 0).numpy()
        colour = next(i for i, name in enumerate(colour_names) if f" {name} object" in question)
        assert colour == relational.scenes["question_colour"][q]
        expected = answer_from_pixels(objects_from_pixels(image), colour, relational.question_types[q], size)
        assert relational.answer_text(q) == expected, (question, relational.question_types[q])


def test_relational_split_is_balanced_deterministic_and_cached(relational):
    assert relational.images.shape == (60, 3, 64, 64) and relational.images.dtype == torch.uint8
    assert len(relational) == 600 and relational.relational.float().mean() == 0.5
    assert set(relational.question_types) == set(RELATIONAL_QUESTIONS)
    assert all(relational.relational[q] == RELATIONAL_QUESTIONS[t][0] for q, t in enumerate(relational.question_types))
    assert set(relational.answer_names) == set(RELATIONAL_ANSWERS)
    assert list((cache_dir() / "vqa").glob("relational-*.pt")), "the split is cached"
    again = generate_relational(60, questions_per_image=10, seed=3)  # from the cache
    fresh = generate_relational(60, questions_per_image=10, seed=3, cache=False)
    for other in (again, fresh):
        assert torch.equal(other.images, relational.images) and other.questions == relational.questions
        assert torch.equal(other.answers, relational.answers)
    different = generate_relational(60, questions_per_image=10, seed=4, cache=False)
    assert not torch.equal(different.images, relational.images)


def test_scenes_have_separate_objects_off_the_middle_lines():
    rng = np.random.default_rng(0)
    for _ in range(20):
        scene = sample_scene(rng)
        gaps = np.abs(scene.centres[:, None] - scene.centres[None]).max(-1)  # Chebyshev: squares too
        assert gaps[~np.eye(len(COLOURS), dtype=bool)].min() >= 13  # radius 5: no touching
        assert np.abs(scene.centres - 32).min() >= 1.5
        image = render_scene(scene)
        assert image.shape == (64, 64, 3) and set(SHAPES) >= {s for *_, s in objects_from_pixels(image)}


def test_batched_rejection_sampling_draws_the_same_scenes_as_one_try_at_a_time():
    for batch in (7, 64):
        one, many = np.random.default_rng(11), np.random.default_rng(11)
        for _ in range(25):
            a, b = sample_scene(one, batch=1), sample_scene(many, batch=batch)
            assert np.array_equal(a.centres, b.centres) and np.array_equal(a.shapes, b.shapes)
        assert one.integers(1 << 30) == many.integers(1 << 30)  # the generator ends in the same state


def test_generator_and_split_reject_bad_input():
    with pytest.raises(ValueError, match="even questions_per_image"):
        generate_relational(10, questions_per_image=3, cache=False)
    with pytest.raises(ValueError, match="n_images >= 1"):
        generate_relational(0, cache=False)
    with pytest.raises(RuntimeError, match="too small"):
        sample_scene(np.random.default_rng(0), size=24, radius=5, max_tries=50)
    with pytest.raises(ValueError, match="uint8 of shape"):
        VQASplit(torch.zeros(2, 3, 8, 8), [], torch.zeros(0), torch.zeros(0), [], torch.zeros(0), ["a"])
    with pytest.raises(ValueError, match="per-question field"):
        VQASplit(torch.zeros(2, 3, 8, 8, dtype=torch.uint8), ["q"], torch.zeros(1, dtype=torch.long),
                 torch.zeros(2, dtype=torch.long), ["t"], torch.zeros(1, dtype=torch.bool), ["a"])
    with pytest.raises(ValueError, match="image_index must lie"):
        VQASplit(torch.zeros(2, 3, 8, 8, dtype=torch.uint8), ["q"], torch.tensor([2]), torch.tensor([0]),
                 ["t"], torch.zeros(1, dtype=torch.bool), ["a"])


def test_easy_vqa_full_counts_types_and_subsets():
    test = load_easy_vqa("test")
    assert len(test) == 9_673 and test.images.shape == (1_000, 3, 64, 64) and len(test.answer_names) == 13
    assert set(test.question_types) == {"yes/no", "shape", "colour"}
    for q in range(0, len(test), 97):  # each type's answers belong to it
        answer, kind = test.answer_text(q), test.question_types[q]
        assert (answer in ("yes", "no")) == (kind == "yes/no")
    subset = load_easy_vqa("train", max_questions=500, seed=1)
    assert len(subset) == 500 and len(subset.images) <= 500
    assert int(subset.image_index.max()) == len(subset.images) - 1  # only the images it needs
    assert subset.questions == load_easy_vqa("train", max_questions=500, seed=1).questions
    with pytest.raises(ValueError, match="split must be"):
        load_easy_vqa("validation")


def test_missing_easy_vqa_package_gives_the_install_command(monkeypatch):
    real_import = builtins.__import__

    def no_easy_vqa(name, *args, **kwargs):
        if name == "easy_vqa":
            raise ImportError("No module named 'easy_vqa'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_easy_vqa)
    with pytest.raises(ModuleNotFoundError, match="pip install easy-vqa"):
        load_easy_vqa("test")


def test_questions_encode_with_the_chapter_1_vocabulary(relational):
    vocab = question_vocab(relational)
    ids, lengths, mask = encode_questions(relational, vocab)
    assert ids.shape == (600, int(lengths.max())) and mask.sum() == lengths.sum()
    assert (ids[~mask] == vocab.pad_id).all() and (ids[mask] != vocab.unk_id).all()
    assert vocab.decode(ids[0, :lengths[0]].tolist()) == tokenize(relational.questions[0])


def test_object_blind_accuracy_is_the_best_answer_that_ignores_the_named_object():
    from attn_tutorial.vqa_data import object_blind_accuracy, relational_split

    split = generate_relational(60, questions_per_image=10, seed=2, cache=False)
    blind = object_blind_accuracy(split)
    assert set(blind) == set(split.question_types) and all(0 <= v <= 1 for v in blind.values())
    # counting: the count of the more frequent shape is right when the named object has it (or a tie)
    count = [q for q, t in enumerate(split.question_types) if t == "count"]
    majority = []
    for q in count:
        shapes = split.scenes["shapes"][split.image_index[q]]
        majority.append(int((shapes == shapes[split.scenes["question_colour"][q]]).sum()) >= 3)
    assert blind["count"] == pytest.approx(np.mean(majority))
    no_scenes = VQASplit(split.images, split.questions, split.image_index, split.answers, split.question_types,
                         split.relational, split.answer_names)
    with pytest.raises(ValueError, match="generated relational split"):
        object_blind_accuracy(no_scenes)
    with pytest.raises(ValueError, match="part must be 'train' or 'test'"):
        relational_split("smoke", "validation")


# --- VQA's soft accuracy (Antol et al. 2015) ---------------------------------------------------

from attn_tutorial.vqa_data import vqa_answer_score, vqa_soft_accuracy  # noqa: E402

BUS = ["red"] * 6 + ["dark red"] * 2 + ["maroon", "orange"]  # the chapter's worked example


def leave_one_out_by_enumeration(prediction: str, humans: list[str]) -> float:
    import itertools

    subsets = list(itertools.combinations(humans, len(humans) - 1))
    return float(np.mean([min(sum(a == prediction for a in s) / 3, 1.0) for s in subsets]))


def test_soft_score_of_the_worked_example():
    assert [vqa_answer_score(a, BUS) for a in ("red", "dark red", "maroon", "blue")] == pytest.approx([1, 2 / 3, 1 / 3, 0])
    official = [vqa_answer_score(a, BUS, leave_one_out=True) for a in ("red", "dark red", "maroon", "blue")]
    assert official == pytest.approx([1.0, 0.6, 0.3, 0.0])
    assert vqa_soft_accuracy(["red", "dark red", "maroon"], [BUS] * 3) == pytest.approx((1 + 2 / 3 + 1 / 3) / 3)


@pytest.mark.parametrize("matches", range(11))
def test_three_or_more_humans_give_full_credit_and_leave_one_out_matches_enumeration(matches):
    humans = ["yes"] * matches + ["no"] * (10 - matches)
    assert vqa_answer_score("yes", humans) == pytest.approx(min(matches / 3, 1))
    if matches >= 3:
        assert vqa_answer_score("yes", humans) == 1.0
    official = vqa_answer_score("yes", humans, leave_one_out=True)
    assert official == pytest.approx(leave_one_out_by_enumeration("yes", humans))
    assert (official == 1.0) == (matches >= 4)  # exactly three agreeing annotators: 0.9 officially


def test_soft_accuracy_equals_exact_accuracy_when_all_annotators_agree():
    truth = ["square", "circle", "left", "3", "top"]
    predicted = ["square", "square", "left", "2", "top"]
    humans = [[answer] * 10 for answer in truth]
    exact = np.mean([p == t for p, t in zip(predicted, truth)])
    for loo in (False, True):
        assert vqa_soft_accuracy(predicted, humans, leave_one_out=loo) == pytest.approx(exact)


def test_soft_accuracy_takes_answer_indices_with_their_names():
    names = ["red", "dark red", "maroon"]
    assert vqa_soft_accuracy(torch.tensor([0, 1]), [BUS, BUS], answer_names=names) == pytest.approx((1 + 2 / 3) / 2)


def test_soft_accuracy_refuses_bad_input():
    with pytest.raises(ValueError, match="no predictions"):
        vqa_soft_accuracy([], [])
    with pytest.raises(ValueError, match="2 predictions but 1"):
        vqa_soft_accuracy(["a", "b"], [["a"] * 10])
    with pytest.raises(ValueError, match="at least one human answer"):
        vqa_soft_accuracy(["a"], [[]])
    with pytest.raises(ValueError, match="answer_names"):
        vqa_soft_accuracy(torch.tensor([0]), [["a"]])
    with pytest.raises(ValueError, match="at least two"):
        vqa_answer_score("a", ["a"], leave_one_out=True)
