"""Draw the book's figures from code (hand-written infrastructure; called by the build and the tests).

    python tools/figures.py            # (re)draw every figure into book/figures/*.svg
    python tools/figures.py --check    # exit 1 when a committed SVG differs from what the code draws
    python tools/figures.py ch03 ch04  # only the figures of these chapters
    python tools/figures.py ch03 --preview /tmp/fig   # also PNG previews to look at

Each ``book/figures/chNN.py`` registers its figures with ``_common.figure``. Explanatory figures
compute their tiny examples with torch and the package; results figures read ``book/results``,
so a changed record shows up as drift here until the figure is redrawn.

``--check`` compares drawings, not bytes: every number in the SVG (coordinates, sizes) may differ
from the committed one by up to ``TOLERANCE`` points, everything else must be identical. The
last bits of a float32 computation depend on the CPU's kernels (AVX-512 or not), and one figure
drawn on two machines differed by 0.00001 pt in a few coordinates; a real change moves a point
by far more, or changes a label's glyphs.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "book" / "figures"
TOLERANCE = 0.01  # points (1/72 inch): far below what a reader can see
_NUMBER = re.compile(rb"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)")


def same_drawing(old: bytes, new: bytes, tolerance: float = TOLERANCE) -> bool:
    """Whether two SVGs draw the same figure: equal except for numbers within ``tolerance``."""
    if old == new:
        return True
    a, b = _NUMBER.split(old), _NUMBER.split(new)
    if len(a) != len(b):
        return False
    # re.split with a group alternates text (even positions) and numbers (odd positions)
    return all(x == y or (i % 2 == 1 and abs(float(x) - float(y)) <= tolerance)  # (ids like "6e433": inf)
               for i, (x, y) in enumerate(zip(a, b)))


def load_modules(chapters: list[str] | None = None) -> dict:
    """Import every figure module (or only those of ``chapters``); return the registry."""
    sys.path.insert(0, str(FIGURES))
    sys.path.insert(0, str(ROOT))
    import _common

    for path in sorted(FIGURES.glob("ch*.py")):
        if chapters and not any(path.stem.startswith(c) for c in chapters):
            continue
        spec = importlib.util.spec_from_file_location(f"_figures_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return _common.REGISTRY


def render(draw) -> bytes:
    """One figure as SVG bytes, without the date and tool stamps (so the bytes are reproducible)."""
    import matplotlib.pyplot as plt
    import _common

    with plt.rc_context(_common.STYLE):
        import torch

        torch.manual_seed(0)
        fig = draw()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
        plt.close(fig)
    return buffer.getvalue()


def preview(draw, path: Path) -> None:
    """A PNG of one figure, for looking at it where no SVG viewer is at hand."""
    import matplotlib.pyplot as plt
    import _common

    path.parent.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(_common.STYLE):
        import torch

        torch.manual_seed(0)  # the same numbers as in the SVG
        fig = draw()
        fig.savefig(path, format="png", bbox_inches="tight", dpi=80)
        plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="chapter prefixes such as ch03 (default: all)")
    parser.add_argument("--check", action="store_true", help="compare with the committed SVGs, write nothing")
    parser.add_argument("--preview", metavar="DIR", help="also write a PNG of each figure into DIR (to look at)")
    args = parser.parse_args(argv)
    registry = load_modules(args.chapters)
    stale = []
    for name, draw in sorted(registry.items()):
        path = FIGURES / f"{name}.svg"
        svg = render(draw)
        if args.preview:
            preview(draw, Path(args.preview) / f"{name}.png")
        if args.check:
            if not path.is_file() or not same_drawing(path.read_bytes(), svg):
                stale.append(name)
        elif not path.is_file() or path.read_bytes() != svg:
            path.write_bytes(svg)
            print(f"drew {path.relative_to(ROOT)}")
    orphans = sorted(p.stem for p in FIGURES.glob("*.svg") if p.stem not in registry) if not args.chapters else []
    if args.check and (stale or orphans):
        for name in stale:
            print(f"book/figures/{name}.svg differs from what its code draws")
        for name in orphans:
            print(f"book/figures/{name}.svg has no code that draws it")
        print("redraw with: python tools/figures.py (and commit the SVGs)")
        return 1
    if args.check:
        print(f"{len(registry)} figures match their code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
