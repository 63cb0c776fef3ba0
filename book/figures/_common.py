"""Shared style and helpers for the course's figures (drawn by ``tools/figures.py``).

Every figure of a theory page is a function in ``book/figures/chNN.py`` registered with
:func:`figure`; the driver saves it as ``book/figures/<name>.svg``. Explanatory figures draw a
mechanism on a tiny example computed here with torch; results figures read ``book/results``
through :func:`record` so that a figure cannot disagree with the record it shows.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REGISTRY: dict[str, Callable[[], "plt.Figure"]] = {}

# One palette for the whole book (colour-blind safe, Okabe & Ito).
BLUE, ORANGE, GREEN, RED, PURPLE, SKY, YELLOW, GREY = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999")
PALETTE = [BLUE, ORANGE, GREEN, RED, PURPLE, SKY, YELLOW, GREY]
BLACK = "#000000"  # Okabe & Ito's eighth colour: reference lines, and two models never drawn as bars (MODELS)

# One colour and one display label per model, the same in every figure of the book: a results
# figure takes a model's colour (and, in legends, its label) from here, never from the palette.
# Eight colours (and black) cannot tell forty models apart, so a colour repeats, but only between
# models that no figure shows together (tests/test_figures.py checks the labelled ones):
#   - the IMDB classifiers (chapters 0-4, 6, and chapter 3's MHSA in chapter 10) and the ways of
#     computing attention (chapter 3's memory, chapter 10's costs, errors and full-length IMDB runs):
#     exact = svd = attention pooling (blue), linear = structured self-attention (green),
#     window = local = DIFF (purple), Linformer = bag of n-grams = difference-sequence attention
#     (sky), explicit = HAN (red), chunked = BiLSTM (grey), online = NB logistic regression (black),
#     Performer = MHSA (orange); chapter 10's IMDB figure shows MHSA with exact, window, Linformer
#     and linear only, which keep colours apart from it;
#   - the VQA models (chapters 5, 7-9), the translation models (chapter 11) and the language models
#     (chapter 13) each reuse the palette, never in a figure with another group.
# Where it could, a colour keeps one kind of mechanism across the groups: grey for no attention
# (the BiLSTM of chapter 1, VQA's and translation's baselines), blue for one query attending
# (attention pooling, SAN, Bahdanau), orange for self-attention (MHSA, between regions, Transformer),
# purple for differential attention. Black stays off bars (the seeds' dots are dark).
MODELS: dict[str, tuple[str, str]] = {  # key -> (display label, colour)
    # IMDB classifiers, chapters 0-4 and 6 (and chapter 3's MHSA in chapter 10)
    "nblr": ("NB-weighted logistic regression", BLACK),
    "bow": ("hashed bag of n-grams", SKY),
    "bilstm": ("BiLSTM, masked mean + max", GREY),
    "attnpool": ("attention pooling", BLUE),
    "selfattentive": ("structured self-attention", GREEN),
    "mhsa": ("multi-head self-attention (MHSA)", ORANGE),
    "difference": ("difference-sequence attention", SKY),
    "diff": ("differential attention (DIFF)", PURPLE),
    "han": ("hierarchical attention (HAN)", RED),
    # how attention is computed: chapter 3's memory, chapter 10's costs, errors and full-length IMDB
    "exact": ("exact (SDPA)", BLUE),
    "explicit": ("explicit (weights in memory)", RED),
    "chunked": ("query chunks", GREY),
    "online": ("online softmax", BLACK),
    "local": ("local blocks", PURPLE),
    "window": ("sliding window", PURPLE),
    "linformer": ("Linformer", SKY),
    "linear": ("linear (elu + 1)", GREEN),
    "performer": ("Performer", ORANGE),
    "svd": ("best rank r (SVD)", BLUE),
    # VQA, chapters 5 and 7-9
    "none": ("no attention", GREY),
    "san": ("stacked attention (SAN)", BLUE),
    "coatt": ("parallel co-attention", GREEN),
    "coatt_sum": ("parallel co-attention, summed transfer", YELLOW),
    "hiecoatt": ("hierarchical co-attention", SKY),
    "ban": ("bilinear attention (BAN)", RED),
    "transformer": ("self-attention between regions", ORANGE),
    "relnet": ("relation network", PURPLE),
    # translation, chapter 11
    "mt_none_init": ("no attention, first state only", PURPLE),
    "mt_none": ("no attention, every step", GREY),
    "bahdanau": ("Bahdanau attention", BLUE),
    "mt_transformer": ("Transformer", ORANGE),
    # language models, chapter 13
    "rope": ("RoPE (base)", BLUE),
    "sinusoidal": ("sinusoidal", GREY),
    "alibi": ("ALiBi", ORANGE),
    "gqa": ("GQA, 2 kv heads", GREEN),
    "mqa": ("MQA, 1 kv head", SKY),
    "lm_diff": ("differential", PURPLE),
    "moh": ("mixture of heads", RED),
}


def model_colour(key: str) -> str:
    """The colour of model ``key`` in every figure (see :data:`MODELS`)."""
    return MODELS[key][1]


def model_label(key: str) -> str:
    """The display label of model ``key`` (see :data:`MODELS`)."""
    return MODELS[key][0]


# A second condition of the same model in one figure (VQA: trained from pixels rather than on
# pretrained features): the model's colour, hatched on a pale fill, instead of another colour.
def bar_style(colour: str, variant: bool = False) -> dict:
    """Keyword arguments for a bar of ``colour`` (the mean over seeds; the seeds' dots go on top in
    :data:`DOT_COLOUR`); ``variant``: hatched in the same colour, the second condition of a model."""
    from matplotlib.colors import to_rgba

    if variant:
        return dict(facecolor=to_rgba(colour, 0.15), edgecolor=colour, hatch="////", linewidth=0.8)
    return dict(facecolor=to_rgba(colour, 1.0), edgecolor=colour, linewidth=0.8)


DOT_COLOUR = "#333333"  # the seeds' dots on a bar of the model's colour (on no bar, dots take the model's colour)


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


# ------------------------------------------------------------------ the Chinese edition's figures
# Every figure is also drawn in Chinese, as <name>.zh_CN.svg (Sphinx shows it in the Chinese
# edition: figure_language_filename). The code draws the English figure; its texts are then
# replaced by their translations from this table (English text -> Chinese; `tools/figures.py
# --labels` adds the texts of new figures with an empty translation).
LABELS_ZH = Path(__file__).with_name("labels_zh.json")
_LETTERS = re.compile(r"[A-Za-z]{2,}")
_MATH = re.compile(r"\$[^$]*\$")
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def chinese_font() -> str:
    """A font with Chinese characters (the SVGs embed the glyphs as paths, so readers need none)."""
    from matplotlib import font_manager

    def find() -> str | None:
        return next((font.name for font in font_manager.fontManager.ttflist
                     if any(name in font.name for name in ("WenQuanYi", "Noto Sans CJK", "Noto Serif CJK", "Source Han"))),
                    None)

    if (name := find()) is not None:
        return name
    # a font installed after matplotlib cached its list of fonts (the test command installs one where
    # none is found): add the system's Chinese fonts to the list in use
    for path in font_manager.findSystemFonts():
        if any(key in Path(path).name.lower() for key in ("wqy", "notosanscjk", "notoserifcjk", "sourcehan")):
            font_manager.fontManager.addfont(path)
    if (name := find()) is not None:
        return name
    raise RuntimeError("the Chinese figures need a font with Chinese characters: install one (Debian: "
                       "apt-get install fonts-wqy-microhei) and delete matplotlib's font cache "
                       "(~/.cache/matplotlib) so that it is found")


def needs_translation(text: str) -> bool:
    """A figure text with words in it (not only numbers, symbols or math)."""
    return bool(_LETTERS.search(_MATH.sub(" ", text)))


def figure_texts(fig) -> list[str]:
    """Every text a drawn figure shows that has words in it (titles, labels, ticks, legends, notes)."""
    from matplotlib.text import Text

    fig.canvas.draw()  # tick labels exist once drawn
    texts = {t.get_text() for t in fig.findobj(Text)}
    return sorted(t for t in texts if t and needs_translation(t))


def translate_figure(fig, table: dict[str, str]) -> list[str]:
    """Replace the texts of ``fig`` by their translations in ``table``; return those without one."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    for ax in fig.axes:  # fixed tick labels are re-made from their formatter at every draw
        for axis in (ax.xaxis, ax.yaxis):
            for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(formatter, FixedFormatter):
                    formatter.seq = [table.get(s) or s for s in formatter.seq]
                elif isinstance(formatter, FuncFormatter) and isinstance(formatter.func, functools.partial):
                    # matplotlib >= 3.10 keeps set_xticks(ticks, labels) as a partial over {tick: label}
                    for labels in formatter.func.args:
                        if isinstance(labels, dict):
                            for tick, label in labels.items():
                                labels[tick] = table.get(label) or label
    missing = []
    for text in figure_texts(fig):
        if not table.get(text):
            missing.append(text)
    chinese_first = [chinese_font(), STYLE["font.family"]]
    for artist in fig.findobj(Text):
        translated = table.get(artist.get_text())
        if translated:
            artist.set_text(translated)
        if "$" in artist.get_text() and _CJK.search(artist.get_text()):
            # with math in it, matplotlib draws a text in one font, without falling back per glyph
            artist.set_fontfamily(chinese_first)
    return missing


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


