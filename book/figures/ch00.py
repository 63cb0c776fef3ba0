"""Figures of chapter 0: the map of the course, the tour model, and its recorded results."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from _common import BLUE, GREEN, GREY, ORANGE, PALETTE, SKY, arrow, box, diagram_axes, figure, heatmap, record

# The chapters of the course by part, and which source article each one takes up. The same
# mapping is the table "The three source articles" of chapters/00_setup.md.
PARTS = [
    ("0", [(0, "setup and tour")]),
    ("I", [(1, "text, BiLSTM"), (2, "attention pooling"), (3, "multi-head self-attention")]),
    ("II", [(4, "differential attention")]),
    ("III", [(5, "stacked attention (VQA)"), (6, "hierarchical attention")]),
    ("IV", [(7, "co-attention"), (8, "bilinear attention"), (9, "comparing, choosing")]),
    ("V", [(10, "attention at scale")]),
    ("VI", [(11, "translation, Bahdanau attention"), (12, "the Transformer"), (13, "a decoder language model"),
            (14, "recall, induction heads")]),
]
ARTICLES = [
    ("000", "BiLSTM + differential\nattention", [1, 2, 4], ORANGE),
    ("001", "BiLSTM + multi-head\nself-attention", [1, 3], GREEN),
    ("004", "stacked, hierarchical,\nbilinear (VQA)", [2, 5, 6, 7, 8, 9, 10, 11, 12, 13], BLUE),
]


@figure("ch00_course_map")
def course_map():
    """Articles on the left, the fifteen chapters grouped by part on the right, an arrow per use."""
    fig, ax = diagram_axes(8.5, 7.3, xlim=(0, 10.9), ylim=(-4.6, 10.6))
    # chapters, top to bottom, with a band per part
    y, rows = 10.0, {}
    for part, chapters in PARTS:
        top = y + 0.45
        for number, title in chapters:
            box(ax, (5.6, y - 0.35), 4.1, 0.7, f"{number}  {title}", colour="white", fontsize=9)
            rows[number] = y
            y -= 0.95
        bottom = y + 0.95 - 0.45
        ax.add_patch(plt.Rectangle((5.35, bottom - 0.05), 4.55, top - bottom + 0.1, color=SKY, alpha=0.18, lw=0))
        ax.text(10.0, (top + bottom) / 2, f"Part {part}" if part != "0" else "", ha="left", va="center",
                fontsize=9, color="black")
        y -= 0.2
    # articles, spread over the height, each with arrows to its chapters
    for i, (number, title, chapters, colour) in enumerate(ARTICLES):
        ya = 8.4 - 3.4 * i
        box(ax, (0.1, ya - 0.6), 3.0, 1.2, f"article {number}\n{title}", colour=colour, fontsize=8.5, alpha=0.35)
        for k, chapter in enumerate(chapters):
            ax.annotate("", xy=(5.6, rows[chapter] + 0.12 * (i - 1)), xytext=(3.1, ya),
                        arrowprops=dict(arrowstyle="->", color=colour, lw=1.1, shrinkA=0, shrinkB=1))
    ax.text(1.6, 10.2, "source articles", ha="center", fontsize=10, weight="bold")
    ax.text(7.65, 10.75, "chapters (theory page + notebook)", ha="center", fontsize=10, weight="bold")
    return fig


def _review_weights(texts, buckets):
    """The n-grams of each text, the bucket of each n-gram, and the hasher's weights (rows sum to 1)."""
    from sklearn.utils import murmurhash3_32

    from attn_tutorial.tour import make_hasher

    hasher = make_hasher(buckets)
    grams = [hasher.build_analyzer()(t) for t in texts]
    bucket_of = {g: abs(murmurhash3_32(g, seed=0)) % buckets for gs in grams for g in gs}  # as HashingVectorizer
    weights = hasher.transform(texts).toarray()  # (2, |V|)
    by_hand = np.zeros_like(weights)
    for r, gs in enumerate(grams):
        for g in gs:
            by_hand[r, bucket_of[g]] += 1 / len(gs)
    assert np.allclose(by_hand, weights), "the buckets must reproduce the hasher's weights"
    return grams, bucket_of, weights


