"""The documentation tier's readers: this tree's wheel, built once per session, and one virtual environment per pip
flavour, made the first time a page of that flavour runs and reused by the pages after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.readers import FLAVOURS, Reader, make_reader, make_wheel_folder


class Readers(dict[str, Reader]):
    def __init__(self, root: Path) -> None:
        super().__init__()
        self._root = root
        self._wheels: Path | None = None

    def __missing__(self, flavour: str) -> Reader:
        assert flavour in FLAVOURS, flavour
        if self._wheels is None:
            self._wheels = make_wheel_folder(self._root / "build")
        reader = self[flavour] = make_reader(flavour, self._root / flavour, self._wheels)
        return reader


@pytest.fixture(scope="session")
def reader_of(tmp_path_factory: pytest.TempPathFactory) -> Readers:
    return Readers(tmp_path_factory.mktemp("doc-readers"))