def seeds(name: str, key: str, profile: str = "cpu", percent: bool = True) -> list[float]:
    """Every seed's value of one recorded metric (in the record's order of runs), in percent by default."""
    scale = 100.0 if percent else 1.0
    return [scale * run["metrics"][key] for run in record(name, profile)["runs"]]


def seed_dots(ax, x, values, colour, *, width=0.5, label=None, horizontal=False, mean=True, size=16,
              marker="o", tol=None, zorder=3):
    """Each seed's value as a small dot and their mean as a short line, at position ``x``.

    Dots whose values lie within ``tol`` of each other (default: 2 % of the axis's current span, so
    set the value axis's limits first) are spread sideways within ``width``; the mean line spans
    ``width``. ``horizontal``: the values run along the x axis (``x`` is then a y position).
    ``mean=False`` leaves the mean to a bar drawn behind. Returns the dots' collection.
    """
    import numpy as np

    v = np.asarray(values, dtype=float)
    log = (ax.get_xscale() if horizontal else ax.get_yscale()) == "log"
    if tol is None:
        lo, hi = ax.get_xlim() if horizontal else ax.get_ylim()
        tol = 0.02 * (abs(np.log10(hi) - np.log10(lo)) if log and lo > 0 and hi > 0 else abs(hi - lo))
    position = np.log10(np.maximum(v, 1e-300)) if log else v
    order = np.argsort(position, kind="stable")
    offsets = np.zeros(len(v))
    cluster = [order[0]] if len(v) else []
    for i, j in zip(order[:-1], order[1:]):
        if position[j] - position[i] >= tol:  # a new group of coinciding values starts
            _spread(offsets, cluster, width)
            cluster = []
        cluster.append(j)
    if cluster:
        _spread(offsets, cluster, width)
    xs = x + offsets
    points = ax.scatter(v if horizontal else xs, xs if horizontal else v, s=size, color=colour, marker=marker,
                        edgecolors="white", linewidths=0.5, zorder=zorder, label=label)
    if mean and len(v):
        m = float(v.mean())
        draw = ax.vlines if horizontal else ax.hlines
        draw(m, x - width / 2, x + width / 2, colors=colour, linewidth=2.0, zorder=zorder - 0.1)
    return points