@figure("ch00_tour_model")
def tour_model():
    """Two reviews with the same words in a different order: n-grams, bucket weights, averages."""
    from attn_tutorial.tour import BagOfNgrams

    texts = ["Not bad, good!", "Not good, bad!"]
    buckets, width = 16, 4
    grams, bucket_of, weights = _review_weights(texts, buckets)
    assert bucket_of["not"] == bucket_of["not bad"] == 4, "the caption names this collision"
    torch.manual_seed(0)  # the same numbers in the SVG and in a preview
    model = BagOfNgrams(buckets, width)  # untrained: the average is what matters here
    ids = torch.tensor(np.nonzero(weights)[1])
    offsets = torch.tensor([0, int((weights[0] > 0).sum())])
    w = torch.tensor(weights[np.nonzero(weights)], dtype=torch.float32)
    with torch.no_grad():
        mean = model.embedding(ids, offsets, per_sample_weights=w)  # (2, D)
    fig = plt.figure(figsize=(9.5, 2.9))
    grid = fig.add_gridspec(1, 3, width_ratios=[2.0, 2.6, 0.55], wspace=0.22)
    ax = fig.add_subplot(grid[0])
    ax.axis("off")
    ax.set_title(r"n-gram $\zeta$ → bucket $\beta$", fontsize=10)
    for r, gs in enumerate(grams):
        x0 = 0.0 if r == 0 else 0.5
        ax.text(x0, 0.98, f"review {r + 1}", fontsize=9, weight="bold", transform=ax.transAxes, va="top")
        ax.text(x0, 0.86, f'"{texts[r]}"', fontsize=8.5, transform=ax.transAxes, va="top", style="italic")
        for k, g in enumerate(gs):
            ax.text(x0, 0.7 - 0.13 * k, f"{g} → {bucket_of[g]}", fontsize=8.5, transform=ax.transAxes, va="top",
                    color=ORANGE if " " in g else "black")
    ax = fig.add_subplot(grid[1])
    heatmap(ax, weights, ["review 1", "review 2"], [str(b) for b in range(buckets)], annotate=False, vmax=0.5)
    for i, j in zip(*np.nonzero(weights)):
        ax.text(j, i, f"{weights[i, j]:.1f}", ha="center", va="center", fontsize=8,
                color="white" if weights[i, j] > 0.3 else "black")
    ax.set_title(r"weights $n_\beta / \Sigma_{\beta'} n_{\beta'}$ ($|\mathcal{V}| = 16$ buckets)", fontsize=10)
    ax.set_xlabel(r"bucket $\beta$")
    ax = fig.add_subplot(grid[2])
    lim = float(mean.abs().max())
    ax.imshow(mean.T.numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim)
    for i in range(2):
        for j in range(width):
            ax.text(i, j, f"{mean[i, j]:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if abs(mean[i, j]) > 0.6 * lim else "black")
    ax.set_yticks(range(width), [str(j + 1) for j in range(width)])
    ax.set_xticks([0, 1], ["1", "2"])
    ax.set_xlabel("review")
    ax.tick_params(length=0)
    ax.set_title(r"$\bar{\mathbf{x}}$ ($D = 4$)", fontsize=10)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    return fig


@figure("ch00_results_bow")
def results_bow():
    """Learning curves of the recorded ch00_bow runs: train loss, validation loss and accuracy."""
    rec = record("ch00_bow")
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.0))
    for k, run in enumerate(rec["runs"]):
        hist = run["extra"]["history"]
        epochs = [h["epoch"] for h in hist]
        colour = PALETTE[k]
        axes[0].plot(epochs, [h["train_loss"] for h in hist], "o-", color=colour, label=f"seed {run['seed']}: train")
        axes[0].plot(epochs, [h["val_loss"] for h in hist], "s--", color=colour, label=f"seed {run['seed']}: validation")
        acc = [100 * h["val_accuracy"] for h in hist]
        axes[1].plot(epochs, acc, "o-", color=colour, label=f"seed {run['seed']}")
        best = run["extra"]["best_epoch"]
        axes[1].plot([best], [acc[best - 1]], marker="*", markersize=13, color=colour, zorder=3)
    from attn_tutorial.results import mean_std

    mean, std = (100 * rec["summary"]["accuracy"][k] for k in ("mean", "std"))
    test = [100 * run["metrics"]["accuracy"] for run in rec["runs"]]
    for k, value in enumerate(test):  # each seed's test accuracy, right of its curve
        axes[1].plot([epochs[-1] + 0.35], [value], marker="D", markersize=5, color=PALETTE[k], zorder=3)
    axes[1].axhline(mean, color=GREY, lw=1)
    axes[1].text(1.0, mean + 0.05, f"test accuracy: ◆ per seed, line at the mean {mean_std(mean, std)} %",
                 fontsize=8.5, va="bottom", color="black")
    axes[0].set(xlabel="epoch", ylabel="cross-entropy", title="loss: train (solid), validation (dashed)")
    axes[1].set(xlabel="epoch", ylabel="accuracy (%)", title="validation accuracy (★ = kept epoch)")
    for ax in axes:
        ax.set_xticks(epochs)
    axes[1].legend(fontsize=8.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    device = rec["device"].split(" (")[0].upper()  # the kind of device; threads and CPU model are in the record
    fig.suptitle(f"hashed bag of n-grams on IMDB ({rec['profile']} profile, {device}, "
                 f"{len(rec['seeds'])} seeds)", fontsize=10)
    fig.tight_layout()
    return fig
