"""The suite's cache of what pytest rewrites (tests/bytecode.py): written once, where pytest's import hook reads it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _pytest.assertion import rewrite

from tests.bytecode import write_rewritten_plugins


@pytest.mark.timeout(60)
def test_the_modules_of_a_plugin_marked_for_rewriting_are_cached_as_pytest_reads_them(
    pytestconfig: pytest.Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package and a module marked for rewriting (as pytest marks a plugin's distribution) get pytest's cache of
    their rewritten code, read back by pytest's reader. Fails with `write_rewritten_plugins` writing nothing."""
    package = tmp_path / "scaler_bytecode_probe_package"
    (package / "inner").mkdir(parents=True)
    sources = [package / "__init__.py", package / "inner" / "__init__.py", package / "inner" / "checks.py"]
    sources.append(tmp_path / "scaler_bytecode_probe_module.py")
    for source in sources:
        source.write_text("def check(value: int) -> None:\n    assert value > 0, value\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    hook = pytestconfig.pluginmanager.rewrite_hook
    monkeypatch.setattr(hook, "_must_rewrite", {*hook._must_rewrite, package.name, "scaler_bytecode_probe_module"})
    assert write_rewritten_plugins(pytestconfig) >= len(sources)
    for source in sources:
        pyc = rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)
        assert rewrite._read_pyc(source, pyc) is not None, source
    assert write_rewritten_plugins(pytestconfig) == 0, "what is cached already is not written again"
    assert "scaler_bytecode_probe_module" not in sys.modules