def _spread(offsets, cluster, width):
    """Offsets for ``cluster`` (indices of coinciding values): evenly over at most 80 % of ``width``."""
    import numpy as np

    m = len(cluster)
    if m > 1:
        spread = min(0.8 * width, 0.25 * width * (m - 1))
        offsets[cluster] = np.linspace(-spread / 2, spread / 2, m)


def device_label(device: str) -> str:
    """A record's device for a figure: ``cpu (1 threads, x86_64)`` reads ``cpu (1 thread, x86_64)``."""
    import re

    return re.sub(r"\b1 threads\b", "1 thread", device)


# --- the floors of the relational VQA set (chapters 5, 7, 8, 9) ------------------------------------

_TYPE_GROUPS = {"non_relational": False, "relational": True, "accuracy": None}  # None: every type


def vqa_floors(profile: str = "cpu", part: str = "test") -> dict[str, tuple[float, float]]:
    """{metric key: (object-blind floor, majority-answer floor)} in percent on the relational set's
    ``part`` scenes, computed with the package as the notebooks do, for every question type
    (``type_shape``, ...) and for the groups the records hold (``non_relational``, ``relational``,
    ``accuracy``): a group's floor is its types' floors weighted by their numbers of questions (a
    floor answers knowing the question's type). The object-blind floor is the best answer that
    ignores which object is asked about; the majority floor, each type's most frequent answer."""
    return dict(_vqa_floors(profile, part))


