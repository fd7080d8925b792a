"""Build the documentation site: the pages of docs/ with Sphinx and MyST, the API reference with pdoc beside them,
and the page "Try it in your browser" (docs/try/, with the wheels and Pyodide it loads) in try/.

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


def beside(name: str) -> ModuleType:
    """A script of docs/ as a module (build_api_reference.py: a file beside this one, not a module of scaler; it runs
    on its own too)."""
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_try_page(output: Path) -> bool:
    """The page in OUTPUT_DIR/try (scaler.browser.served_page): wheels of what is installed here (this tree's scaler,
    in the environment that builds the site), Pyodide from the cache when `make browser-tools` filled it (otherwise
    the page loads it from the CDN)."""
    from scaler.browser.served_page import assemble

    problem = assemble(output / "try").problem
    if problem is not None:
        print(f"build_site: the try page cannot run: {problem}", file=sys.stderr)
        return False
    return True


def main(argv: Sequence[str]) -> int:
    output = Path(argv[0]) if argv else DEFAULT_OUTPUT
    if build_pages(output, output.parent / "doctrees") != 0:
        print("build_site: Sphinx gave warnings (above); the site must build without any", file=sys.stderr)
        return 1
    if not beside("build_api_reference").build_reported(output / "api", "build_site: API reference: "):
        return 1
    if not build_try_page(output):
        return 1
    print(f"documentation site: {output / 'index.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
