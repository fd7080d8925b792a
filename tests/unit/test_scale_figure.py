"""The Scale page's figure is a reader's (issue 77, item 7): what one scheduler holds at 100, 1,000 and 10,000
workers, its labels plain words and numbers that do not overlap, no commit hash or name of work in progress; and it is
what benchmarks/scale/figure.py draws from the results it names. Checked to fail before: the page showed the lab plot
(`scale.plot`), whose legends read "part 3 (461fbcc)" and whose value labels sat on one another."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
FIGURE = ROOT / "docs" / "images" / "scale.svg"
RESULTS = ROOT / "benchmarks" / "scale" / "results"
SVG = "{http://www.w3.org/2000/svg}"


def figure_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scale_figure", ROOT / "benchmarks" / "scale" / "figure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def texts(svg: str) -> list[tuple[float, float, str, float, str]]:
    """Every text of the figure: (x, y, anchor, font size, words)."""
    found = []
    for element in ElementTree.fromstring(svg).iter(f"{SVG}text"):
        size = float(element.get("font-size", "12"))
        found.append((float(element.get("x", 0)), float(element.get("y", 0)), element.get("text-anchor", "start"), size,
                      element.text or ""))  # fmt: skip
    return found


def box(x: float, y: float, anchor: str, size: float, words: str) -> tuple[float, float, float, float]:
    """An estimate of where a text is drawn (a sans-serif letter and a space are about 0.55 of its size wide)."""
    width = 0.55 * size * len(words)
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return left, y - size, left + width, y


def test_the_page_shows_the_figure_the_script_draws_from_its_results() -> None:
    docstring = figure_module().__doc__ or ""
    named = re.findall(r"scale/results/([\w.-]+\.json)", docstring)
    assert len(named) == 2, docstring
    run, queue = (json.loads((RESULTS / name).read_text()) for name in named)
    assert figure_module().svg(run, queue) == FIGURE.read_text()


def test_the_figure_is_a_readers() -> None:
    svg = FIGURE.read_text()
    words = " ".join(text for *_, text in texts(svg))
    assert not re.search(r"\bpart \d+\b|\([0-9a-f]{7,}\)|\btarget\b", words), words
    for workers in ("100 workers", "1,000 workers", "10,000 workers"):
        assert workers in words, words
    boxes = [box(*text) for text in texts(svg)]
    for first, one in enumerate(boxes):
        for other in boxes[first + 1 :]:
            overlap = one[0] < other[2] and other[0] < one[2] and one[1] < other[3] and other[1] < one[3]
            assert not overlap, (one, other)