@functools.lru_cache(maxsize=None)
def _vqa_floors(profile: str, part: str) -> tuple:
    import collections

    from attn_tutorial.vqa_data import RELATIONAL_QUESTIONS, object_blind_accuracy, relational_split

    split = relational_split(profile, part)
    blind = object_blind_accuracy(split)
    answers = collections.defaultdict(collections.Counter)
    for q, t in enumerate(split.question_types):
        answers[t][split.answer_text(q)] += 1
    count = {t: sum(c.values()) for t, c in answers.items()}
    majority = {t: max(c.values()) / count[t] for t, c in answers.items()}
    floors = {f"type_{t}": (100 * blind[t], 100 * majority[t]) for t in blind}
    for key, relational in _TYPE_GROUPS.items():
        types = [t for t in blind if relational is None or RELATIONAL_QUESTIONS[t][0] == relational]
        n = sum(count[t] for t in types)
        floors[key] = tuple(100 * sum(f[t] * count[t] for t in types) / n for f in (blind, majority))
    return tuple(floors.items())


def draw_floors(ax, spans, profile: str = "cpu", legend: bool = True):
    """The VQA floors as black marks: solid at the object-blind floor, dotted at the majority answer.

    ``spans``: ``(metric key, x centre, half width)`` for each group of bars (a key without a floor,
    such as a mass, is skipped). The first mark of each kind carries the legend label."""
    floors = vqa_floors(profile)
    labelled = not legend
    for key, x, half in spans:
        if key not in floors:
            continue
        blind, majority = floors[key]
        ax.hlines(blind, x - half, x + half, color=BLACK, linewidth=1.8, zorder=4,
                  label=None if labelled else "object-blind floor")
        ax.hlines(majority, x - half, x + half, color=BLACK, linewidth=1.0, linestyles=":", zorder=4,
                  label=None if labelled else "majority answer")
        labelled = True


def caption_source(*names: str, profile: str = "cpu") -> str:
    """A short provenance line for a results figure: profile, device and seeds of each record."""
    parts = []
    for n in names:
        rec = record(n, profile)
        parts.append(f"{n}: {profile}, {device_label(rec['device'])}, {len(rec['seeds'])} seed(s)")
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


def grouped_bars(ax, models, types, profile: str = "cpu", floors: bool = True):
    """Recorded accuracy per question type: one pale bar per model at the mean over seeds, a dot per
    seed on it, and (``floors``) the VQA floors of each type (:func:`draw_floors`).

    ``models``: ``(experiment, label, colour, variant)``, ``variant`` hatching the bar (the same model
    in a second condition, see :func:`bar_style`); ``types``: ``(metric key, tick label)``.
    Any number of seeds: they are read from each record.
    """
    import numpy as np

    ax.set_ylim(0, 105)  # before the dots: they spread by the axis's span
    width = 0.8 / len(models)
    for i, (name, label, colour, variant) in enumerate(models):
        x = np.arange(len(types)) + (i - (len(models) - 1) / 2) * width
        values = [seeds(name, key, profile) for key, _ in types]
        ax.bar(x, [float(np.mean(v)) for v in values], width, label=f"{label} ({len(values[0])} seeds)",
               **bar_style(colour, variant))
        for xi, v in zip(x, values):
            seed_dots(ax, xi, v, DOT_COLOUR, width=0.8 * width, mean=False, size=12)
    if floors:
        draw_floors(ax, [(key, j, 0.45) for j, (key, _) in enumerate(types)], profile)
    ax.set_xticks(range(len(types)), [t for _, t in types])
    ax.set_ylabel("test accuracy (%)")
    ax.set_yticks(range(0, 101, 20))
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    return ax
