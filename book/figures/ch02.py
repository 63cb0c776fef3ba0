"""Figures of chapter 2: attention pooling."""

import torch

from _common import PAD_COLOUR, figure, heatmap
import matplotlib.pyplot as plt

from attn_tutorial.attention import masked_softmax


@figure("ch02_masked_softmax")
def masked_softmax_figure():
    """Scores of a padded batch, the mask, and the weights: padding gets exactly zero."""
    scores = torch.tensor([[1.0, 2.0, 0.5, 3.0, -1.0], [0.2, 1.5, -0.5, 4.0, 2.5]])
    mask = torch.tensor([[True, True, True, True, True], [True, True, True, False, False]])
    weights = masked_softmax(scores, mask)
    fig, axes = plt.subplots(1, 3, figsize=(9.0, 1.9))
    tokens = [f"t={t}" for t in range(1, 6)]
    heatmap(axes[0], scores.abs() / scores.abs().max(), ["review 1", "review 2"], tokens, annotate=False, cmap="Greys")
    for i in range(2):
        for j in range(5):
            axes[0].text(j, i, f"{scores[i, j]:.1f}", ha="center", va="center", fontsize=8)
    axes[0].set_title("scores $e_t$")
    heatmap(axes[1], mask.float(), ["", ""], tokens, fmt="{:.0f}", cmap="Greens", vmax=2.0)
    axes[1].set_title("mask (1 = real token)")
    heatmap(axes[2], weights, ["", ""], tokens, masked=~mask)
    axes[2].set_title(r"weights $\alpha_t$ (padding: 0)")
    fig.tight_layout()
    return fig
