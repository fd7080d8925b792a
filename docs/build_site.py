"""Build the documentation site: the pages of docs/ with Sphinx and MyST, the API reference with pdoc beside them.

    python docs/build_site.py [OUTPUT_DIR]      # `make docs`: build/docs/html (open index.html)

Sphinx reads docs/conf.py; its navigation is docs/index.md's toctrees. Any warning fails the build (Sphinx's `-W`,
every warning reported before it stops; pdoc's, docs/build_api_reference.py), with exit code 1: the site is built
without warnings or not at all. The API reference lands in OUTPUT_DIR/api, where the site's API page links to it.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

DOCS = Path(__file__).resolve().parent
DEFAULT_OUTPUT = Path("build") / "docs" / "html"


def build_pages(output: Path, doctrees: Path) -> int:
    """Sphinx's exit code: 0 for a site built without a warning."""
    from sphinx.cmd.build import build_main

    return build_main(["-W", "--keep-going", "-q", "-E", "-b", "html", "-d", str(doctrees), str(DOCS), str(output)])


def api_reference_builder() -> ModuleType:
    """docs/build_api_reference.py, which runs on its own too (a file beside this one, not a module of scaler)."""
    spec = importlib.util.spec_from_file_location("build_api_reference", DOCS / "build_api_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str]) -> int:
    output = Path(argv[0]) if argv else DEFAULT_OUTPUT
    if build_pages(output, output.parent / "doctrees") != 0:
        print("build_site: Sphinx gave warnings (above); the site must build without any", file=sys.stderr)
        return 1
    if not api_reference_builder().build_reported(output / "api", "build_site: API reference: "):
        return 1
    print(f"documentation site: {output / 'index.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
