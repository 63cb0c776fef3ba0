"""Figures of chapter 5: an image as region vectors, stacked attention's two hops, results."""

import numpy as np
import torch
import matplotlib.pyplot as plt

from _common import BLUE, GREY, ORANGE, figure, grouped_bars, model_colour, model_label

from attn_tutorial.vqa_data import COLOURS, SHAPES, Scene, render_scene
from attn_tutorial.vqa_models import StackedAttention

GRID = 8  # an 8 x 8 grid of cells of 8 x 8 pixels
# A hand-made scene: (column, row) of the cell holding each object's centre, and its shape.
CELLS = {"red": (1, 1, "square"), "green": (4, 1, "circle"), "blue": (6, 3, "square"),
         "orange": (1, 5, "circle"), "grey": (4, 4, "square"), "yellow": (6, 6, "circle")}
FEATURES = [*COLOURS, *SHAPES, "x", "y"]  # the columns of R: colour, shape, position
D = len(FEATURES)


def scene_and_regions():
    """The scene, its image and its region matrix R (N = 64 rows, D = 10 columns): for the cell
    holding an object's centre, the object's colour and shape (one-hot, what a pretrained detector
    would say); for every cell, its (x, y) in [-1, 1]."""
    centres = np.array([(8 * c + 4, 8 * r + 4) for c, r, _ in CELLS.values()], dtype=float)
    shapes = np.array([SHAPES.index(s) for _, _, s in CELLS.values()])
    scene = Scene(centres, shapes)
    regions = torch.zeros(GRID * GRID, D)
    coords = torch.linspace(-1, 1, GRID)
    for n in range(GRID * GRID):
        regions[n, -2], regions[n, -1] = coords[n % GRID], coords[n // GRID]
    for i, (c, r, s) in enumerate(CELLS.values()):
        regions[r * GRID + c, i] = 1.0
        regions[r * GRID + c, len(COLOURS) + SHAPES.index(s)] = 1.0
    return scene, render_scene(scene), regions


def hand_set_san(sharpness: float = 4.0) -> StackedAttention:
    """The package's two-hop layer with weights set by hand (no training). Hop 1 scores a region by
    how well its colour matches the query's colour; hop 2 by how well its shape matches the
    query's shape. Both use the additive score v^T tanh(W_q u + W_k r + b)."""
    san = StackedAttention(D, hops=2)
    colour_dims, shape_dims = range(len(COLOURS)), range(len(COLOURS), len(COLOURS) + len(SHAPES))
    with torch.no_grad():
        for hop, dims in zip(san.hops, (colour_dims, shape_dims)):
            for w in (hop.query.weight, hop.key.weight, hop.v.weight):
                w.zero_()
            for d in dims:  # unit d: tanh(a (u_d + r_d) - 1.5 a) > 0 only when both are about 1
                hop.query.weight[d, d] = sharpness
                hop.key.weight[d, d] = sharpness
                hop.v.weight[0, d] = sharpness
            hop.key.bias.fill_(-1.5 * sharpness)
    return san


def two_hops():
    """u^(0) = "red" (the question "how many objects have the same shape as the red object?"),
    the hops' weights (2, 64) and the queries u^(0), c^(1), u^(1)."""
    scene, image, regions = scene_and_regions()
    u0 = torch.zeros(1, D)
    u0[0, list(COLOURS).index("red")] = 1.0
    san = hand_set_san()
    with torch.no_grad():
        _, weights = san(u0, regions[None])  # (1, 2, 64)
        c1 = weights[0, 0] @ regions  # (D,): hop 1's context
    return image, regions, u0[0], c1, weights[0]


def grid_lines(ax, scale=8, colour="black"):
    ticks = np.arange(0, GRID * scale, scale) - 0.5
    ax.set_xticks(ticks, minor=True)
    ax.set_yticks(ticks, minor=True)
    ax.grid(which="minor", color=colour, linewidth=0.5, alpha=0.5)
    ax.tick_params(which="both", length=0)
    ax.set_xticks([])
    ax.set_yticks([])


@figure("ch05_region_grid")
def region_grid():
    """The image, its 8 x 8 cells numbered row by row, and R: one row per cell."""
    _, image, regions = scene_and_regions()
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 4.6), gridspec_kw={"width_ratios": [1.0, 0.62]})
    ax = axes[0]
    ax.imshow(image, interpolation="nearest")
    grid_lines(ax)
    for n in range(GRID * GRID):
        ax.text(8 * (n % GRID) + 1, 8 * (n // GRID) + 2.5, str(n + 1), fontsize=6, color="dimgrey")
    ax.set_title("image, 64 cells (region $n$ = cell $n$)")
    ax = axes[1]
    shown = regions.clone()
    shown[:, -2:] = (shown[:, -2:] + 1) / 2  # positions in [0, 1] for the colour scale
    ax.imshow(shown.numpy(), cmap="Blues", aspect="auto", vmin=0, vmax=1, interpolation="nearest")
    ax.set_xticks(range(D), FEATURES, rotation=90, fontsize=8)
    object_rows = sorted(r * GRID + c for c, r, _ in CELLS.values())
    ax.set_yticks(object_rows, [f"$\\mathbf{{r}}_{{{n + 1}}}$" for n in object_rows], fontsize=8)
    ax.tick_params(length=0)
    ax.axvline(len(COLOURS) - 0.5, color="black", linewidth=0.6)
    ax.axvline(len(COLOURS) + len(SHAPES) - 0.5, color="black", linewidth=0.6)
    ax.set_title(r"$\mathbf{R}$: $N = 64$ rows, $D = 10$")
    ax.set_ylabel("region $n$ (rows of cells without an object: position only)", fontsize=8)
    fig.tight_layout()
    return fig


@figure("ch05_san_hops")
def san_hops():
    """Hop 1 finds the red object; its features enter the query; hop 2 finds the objects of its shape."""
    image, regions, u0, c1, weights = two_hops()
    fig, axes = plt.subplots(1, 4, figsize=(10.0, 3.0), gridspec_kw={"width_ratios": [1, 1, 1, 1.25]})
    axes[0].imshow(image, interpolation="nearest")
    grid_lines(axes[0])
    axes[0].set_title("how many objects have the\nsame shape as the red one?", fontsize=9)
    for hop, ax in zip((0, 1), axes[1:3]):
        w = weights[hop].view(GRID, GRID).numpy()
        ax.imshow(image, interpolation="nearest", alpha=0.35)
        ax.imshow(np.kron(w, np.ones((8, 8))), cmap="Blues", alpha=0.75, vmin=0, vmax=1)
        grid_lines(ax)
        top = np.argsort(w.ravel())[::-1][:3]
        ax.set_title(f"hop {hop + 1}: weights $\\alpha^{{({hop + 1})}}_n$\n"
                     f"(largest {', '.join(f'{w.ravel()[n]:.2f}' for n in top)})", fontsize=9)
    u1 = u0 + c1
    ax = axes[3]
    x = np.arange(D)
    for k, (vec, label, colour) in enumerate(((u0, r"$\mathbf{u}^{(0)}$ (question)", GREY),
                                              (c1, r"$\mathbf{c}^{(1)}$ (hop 1)", ORANGE),
                                              (u1, r"$\mathbf{u}^{(1)} = \mathbf{u}^{(0)} + \mathbf{c}^{(1)}$", BLUE))):
        ax.bar(x + (k - 1) * 0.27, vec.numpy(), width=0.27, color=colour, label=label)
    ax.set_xticks(x, FEATURES, rotation=90, fontsize=8)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_title("the query of hop 2", fontsize=9)
    ax.legend(fontsize=7, loc="upper right", frameon=False)
    ax.set_ylim(-1.2, 2.6)
    fig.tight_layout()
    return fig


RESULTS = [("ch05_none_relational", f"{model_label('none')}, from pixels", model_colour("none"), True),
           ("ch05_san_relational", "SAN, from pixels", model_colour("san"), True),
           ("ch05_none_features", f"{model_label('none')}, on features", model_colour("none"), False),
           ("ch05_san_features", "SAN, on features", model_colour("san"), False)]
TYPES = [("non_relational", "non-relational"), ("type_shape", "shape"), ("type_horizontal", "left/right"),
         ("type_vertical", "top/bottom"), ("relational", "relational"), ("type_closest", "closest"),
         ("type_furthest", "furthest"), ("type_count", "count")]


@figure("ch05_results_features")
def results_features():
    """Test accuracy per question type, four models, a dot per seed on a bar at their mean; black
    marks at each type's object-blind floor (solid) and majority answer (dotted)."""
    fig, ax = plt.subplots(figsize=(9.0, 3.8))
    grouped_bars(ax, RESULTS, TYPES)
    ax.axvline(3.5, color="black", linewidth=0.5, linestyle=":")
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    fig.tight_layout()
    return fig
