"""Files a client uploaded (`Client.upload_file`: a `.py` module, or a `.zip`, `.egg` or `.whl` of packages) made
importable in the processors that run its tasks, by name, as if installed there.

The client's task encoder wraps each function it stores, once uploads exist, in `WithUploads`: the function and the
uploaded files' contents travel together (in the function's stored object, so once per function, not per task). A
processor unpickling it first installs the files, then unpickles the function (which may name the uploaded modules),
so both `mymodule.f` given to a task and `import mymodule` inside one work. Installing is an import hook over the
files' bytes (`sys.meta_path`, no file written), done once per content in a processor; a newer upload of the same
name replaces the older (the module is imported again at its next import). Pure Python only: a compiled extension in
an archive is not importable this way.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import sys
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import cloudpickle


@dataclass(frozen=True)
class Upload:
    """One uploaded file: its name (`mymodule.py`, `package.zip`) and its bytes."""

    filename: str
    content: bytes

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    def sources(self) -> dict[str, tuple[str, bool]]:
        """Module name -> (source, is a package), for every module the file holds."""
        if self.filename.endswith(".py"):
            return {self.filename[:-3]: (self.content.decode("utf-8"), False)}
        found: dict[str, tuple[str, bool]] = {}
        with zipfile.ZipFile(io.BytesIO(self.content)) as archive:
            for member in archive.namelist():
                if not member.endswith(".py"):
                    continue
                parts = member[:-3].split("/")
                is_package = parts[-1] == "__init__"
                name = ".".join(parts[:-1] if is_package else parts)
                if name and all(part.isidentifier() for part in name.split(".")):
                    found[name] = (archive.read(member).decode("utf-8"), is_package)
        return found


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the modules of the uploads installed in this process from their sources."""

    def __init__(self) -> None:
        self.sources: dict[str, tuple[str, bool, str]] = {}  #: name -> (source, is a package, file name)
        self.installed: set[str] = set()  #: digests of the uploads installed

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        found = self.sources.get(fullname)
        if found is None:
            return None
        spec = importlib.util.spec_from_loader(fullname, self, origin=f"upload:{found[2]}", is_package=found[1])
        if spec is not None and found[1]:
            spec.submodule_search_locations = []
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        source, _is_package, filename = self.sources[module.__name__]
        exec(compile(source, f"<upload {filename}: {module.__name__}>", "exec"), module.__dict__)


_finder = _Finder()
_lock = threading.Lock()


def install(uploads: Sequence[Upload]) -> None:
    """Make the uploads' modules importable in this process (each content once; a module of a newer upload is
    imported again from it)."""
    with _lock:
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
        for upload in uploads:
            digest = upload.digest
            if digest in _finder.installed:
                continue
            _finder.installed.add(digest)
            for name, (source, is_package) in upload.sources().items():
                previous = _finder.sources.get(name)
                _finder.sources[name] = (source, is_package, upload.filename)
                if previous is not None and previous[0] != source:
                    sys.modules.pop(name, None)


def check(upload: Upload) -> list[str]:
    """The top-level names the upload provides; SyntaxError for a module that does not compile (as the upload would
    fail where it is imported)."""
    sources = upload.sources()
    if not sources:
        raise ValueError(f"upload_file: {upload.filename} holds no Python module")
    for name, (source, _is_package) in sources.items():
        compile(source, f"{upload.filename}: {name}", "exec")
    return sorted({name.split(".")[0] for name in sources})


class WithUploads:
    """A task's function with the client's uploads: calling it calls the function; unpickling it installs the uploads
    first (see the module docstring)."""

    def __init__(self, function: Any, uploads: tuple[Upload, ...]) -> None:
        self.function = function
        self.uploads = uploads
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.uploads, cloudpickle.dumps(self.function)))


def _rebuild(uploads: tuple[Upload, ...], function: bytes) -> Any:
    install(uploads)
    return cloudpickle.loads(function)
