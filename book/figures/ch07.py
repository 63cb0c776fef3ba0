"""Figures of chapter 7: co-attention."""

import matplotlib.pyplot as plt
import torch

from _common import BLUE, ORANGE, PAD_COLOUR, figure, grouped_bars, model_colour, model_label

from attn_tutorial.coattention import AlternatingCoAttention, ParallelCoAttention

WORDS = ["what", "shape", "is", "the", "red", "object", "<pad>"]  # T = 7, the last position padded
REGIONS = [f"$r_{n}$" for n in range(1, 7)]                        # N = 6 regions
DIM = 8


def _tiny_inputs():
    """Question word encodings H (1, T, D) with one padded position, region features R (1, N, D)."""
    gen = torch.Generator().manual_seed(7)
    words = 0.6 * torch.randn(1, len(WORDS), DIM, generator=gen)
    words[:, -1] = 0.0  # the encoder writes zeros at padding
    regions = 0.6 * torch.randn(1, len(REGIONS), DIM, generator=gen)
    mask = torch.ones(1, len(WORDS), dtype=torch.bool)
    mask[:, -1] = False
    return words, regions, mask


@figure("ch07_parallel_coattention")
def parallel_coattention_figure():
    """The affinity C between words and regions and the two attention maps parallel co-attention derives."""
    words, regions, mask = _tiny_inputs()
    torch.manual_seed(0)
    co = ParallelCoAttention(DIM, DIM, hidden_dim=DIM)  # random init, no training
    with torch.no_grad():
        _, _, a_v, a_q = co(regions, words, mask)
        c = torch.tanh(words @ co.affinity @ regions.transpose(1, 2)) * mask.unsqueeze(-1)  # (1, T, N)
    c, a_v, a_q = c[0].numpy(), a_v[0].numpy(), a_q[0].numpy()
    T, N = c.shape

    fig = plt.figure(figsize=(7.6, 5.0))
    grid = fig.add_gridspec(2, 2, width_ratios=[N, 3.2], height_ratios=[T, 2.6], wspace=0.08, hspace=0.12)
    ax_c = fig.add_subplot(grid[0, 0])
    ax_q = fig.add_subplot(grid[0, 1], sharey=ax_c)
    ax_v = fig.add_subplot(grid[1, 0], sharex=ax_c)

    ax_c.imshow(c, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    for t in range(T):
        for n in range(N):
            if mask[0, t]:
                ax_c.text(n, t, f"{c[t, n]:+.2f}", ha="center", va="center", fontsize=8,
                          color="white" if abs(c[t, n]) > 0.6 else "black")
    ax_c.add_patch(plt.Rectangle((-0.5, T - 1.5), N, 1, color=PAD_COLOUR))
    ax_c.text((N - 1) / 2, T - 1, "padded row: zeroed", ha="center", va="center", fontsize=8)
    ax_c.set_yticks(range(T), WORDS)
    ax_c.tick_params(length=0, labelbottom=False, top=False)
    ax_c.set_title(r"affinity $\mathbf{C} = \tanh(\mathbf{H}\mathbf{W}_b\mathbf{R}^\top)$  ($T \times N$)", fontsize=10)
    for side in ("top", "right", "bottom", "left"):
        ax_c.spines[side].set_visible(False)

    colours = [BLUE if m else PAD_COLOUR for m in mask[0]]
    ax_q.barh(range(T), a_q, color=colours)
    for t in range(T):
        ax_q.text(a_q[t] + 0.01, t, f"{a_q[t]:.2f}", va="center", fontsize=8)
    ax_q.set_xlim(0, max(a_q.max() * 1.45, 0.3))
    ax_q.tick_params(labelleft=False, length=0)
    ax_q.set_title(r"word weights $\boldsymbol{\alpha}^h$", fontsize=10)
    ax_q.set_xlabel("weight")

    ax_v.bar(range(N), a_v, color=ORANGE)
    for n in range(N):
        ax_v.text(n, a_v[n] + 0.01, f"{a_v[n]:.2f}", ha="center", fontsize=8)
    ax_v.set_ylim(0, max(a_v.max() * 1.35, 0.3))
    ax_v.set_xticks(range(N), REGIONS)
    ax_v.set_ylabel(r"region weights $\boldsymbol{\alpha}^r$")
    ax_v.set_xlabel("image regions")
    return fig


@figure("ch07_alternating_coattention")
def alternating_coattention_figure():
    """The three steps of alternating co-attention: summarise the words, attend to regions, re-attend to words."""
    words, regions, mask = _tiny_inputs()
    torch.manual_seed(0)
    co = AlternatingCoAttention(DIM, hidden_dim=DIM)  # random init, no training
    with torch.no_grad():
        nothing = torch.zeros(1, DIM)
        s, w1 = co._attend(co.summarise, nothing, words, mask)
        v_hat, w2 = co._attend(co.to_image, s, regions)
        _, w3 = co._attend(co.to_question, v_hat, words, mask)
        _, _, a_v, a_q = co(regions, words, mask)
    assert torch.allclose(w2, a_v) and torch.allclose(w3, a_q)  # the steps are the module's forward

    fig, axes = plt.subplots(1, 3, figsize=(9.0, 2.8))
    steps = [(w1[0], WORDS, BLUE, r"1. $\bar{\mathbf{h}} = \mathrm{Att}(\mathbf{H};\, \mathbf{0})$: words, no guide"),
             (w2[0], REGIONS, ORANGE, r"2. $\hat{\mathbf{r}} = \mathrm{Att}(\mathbf{R};\, \bar{\mathbf{h}})$: regions"),
             (w3[0], WORDS, BLUE, r"3. $\hat{\mathbf{h}} = \mathrm{Att}(\mathbf{H};\, \hat{\mathbf{r}})$: words again")]
    for ax, (w, labels, colour, title) in zip(axes, steps):
        w = w.numpy()
        bar_colours = [colour if label != "<pad>" else PAD_COLOUR for label in labels]
        ax.bar(range(len(w)), w, color=bar_colours)
        ax.set_xticks(range(len(w)), labels, rotation=45 if labels is WORDS else 0, ha="right" if labels is WORDS else "center")
        ax.set_ylim(0, 0.45)
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("attention weight")
    fig.tight_layout()
    return fig


MODELS = [("ch07_coatt_features", f"{model_label('coatt')}, features", model_colour("coatt"), False),
          ("ch07_coatt_features_sum", f"{model_label('coatt_sum')}, features", model_colour("coatt_sum"), False),
          ("ch07_hiecoatt_features", f"{model_label('hiecoatt')}, features", model_colour("hiecoatt"), False),
          ("ch07_coatt_relational", f"{model_label('coatt')}, from pixels", model_colour("coatt"), True),
          ("ch07_hiecoatt_relational", f"{model_label('hiecoatt')}, from pixels", model_colour("hiecoatt"), True)]
TYPES = [("non_relational", "non-relational"), ("type_count", "count"),
         ("type_closest", "closest"), ("type_furthest", "furthest"), ("accuracy", "overall")]


@figure("ch07_results_accuracy")
def results_accuracy_figure():
    """Test accuracy per question type of both co-attention models, every seed, against the floors."""
    fig, ax = plt.subplots(figsize=(8.6, 3.4))
    grouped_bars(ax, MODELS, TYPES)
    ax.set_title("relational set: pretrained region features vs features learnt from pixels", fontsize=10)
    fig.tight_layout()
    return fig
