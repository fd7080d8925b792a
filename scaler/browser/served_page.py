"""The page "Try it in your browser" as a web server serves it: `scaler --docs try --serve PORT` from an installed
scaler, and the site `make docs` builds in a clone.

What the page loads besides its own two files (docs/try/, which ship with the documentation):

- wheels of what its client imports (`PAGE_DISTRIBUTIONS`), packed from the distributions installed on the serving
  machine, as a cloud unit's are (`worker_manager.ship.wheels`): no package index and no build tool is asked;
- Pyodide and tweetnacl: from the local cache (`runtime_cache()`) when it has them, otherwise from jsDelivr's copy of
  their npm packages, at the versions pinned here;
- a manifest (`wheels/manifest.json`) saying where each comes from, and the digest of every file.

The page checks every file against its digest before it runs it (subresource integrity): a copy of another build, in
the cache or from the CDN, is refused in one line rather than run beside the user's secret key. The digests are those
of the npm packages' files (npm checks each package against the registry's own digest); `docs/try_page.py fetch`, which
fills the cache in a clone, checks a fetched copy against them too.
"""

from __future__ import annotations

import base64
import importlib.metadata
import json
import os
import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaler.config.installed_docs import docs_root
from scaler.worker_manager.ship.distributions import describe
from scaler.worker_manager.ship.wheels import WheelError, wheel_of

PYODIDE_VERSION = "0.29.5"
#: The Python of that Pyodide: a cluster the page connects to must run the same minor version (its scheduler checks).
PYODIDE_PYTHON = "3.13"
#: Pyodide's files the page loads, with the SHA-384 digest of each (as subresource integrity writes it).
PYODIDE_FILES = {
    "pyodide.mjs": "sha384-Rz62KUV65z4NpF1FvF14JmZUtlMVytKj4v6lLxOOgGRZD8rtkKXR2VuR++5m0Bbt",
    "pyodide.asm.js": "sha384-8mBRd9rjeP9blbPmWuCum2qq484+GPVFDSaebLOh+ryUrQZz9SJ4v2dh4STKX9Jo",
    "pyodide.asm.wasm": "sha384-8LoW84uYNGn2avpfQNVvzVXqylKrFwJgbBNJ87g6D5Ud+8bzAJzOV38jQkOpVBq7",
    "python_stdlib.zip": "sha384-qFTVfVvRHvt1V/9yXR9tJ0uAKF7men+qhxh13+YPQPYWYMAq4dKaaL6N+/DIo4gR",
    "pyodide-lock.json": "sha384-xDHcZeNLjl7+brzrlYDRbrxe3I9kROtVuWNljcqvsUtLl47M+jg2UGQ13S7KV5Xc",
}
#: NaCl in JavaScript (npm), whose boxes the page's CURVE uses where it loads (scaler/browser/js_boxes.py).
TWEETNACL_VERSION = "1.0.3"
TWEETNACL_FILE = "nacl-fast.min.js"
TWEETNACL_DIGEST = "sha384-05+sicyRJQ56XpL4U9HJ8YbtSzFDvAg7apPKOGV6A0JsAJKFM68jp5oLnUjG5mEp"
#: jsDelivr serves an npm package's files as the package has them, so the digests above hold there too.
PYODIDE_CDN = f"https://cdn.jsdelivr.net/npm/pyodide@{PYODIDE_VERSION}/"
TWEETNACL_CDN = f"https://cdn.jsdelivr.net/npm/tweetnacl@{TWEETNACL_VERSION}/{TWEETNACL_FILE}"
#: What the client in the page imports besides the standard library, installed with scaler.
PAGE_DISTRIBUTIONS = ("scaler-compute", "cloudpickle", "typing-extensions")
#: The page's own files, in the documentation's folder try/.
PAGE_FILES = ("index.html", "console.js")


