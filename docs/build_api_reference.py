"""Build the API reference, HTML pages generated from the docstrings of the public modules, with pdoc.

    python docs/build_api_reference.py [OUTPUT_DIR]      # `make docs` (docs/build_site.py): build/docs/html/api

The public surface is what `scaler` exports (`scaler.__all__`: Client, futures, SchedulerClusterCombo, the
exceptions, ...) and `scaler.errors`, every exception scaler raises. Docstrings are Markdown, as written in the
code. Any warning pdoc gives (a module that fails to import, an annotation or a docstring it cannot read) fails
the build with exit code 1, naming it: the reference is built without warnings or not at all.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

#: The modules of the reference: a package and some of its submodules; its other submodules are left out
#: (they are the implementation).
MODULES = ("scaler", "scaler.errors")
DEFAULT_OUTPUT = Path("build") / "docs" / "api"


def build(output: Path, modules: Sequence[str] = MODULES) -> list[str]:
    """Render the reference of `modules` into `output`; the warnings pdoc gave, one line each (none: a clean
    build)."""
    import pdoc
    import pdoc.render

    from scaler.version import __version__

    package = modules[0]
    kept = "|".join(module.removeprefix(f"{package}.") for module in modules[1:])
    others = f"!{package}\\.(?!({kept})$).*" if kept else f"!{package}\\..*"
    pdoc.render.configure(docformat="markdown", search=False, show_source=False, footer_text=f"scaler {__version__}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*modules, others, output_directory=output)
    return [f"{warning.category.__name__}: {warning.message}" for warning in caught]


def build_reported(output: Path, prefix: str) -> bool:
    """`build` into `output`, each warning and then their count printed on stderr after `prefix`; whether it built
    without any."""
    problems = build(output)
    for problem in problems:
        print(f"{prefix}{problem}", file=sys.stderr)
    if problems:
        print(f"{prefix}{len(problems)} warning(s); the reference must build without any", file=sys.stderr)
    return not problems


def main(argv: Sequence[str]) -> int:
    output = Path(argv[0]) if argv else DEFAULT_OUTPUT
    if not build_reported(output, "build_api_reference: "):
        return 1
    print(f"API reference: {output / 'index.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
