"""What the results figures draw: nothing past what a percentage can be, one colour per model.

Draws every results figure (``chNN_results_*``, registered in ``book/figures/_common.py``) once, as
``tools/figures.py`` does, and inspects the artists. Each check has a small negative test on a
hand-made figure, so that it is known to bite.
"""

from __future__ import annotations

import re
import sys
import time

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "book" / "figures"))

EPS = 1e-6  # float slack of a value drawn exactly at 0 or 100


def _registry() -> dict:
    """The figure registry, with every chapter module imported the way tools/figures.py does (once a process)."""
    import _common
    import figures

    if not any("_results" in name for name in _common.REGISTRY):
        figures.load_modules()
    return _common.REGISTRY


@pytest.fixture(scope="module")
def results_figures():
    """{name: Figure} of every results figure, drawn in the book's style (closed afterwards)."""
    import _common
    import matplotlib.pyplot as plt
    import torch

    registry = _registry()
    drawn, start = {}, time.perf_counter()
    with plt.rc_context({**_common.STYLE, "figure.max_open_warning": 0}):  # all open until inspected
        for name in sorted(n for n in registry if "_results" in n):
            torch.manual_seed(0)  # as the driver does
            drawn[name] = registry[name]()
    print(f"drew {len(drawn)} results figures in {time.perf_counter() - start:.1f} s")
    yield drawn
    for fig in drawn.values():
        plt.close(fig)


# --- values on a percent axis ------------------------------------------------------------------------

def _data_along(artist_transform, ax, index: int) -> bool:
    """Whether coordinate ``index`` (0: x, 1: y) of an artist with this transform is in data units
    (axhline's x and axvline's y are in axes units, 0 to 1: not values)."""
    return artist_transform.contains_branch_seperately(ax.transData)[index]