def runtime_cache() -> Path:
    """Where Pyodide and tweetnacl are kept on this machine: $SCALER_BROWSER_CACHE, else scaler-browser in the user's
    cache folder."""
    explicit = os.environ.get("SCALER_BROWSER_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "scaler-browser"


def pyodide_folder(cache: Path) -> Path:
    return cache / f"pyodide-{PYODIDE_VERSION}"


def tweetnacl_file(cache: Path) -> Path:
    return cache / f"tweetnacl-{TWEETNACL_VERSION}" / TWEETNACL_FILE


def has_runtime(cache: Path) -> bool:
    """Whether the cache holds Pyodide's files and tweetnacl (whether they are the pinned ones, the page checks)."""
    return all((pyodide_folder(cache) / name).is_file() for name in PYODIDE_FILES) and tweetnacl_file(cache).is_file()


@dataclass(frozen=True)
class PageWheels:
    """The wheels the page installs, in order, or why they cannot be made."""

    files: dict[str, Path] = field(default_factory=dict)  #: file name -> the wheel
    integrity: dict[str, str] = field(default_factory=dict)  #: file name -> its digest, as the page checks it
    problem: str | None = None  #: one line for the page: what could not be made, and what to do


def page_wheels(distributions: tuple[str, ...] = PAGE_DISTRIBUTIONS, cache: Path | None = None) -> PageWheels:
    """Wheels of the installed `distributions`, packed from their files (into `cache`, the shipped wheels' cache by
    default: the same files give the same wheel, packed once)."""
    wheels = PageWheels()
    for name in distributions:
        try:
            installed = describe(importlib.metadata.distribution(name))
            if installed is None:
                raise WheelError(f"{name}: its metadata cannot be read")
            wheel = wheel_of(installed, cache)
        except importlib.metadata.PackageNotFoundError:
            return PageWheels(problem=f"the page needs {name}, which is not installed beside this scaler: "
                                      f"pip install {name}, then serve the page again")  # fmt: skip
        except (WheelError, OSError) as error:
            return PageWheels(problem=f"the page's wheel of {name} cannot be made: {error}")
        if not wheel.filename.endswith("-py3-none-any.whl"):
            return PageWheels(problem=f"the page needs a pure-Python {name}, and the one installed here has compiled "
                                      f"code ({wheel.filename}): install it from its pure wheel")  # fmt: skip
        wheels.files[wheel.filename] = wheel.path
        wheels.integrity[wheel.filename] = "sha256-" + base64.b64encode(bytes.fromhex(wheel.sha256)).decode()
    return wheels


def manifest(wheels: PageWheels, cache: Path, local_runtime: bool, server_python: str | None) -> dict[str, Any]:
    """What console.js reads from wheels/manifest.json."""
    return {
        "pyodide": PYODIDE_VERSION,
        "python": PYODIDE_PYTHON,
        "server_python": server_python,
        "pyodide_url": "pyodide/" if local_runtime else PYODIDE_CDN,
        "pyodide_files": PYODIDE_FILES,
        "local_copy": str(pyodide_folder(cache)),
        "tweetnacl_url": TWEETNACL_FILE if local_runtime else TWEETNACL_CDN,
        "tweetnacl_integrity": TWEETNACL_DIGEST,
        "wheels": [{"name": name, "integrity": wheels.integrity[name]} for name in wheels.files],
        "problem": wheels.problem,
    }


@dataclass(frozen=True)
class ServedPage:
    """What a server adds to the documentation site for the page: URL path under the site -> file."""

    files: dict[str, Path]
    local_runtime: bool  #: Pyodide from the cache (else the page loads it from the CDN)
    problem: str | None  #: the page's wheels could not be made (the page says why)


def served_page(scratch: Path, cache: Path | None = None, server_python: str | None = None) -> ServedPage:
    """The page's wheels, its manifest (written into `scratch`) and the cache's Pyodide, for a server of the site;
    `server_python`: the Python minor of the serving environment, which the page compares with its own (None: a
    static site, served by whatever)."""
    cache = cache if cache is not None else runtime_cache()
    wheels = page_wheels()
    local = has_runtime(cache)
    scratch.mkdir(parents=True, exist_ok=True)
    written = scratch / "manifest.json"
    written.write_text(json.dumps(manifest(wheels, cache, local, server_python), indent=1) + "\n")
    files = {"try/wheels/manifest.json": written}
    files.update({f"try/wheels/{name}": path for name, path in wheels.files.items()})
    if local:
        files.update({f"try/pyodide/{name}": pyodide_folder(cache) / name for name in PYODIDE_FILES})
        files[f"try/{TWEETNACL_FILE}"] = tweetnacl_file(cache)
    return ServedPage(files, local, wheels.problem)


def assemble(output: Path, cache: Path | None = None) -> ServedPage:
    """The whole page as static files in `output` (a site's try/ folder), Pyodide copied in when the cache has it."""
    output.mkdir(parents=True, exist_ok=True)
    for name in PAGE_FILES:
        (output / name).write_bytes((docs_root() / "try" / name).read_bytes())
    with_files = served_page(output / "wheels", cache)
    for url, path in with_files.files.items():
        target = output / url.removeprefix("try/")
        if target != path:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return with_files


def python_minor() -> str:
    """This interpreter's Python as the page names versions: "3.13"."""
    major, minor, _ = platform.python_version_tuple()
    return f"{major}.{minor}"
