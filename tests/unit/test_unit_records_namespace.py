"""The native backend's folder of unit records (scaler/worker_manager/baremetal_native/unit_records.py) is one per
scheduler, and a scheduler is its address in a network namespace.

Found walking docs/guide/clusters.md's `local` stack in a network namespace of its own while another stack of the
same file ran in the machine's: both managers ('local', tcp://127.0.0.1:8516) kept their records in one folder of
the shared /tmp, took each other's units for their own, and stopped them ("N units for a target of 0:
terminating ..."): after a scheduler restart the units of one stack were started and stopped every second.
Checked by switching the fix off: without the namespace in the folder's name, these tests fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.worker_manager.baremetal_native import unit_records
from scaler.worker_manager.baremetal_native.unit_records import state_directory_for


def test_the_same_address_and_manager_id_in_another_network_namespace_is_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unit_records, "network_namespace", lambda: "net:[4026531840]")
    here = state_directory_for("local", "tcp://127.0.0.1:8516", tmp_path)
    assert here == state_directory_for("local", "tcp://127.0.0.1:8516", tmp_path), "a restarted manager adopts"
    monkeypatch.setattr(unit_records, "network_namespace", lambda: "net:[4026532417]")
    there = state_directory_for("local", "tcp://127.0.0.1:8516", tmp_path)
    assert there != here and there.parent == here.parent and there.name.startswith("local-")


def test_where_the_namespace_cannot_be_told_the_folder_is_the_address_and_id_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unit_records, "network_namespace", lambda: "")
    folder = state_directory_for("local", "tcp://127.0.0.1:8516", tmp_path)
    assert folder == state_directory_for("local", "tcp://127.0.0.1:8516", tmp_path)
    assert folder != state_directory_for("local", "tcp://127.0.0.1:8517", tmp_path)
    assert folder != state_directory_for("other", "tcp://127.0.0.1:8516", tmp_path)


def test_this_process_names_its_namespace_on_linux() -> None:
    if not Path("/proc/self/ns/net").exists():
        pytest.skip("no /proc/self/ns on this system")
    assert unit_records.network_namespace().startswith("net:[")