def drawn_values(ax, index: int) -> list[float]:
    """Every value along axis ``index`` that ``ax`` draws in data units: error bars (their line
    collections and caps), lines, dots and other collections, and bars."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.container import ErrorbarContainer
    from matplotlib.patches import Polygon, Rectangle

    values: list[float] = []
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            _, caps, bar_lines = container.lines
            for collection in bar_lines:
                for segment in collection.get_segments():
                    values += list(np.asarray(segment)[:, index])
            for cap in caps:
                values += list(np.asarray(cap.get_xydata())[:, index])
    for line in ax.lines:
        if _data_along(line.get_transform(), ax, index):
            values += list(np.asarray(line.get_xydata(), dtype=float)[:, index])
    for collection in ax.collections:
        if isinstance(collection, PathCollection):  # dots: each at one offset
            if _data_along(collection.get_offset_transform(), ax, index):
                values += list(np.asarray(collection.get_offsets(), dtype=float)[:, index])
        elif _data_along(collection.get_transform(), ax, index):  # line segments (hlines, bars of errorbar), areas
            for path in collection.get_paths():
                values += list(path.vertices[:, index])
    for patch in ax.patches:
        if not _data_along(patch.get_transform(), ax, index):
            continue
        if isinstance(patch, Rectangle):
            start = patch.get_x() if index == 0 else patch.get_y()
            size = patch.get_width() if index == 0 else patch.get_height()
            values += [start, start + size]
        elif isinstance(patch, Polygon):
            values += list(np.asarray(patch.get_xy())[:, index])
    return [float(v) for v in values if np.isfinite(v)]


def percent_problems(fig, name: str = "figure") -> list[str]:
    """Values outside [0, 100] on any axis whose label says it is in percent."""
    problems = []
    for k, ax in enumerate(fig.axes):
        for index, label in enumerate((ax.get_xlabel(), ax.get_ylabel())):
            if "%" not in label:
                continue
            wrong = sorted({round(v, 3) for v in drawn_values(ax, index) if v < -EPS or v > 100 + EPS})
            if wrong:
                problems.append(f"{name}, axes {k} ({'xy'[index]}: {label!r}): drawn at {wrong[:5]}")
    return problems


def test_results_figures_draw_no_percentage_outside_0_to_100(results_figures):
    assert results_figures, "no results figure registered"
    problems = [p for name, fig in results_figures.items() for p in percent_problems(fig, name)]
    assert not problems, "\n".join(problems)


def test_percent_check_catches_a_whisker_a_dot_and_a_bar_past_100():
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3)
    try:
        axes[0].errorbar([0], [97.0], yerr=[8.0], capsize=2)  # mean 97 % ± 8: a whisker to 105 %
        axes[1].scatter([0, 1], [90.0, 100.5])
        axes[1].hlines([101.0], -0.2, 0.2)  # a mean mark past 100 %
        axes[2].barh([0], [103.0])
        axes[0].set_ylabel("accuracy (%)"), axes[1].set_ylabel("accuracy (%)"), axes[2].set_xlabel("share (%)")
        problems = percent_problems(fig)
        assert len(problems) == 3 and "105.0" in problems[0] and "100.5, 101.0" in problems[1], problems
        axes[0].set_ylabel("loss")  # not a percentage: not checked
        assert len(percent_problems(fig)) == 2
    finally:
        plt.close(fig)


# --- one colour per model ----------------------------------------------------------------------------

def _label(text: str) -> str:
    """A legend or artist label without line breaks and its trailing seed count ("(3 seeds)")."""
    return re.sub(r"\s*\(\d+ seeds?\)$", "", " ".join(text.split()))


def _colour(artist):
    """The RGB (alpha dropped) an artist shows its label in, or None."""
    from matplotlib.collections import Collection
    from matplotlib.colors import to_rgb
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if isinstance(artist, Line2D):
        colour = artist.get_color() if artist.get_linestyle() not in ("None", "none", "") else artist.get_markerfacecolor()
    elif isinstance(artist, Patch):
        face = artist.get_facecolor()
        colour = face if face[3] > 0.3 else artist.get_edgecolor()  # a hatched bar shows its edge colour
    elif isinstance(artist, Collection):
        colours = artist.get_facecolor() if len(artist.get_facecolor()) else artist.get_edgecolor()
        if not len(colours):
            return None
        colour = colours[0]
    else:
        return None
    return tuple(round(c, 3) for c in to_rgb(colour))


def labelled_colours(fig) -> list[tuple[str, tuple]]:
    """(label, RGB) of every labelled artist and legend entry of a figure."""
    from matplotlib.container import BarContainer, ErrorbarContainer

    found = []

    def add(label, artist):
        if label and not label.startswith("_") and artist is not None:
            colour = _colour(artist)
            if colour is not None:
                found.append((_label(label), colour))

    legends = list(fig.legends)
    for ax in fig.axes:
        for artist in [*ax.lines, *ax.collections, *ax.patches]:
            add(artist.get_label(), artist)
        for container in ax.containers:
            first = (container.patches[0] if isinstance(container, BarContainer) and container.patches else
                     container.lines[0] if isinstance(container, ErrorbarContainer) else None)
            add(container.get_label(), first)
        if ax.get_legend() is not None:
            legends.append(ax.get_legend())
    for legend in legends:
        handles = getattr(legend, "legend_handles", None) or getattr(legend, "legendHandles", [])
        for handle, text in zip(handles, legend.get_texts()):
            add(text.get_text(), handle)
    return found


def model_of(label: str) -> str | None:
    """The key of ``_common.MODELS`` whose display label is ``label``, or starts it ("..., from pixels")."""
    import _common

    matches = [(len(shown), key) for key, (shown, _) in _common.MODELS.items()
               if label == shown or label.startswith(shown + ", ")]
    return max(matches)[1] if matches else None


def colour_problems(figures: dict) -> list[str]:
    """A label shown in two colours (in one figure or across figures); a model's label not in its
    MODELS colour; two models of MODELS in one colour in one figure."""
    from matplotlib.colors import to_rgb

    import _common

    seen: dict[str, dict[tuple, set]] = {}
    problems = []
    for name, fig in figures.items():
        models_here: dict[tuple, set] = {}
        for label, colour in labelled_colours(fig):
            seen.setdefault(label, {}).setdefault(colour, set()).add(name)
            key = model_of(label)
            if key is None:
                continue
            models_here.setdefault(colour, set()).add(key)
            wanted = tuple(round(c, 3) for c in to_rgb(_common.MODELS[key][1]))
            if colour != wanted:
                problems.append(f"{name}: {label!r} drawn in {colour}, but MODELS[{key!r}] is {_common.MODELS[key][1]}")
        problems += [f"{name}: models {sorted(keys)} share the colour {colour}"
                     for colour, keys in models_here.items() if len(keys) > 1]
    for label, colours in seen.items():
        if len(colours) > 1:
            where = "; ".join(f"{c} in {sorted(names)}" for c, names in colours.items())
            problems.append(f"{label!r} has {len(colours)} colours: {where}")
    return sorted(set(problems))


def test_a_model_has_one_colour_in_every_results_figure(results_figures):
    problems = colour_problems(results_figures)
    assert not problems, "\n".join(problems)


def test_every_models_entry_has_a_palette_colour_and_a_unique_label():
    import _common

    palette = set(_common.PALETTE) | {_common.BLACK}
    assert all(colour in palette for _, colour in _common.MODELS.values())
    labels = [label for label, _ in _common.MODELS.values()]
    assert len(labels) == len(set(labels)), "two models share a display label"


def test_colour_check_catches_one_label_in_two_colours():
    import _common
    import matplotlib.pyplot as plt

    first, ax1 = plt.subplots()
    second, ax2 = plt.subplots()
    try:
        ax1.plot([0, 1], [50, 60], color=_common.BLUE, label="SAN, on features (3 seeds)")
        ax2.bar([0], [55], color=_common.ORANGE, label="SAN, on features (5 seeds)")
        ax2.legend()
        problems = colour_problems({"first": first, "second": second})
        assert any("'SAN, on features' has 2 colours" in p for p in problems), problems
        # a label of MODELS in another colour than the mapping's, and two models in one colour
        ax1.scatter([0], [50], color=_common.ORANGE, label=_common.model_label("san"))
        ax1.scatter([1], [60], color=_common.ORANGE, label=_common.model_label("transformer"))
        problems = colour_problems({"first": first})
        assert any("MODELS['san']" in p for p in problems), problems
        assert any("share the colour" in p for p in problems), problems
    finally:
        plt.close(first), plt.close(second)
