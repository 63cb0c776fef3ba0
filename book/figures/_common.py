"""Shared style and helpers for the course's figures (drawn by ``tools/figures.py``).

Every figure of a theory page is a function in ``book/figures/chNN.py`` registered with
:func:`figure`; the driver saves it as ``book/figures/<name>.svg``. Explanatory figures draw a
mechanism on a tiny example computed here with torch; results figures read ``book/results``
through :func:`record` so that a figure cannot disagree with the record it shows.
"""

from __future__ import annotations

from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REGISTRY: dict[str, Callable[[], "plt.Figure"]] = {}

# One palette for the whole book (colour-blind safe, Okabe & Ito).
BLUE, ORANGE, GREEN, RED, PURPLE, SKY, YELLOW, GREY = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999")
PALETTE = [BLUE, ORANGE, GREEN, RED, PURPLE, SKY, YELLOW, GREY]
PAD_COLOUR = "#dddddd"  # padding positions, everywhere
CMAP = "Blues"          # attention weights, everywhere

STYLE = {
    "figure.dpi": 100,
    "font.size": 10,
    "font.family": "DejaVu Sans",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "svg.hashsalt": "attention-step-by-step",  # deterministic ids: the drift check compares bytes
    "svg.fonttype": "path",
    "path.simplify": False,
}


def figure(name: str):
    """Register a function returning a matplotlib Figure as ``book/figures/<name>.svg``."""
    if not name.replace("_", "").isalnum() or not name.startswith("ch"):
        raise ValueError(f"figure names look like ch03_head_split, got {name!r}")

    def register(draw: Callable[[], "plt.Figure"]):
        if name in REGISTRY:
            raise ValueError(f"two figures are named {name!r}")
        REGISTRY[name] = draw
        return draw

    return register


def record(name: str, profile: str = "cpu") -> dict:
    """The recorded results of experiment ``name`` in ``profile`` (``book/results/<name>/<profile>.json``)."""
    from pathlib import Path

    from attn_tutorial.results import read_record

    # The committed records, whatever ATTN_RESULTS_DIR says (the tests point it at a scratch folder).
    path = Path(__file__).resolve().parent.parent / "results" / name / f"{profile}.json"
    if not path.is_file():
        raise LookupError(f"no {profile} record of {name} in book/results ({path} is missing)")
    return read_record(path)


def metric(name: str, key: str, profile: str = "cpu", percent: bool = True) -> tuple[float, float, int]:
    """(mean, sample std, number of seeds) of one recorded metric, in percent by default."""
    s = record(name, profile)["summary"][key]
    scale = 100.0 if percent else 1.0
    return scale * s["mean"], scale * s["std"], s["n"]


def caption_source(*names: str, profile: str = "cpu") -> str:
    """A short provenance line for a results figure: profile, device and seeds of each record."""
    parts = []
    for n in names:
        rec = record(n, profile)
        parts.append(f"{n}: {profile}, {rec['device']}, {len(rec['seeds'])} seed(s)")
    return "; ".join(parts)


def heatmap(ax, weights, row_labels=None, col_labels=None, *, vmax=None, fmt="{:.2f}", annotate=True,
            cmap=CMAP, masked=None):
    """Draw a weight matrix with its values written in the cells (masked cells greyed)."""
    import numpy as np

    w = np.asarray(weights, dtype=float)
    ax.imshow(w, cmap=cmap, vmin=0.0, vmax=vmax if vmax is not None else max(w.max(), 1e-9), aspect="equal")
    if masked is not None:
        m = np.asarray(masked, dtype=bool)
        for i, j in zip(*np.nonzero(m)):
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=PAD_COLOUR, zorder=2))
    if annotate:
        top = w.max() if vmax is None else vmax
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                if masked is not None and np.asarray(masked)[i, j]:
                    continue
                ax.text(j, i, fmt.format(w[i, j]), ha="center", va="center", fontsize=8, zorder=3,
                        color="white" if w[i, j] > 0.6 * top else "black")
    ax.set_xticks(range(w.shape[1]), col_labels if col_labels is not None else [])
    ax.set_yticks(range(w.shape[0]), row_labels if row_labels is not None else [])
    ax.tick_params(length=0)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    return ax


def box(ax, xy, width, height, text, colour=SKY, fontsize=9, **kw):
    """A labelled rounded box for block diagrams (axes in data coordinates)."""
    from matplotlib.patches import FancyBboxPatch

    x, y = xy
    ax.add_patch(FancyBboxPatch((x, y), width, height, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=colour, edgecolor="black", linewidth=0.8, **kw))
    ax.text(x + width / 2, y + height / 2, text, ha="center", va="center", fontsize=fontsize)


def arrow(ax, start, end, colour="black", **kw):
    """A straight arrow between two points of a block diagram."""
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="->", color=colour, linewidth=1.0, shrinkA=2, shrinkB=2, **kw))


def diagram_axes(width=7.0, height=3.0, xlim=(0, 10), ylim=(0, 4)):
    """A blank figure for block diagrams: equal units, no axes."""
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.axis("off")
    return fig, ax


def grouped_bars(ax, models, types, profile: str = "cpu"):
    """Recorded accuracy per question type, one bar per model, sample-std error bars over seeds.

    ``models``: ``(experiment, label, colour)``; ``types``: ``(metric key, tick label)``.
    """
    import numpy as np

    width = 0.8 / len(models)
    for i, (name, label, colour) in enumerate(models):
        stats = [metric(name, key, profile) for key, _ in types]
        x = np.arange(len(types)) + (i - (len(models) - 1) / 2) * width
        ax.bar(x, [m for m, _, _ in stats], width, yerr=[s for _, s, _ in stats], capsize=2, color=colour,
               label=f"{label} ({stats[0][2]} seeds)".replace("\n", " "))
    ax.set_xticks(range(len(types)), [t for _, t in types])
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 110)
    ax.set_yticks(range(0, 101, 20))
    ax.legend(fontsize=8, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    return ax
