"""Pyodide and tweetnacl for the page "Try it in your browser", from npm into the local cache the page's servers take
them from (scaler.browser.served_page: `runtime_cache()`, the versions and the digest of every file), so that a site
served or built in a clone loads nothing from outside.

    python docs/try_page.py fetch     # `make browser-tools`: nothing when the cache has them

A fetched file whose digest is not the pinned one is an error (the pins are for another build): the cache is left as
it was.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from scaler.browser.served_page import (
    PYODIDE_FILES,
    PYODIDE_VERSION,
    TWEETNACL_DIGEST,
    TWEETNACL_FILE,
    TWEETNACL_VERSION,
    has_runtime,
    pyodide_folder,
    runtime_cache,
    tweetnacl_file,
)


def fetch(cache: Path) -> None:
    """The npm packages `pyodide` and `tweetnacl` at the pinned versions, checked, into `cache`."""
    if has_runtime(cache):
        return
    cache.mkdir(parents=True, exist_ok=True)
    for package, version, target, pins in (
        ("pyodide", PYODIDE_VERSION, pyodide_folder(cache), PYODIDE_FILES),
        ("tweetnacl", TWEETNACL_VERSION, tweetnacl_file(cache).parent, {TWEETNACL_FILE: TWEETNACL_DIGEST}),
    ):
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            subprocess.run(["npm", "pack", f"{package}@{version}", "--silent"], cwd=scratch, check=True,
                           stdout=subprocess.DEVNULL, timeout=600)  # fmt: skip
            with tarfile.open(Path(scratch) / f"{package}-{version}.tgz") as archive:
                archive.extractall(scratch, filter="data")
            unpacked = Path(scratch) / "package"
            for name, pin in pins.items():
                digest = "sha384-" + base64.b64encode(hashlib.sha384((unpacked / name).read_bytes()).digest()).decode()
                if digest != pin:
                    raise SystemExit(f"try_page: {package}@{version}'s {name} has the digest {digest}, not the pinned "
                                     f"{pin} (scaler/browser/served_page.py)")  # fmt: skip
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(unpacked, target)


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        raise SystemExit("usage: python docs/try_page.py fetch")
    fetch(runtime_cache())
    print(f"Pyodide {PYODIDE_VERSION} and tweetnacl {TWEETNACL_VERSION} are in {runtime_cache()}")
