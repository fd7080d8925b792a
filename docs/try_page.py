"""The page "Try it in your browser" (docs/try/: a console and cells that run scaler's browser client on Pyodide),
assembled into a folder a web server serves: the page, Pyodide, tweetnacl (CURVE's boxes in JavaScript), and the wheels
the page installs (this tree's, and the pure-Python ones its client imports that Pyodide does not ship).

    python docs/try_page.py fetch     # `make browser-tools`: Pyodide, tweetnacl (npm), the page's wheels (PyPI)

Pyodide comes from the npm package `pyodide` at PYODIDE_VERSION (its Python is PYODIDE_PYTHON: a cluster the page
connects to must run the same Python minor, which its scheduler checks), kept in CACHE. A site assembled without it
loads Pyodide from its CDN instead (the page says where from).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
PYODIDE_VERSION = "0.29.5"
PYODIDE_PYTHON = "3.13"
#: What the browser client imports besides the standard library and scaler, at the versions Pyodide's own list has
#: (under the names of that list: what the page loads from Pyodide's CDN when the site has no copy).
PAGE_WHEELS = ("cloudpickle==3.1.1", "typing_extensions==4.15.0")
PYODIDE_PACKAGES = ("cloudpickle", "typing-extensions")
CACHE = Path(os.environ.get("SCALER_BROWSER_CACHE", Path.home() / ".cache" / "scaler-browser"))
#: The files of the npm package the page loads.
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
#: NaCl in JavaScript (npm), whose boxes the page's CURVE uses where it loads (scaler/browser/js_boxes.py).
TWEETNACL_VERSION = "1.0.3"
TWEETNACL_FILE = "nacl-fast.min.js"


def pyodide_folder(cache: Path = CACHE) -> Path:
    return cache / f"pyodide-{PYODIDE_VERSION}"


def wheel_folder(cache: Path = CACHE) -> Path:
    return cache / "wheels"


def tweetnacl_file(cache: Path = CACHE) -> Path:
    return cache / f"tweetnacl-{TWEETNACL_VERSION}" / TWEETNACL_FILE


def fetched(cache: Path = CACHE) -> bool:
    """Whether the cache holds Pyodide, tweetnacl and the page's wheels."""
    pyodide = pyodide_folder(cache)
    wheels = list(wheel_folder(cache).glob("*.whl"))
    files = all((pyodide / name).is_file() for name in PYODIDE_FILES) and tweetnacl_file(cache).is_file()
    return files and len(wheels) >= len(PAGE_WHEELS)


def fetch(cache: Path = CACHE) -> None:
    """Pyodide from the npm registry and the page's wheels from PyPI, into the cache (nothing when they are there)."""
    if fetched(cache):
        return
    cache.mkdir(parents=True, exist_ok=True)
    for package, version, target in (("pyodide", PYODIDE_VERSION, pyodide_folder(cache)),
                                      ("tweetnacl", TWEETNACL_VERSION, tweetnacl_file(cache).parent)):  # fmt: skip
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            subprocess.run(["npm", "pack", f"{package}@{version}", "--silent"], cwd=scratch, check=True,
                           stdout=subprocess.DEVNULL, timeout=600)  # fmt: skip
            with tarfile.open(Path(scratch) / f"{package}-{version}.tgz") as archive:
                archive.extractall(scratch, filter="data")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(Path(scratch) / "package", target)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--python-version",
         PYODIDE_PYTHON, "--dest", str(wheel_folder(cache)), *PAGE_WHEELS],
        check=True, timeout=600,
    )  # fmt: skip


def assemble(output: Path, scaler_wheel: Path, cache: Path = CACHE) -> None:
    """The page in `output`: index.html and console.js, wheels/ with manifest.json (the wheels to install, in order),
    and pyodide/ when the cache has it (otherwise the page loads Pyodide and its packages from Pyodide's CDN)."""
    output.mkdir(parents=True, exist_ok=True)
    for name in ("index.html", "console.js"):
        shutil.copyfile(DOCS / "try" / name, output / name)
    wheels = output / "wheels"
    wheels.mkdir(exist_ok=True)
    names = []
    local = pyodide_folder(cache) if fetched(cache) else None
    for wheel in [*(sorted(wheel_folder(cache).glob("*.whl")) if local is not None else []), scaler_wheel]:
        shutil.copyfile(wheel, wheels / wheel.name)
        names.append(wheel.name)
    if local is not None:
        shutil.copyfile(tweetnacl_file(cache), output / TWEETNACL_FILE)
        shutil.rmtree(output / "pyodide", ignore_errors=True)
        (output / "pyodide").mkdir()
        for name in PYODIDE_FILES:
            shutil.copyfile(local / name, output / "pyodide" / name)
    manifest = {"pyodide": PYODIDE_VERSION, "python": PYODIDE_PYTHON, "local_pyodide": local is not None,
                "tweetnacl": TWEETNACL_VERSION, "packages": [] if local is not None else list(PYODIDE_PACKAGES),
                "wheels": names}  # fmt: skip
    (wheels / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        raise SystemExit("usage: python docs/try_page.py fetch")
    fetch()
    print(f"Pyodide {PYODIDE_VERSION} and the page's wheels are in {CACHE}")
