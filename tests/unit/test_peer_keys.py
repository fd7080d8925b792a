"""The scheduler's CURVE bookkeeping: roles decide hellos, an identity answers to the key that registered it,
and revoked keys are named once a second (the shell drops them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.scheduler.peer_keys import PROCESSOR_KEY, TAKEN, PeerKeys, settle
from scaler.security.quotas import KeySharing


class Folder:
    def __init__(self, roles: dict[bytes, frozenset[str]]) -> None:
        self.roles = roles

    def roles_of(self, public_key: bytes) -> frozenset[str]:
        return self.roles.get(public_key, frozenset())


ALICE, POOL = PeerID(b"Client|alice"), PeerID(b"Worker|pool")


def hello(role: m.Role) -> m.Hello:
    info = m.ClientInfo("c") if role is m.Role.CLIENT else m.WorkerInfo(())
    return m.Hello(m.PROTOCOL_VERSION, "3.11.7", 1, "host", info)


def test_a_key_registers_only_the_roles_its_folder_gives() -> None:
    keys = PeerKeys(Folder({b"k-alice": frozenset({"client"}), b"k-pool": frozenset({"worker"})}), "3.11.7")
    refused = keys.refusal(ALICE, b"k-alice", hello(m.Role.WORKER))
    assert refused is not None and isinstance(refused.answer, m.HelloReply) and not refused.answer.accepted
    assert refused.answer.reason.startswith("authentication:") and "workers/" in refused.answer.reason
    assert keys.refusal(ALICE, b"k-alice", hello(m.Role.CLIENT)) is None
    assert keys.refusal(POOL, b"k-pool", hello(m.Role.WORKER)) is None
    assert keys.refusal(PeerID(b"nested"), b"k-pool", hello(m.Role.CLIENT)) is None  # a task's own client
    unauthenticated = keys.refusal(ALICE, None, m.Heartbeat())
    assert unauthenticated is not None and "not authenticated" in unauthenticated.answer.reason  # type: ignore[union-attr]


def test_another_key_on_a_registered_identity_is_refused_and_the_owner_dropped_once() -> None:
    keys = PeerKeys(Folder({b"k-alice": frozenset({"client"}), b"k-bob": frozenset({"client"})}), "3.11.7")
    assert keys.refusal(ALICE, b"k-alice", hello(m.Role.CLIENT)) is None
    assert keys.refusal(ALICE, b"k-alice", m.Heartbeat()) is None
    taken = keys.refusal(ALICE, b"k-bob", m.TaskCancel(()))
    assert taken is not None and taken.owner_gone and taken.answer == m.ProtocolError(TAKEN)
    # alice is dropped; bob's later hello on that identity registers a new client of his own
    assert keys.refusal(ALICE, b"k-bob", hello(m.Role.CLIENT)) is None
    again = keys.refusal(ALICE, b"k-alice", m.Heartbeat())
    assert again is not None and again.owner_gone


def test_revoked_keys_are_named_and_forgotten_peers_are_not() -> None:
    folder = Folder({b"k-alice": frozenset({"client"}), b"k-pool": frozenset({"worker"})})
    keys = PeerKeys(folder, "3.11.7")
    keys.refusal(ALICE, b"k-alice", hello(m.Role.CLIENT))
    keys.refusal(POOL, b"k-pool", hello(m.Role.WORKER))
    assert keys.revoked([ALICE, POOL]) == []
    del folder.roles[b"k-alice"], folder.roles[b"k-pool"]
    assert keys.revoked([ALICE]) == [ALICE], "a peer the core already dropped is not named again"
    assert keys.revoked([ALICE, POOL]) == []
    refused = keys.refusal(ALICE, b"k-alice", hello(m.Role.CLIENT))
    assert refused is not None and "revoked" in refused.answer.reason  # type: ignore[union-attr]


# ---------------------------------------------------------------- per-key shares and quotas (sharing.toml)


class SharingFolder(Folder):
    def __init__(self, roles: dict[bytes, frozenset[str]], sharing: dict[bytes, KeySharing]) -> None:
        super().__init__(roles)
        self.sharing = sharing

    def sharing_of(self, public_key: bytes) -> KeySharing | None:
        return self.sharing.get(public_key)


def client_hello(share: float = 1.0, quota: int = 0) -> m.Hello:
    return m.Hello(m.PROTOCOL_VERSION, "3.11.7", 1, "host", m.ClientInfo("c", share, quota))


def test_a_clients_key_sets_its_share_whatever_it_asks_and_caps_its_quota() -> None:
    """Checked by making PeerKeys.settled return the message unchanged: the asked share 50 then stays."""
    folder = SharingFolder(
        {b"k-alice": frozenset({"client"}), b"k-bob": frozenset({"client"})},
        {b"k-alice": KeySharing(share=3.0, max_running_tasks=10)},
    )
    keys = PeerKeys(folder, "3.11.7")
    settled = keys.settled(b"k-alice", client_hello(share=50.0, quota=0))
    assert isinstance(settled, m.Hello) and settled.info == m.ClientInfo("c", 3.0, 10)
    lowered = keys.settled(b"k-alice", client_hello(share=1.0, quota=4))
    assert isinstance(lowered, m.Hello) and lowered.info == m.ClientInfo("c", 3.0, 4)  # a client may ask for less
    unlisted = client_hello(share=2.0)
    bobs = keys.settled(b"k-bob", unlisted)
    assert isinstance(bobs, m.Hello) and bobs.info == unlisted.info and keys.settled(None, unlisted) is unlisted
    assert isinstance(bobs.info, m.ClientInfo) and bobs.info.owner_key == "k-bob"  # the key owns its jobs
    assert settle(m.ClientInfo("c", 2.0, 7), KeySharing()) == m.ClientInfo("c", 2.0, 7)


def test_a_keys_workers_worth_quota_caps_what_its_client_asks() -> None:
    """Checked by leaving max_workers out of `settle`: the client's own 9 (or none) then stays."""
    capped = KeySharing(max_workers=4)
    assert settle(m.ClientInfo("c", 1.0, 0, 0), capped).max_workers == 4
    assert settle(m.ClientInfo("c", 1.0, 0, 9), capped).max_workers == 4
    assert settle(m.ClientInfo("c", 1.0, 0, 2), capped).max_workers == 2  # a client may ask for less
    assert settle(m.ClientInfo("c"), KeySharing(max_cost_per_hour=2.5)).max_cost_per_hour == 2.5  # its budget part
    assert settle(m.ClientInfo("c"), KeySharing(max_job_result_bytes=5 << 30)).max_job_result_bytes == 5 << 30


def make_keys(folder: Path, *names: str) -> None:
    import zmq.auth

    for name in names:
        zmq.auth.create_certificates(str(folder), name)
        (folder / f"{name}.key_secret").unlink()


def test_the_sharing_file_is_read_with_the_folder_and_again_when_it_changes(tmp_path: Path) -> None:
    from scaler.security.authorized_folder import AuthorizedFolder
    from scaler.security.key_files import read_public_key

    make_keys(tmp_path, "alice", "bob")
    alice = read_public_key(str(tmp_path / "alice.key"))
    folder = AuthorizedFolder(str(tmp_path), server=b"s" * 40)
    assert folder.roles_of(alice) and folder.sharing_of(alice) is None
    (tmp_path / "sharing.toml").write_text(
        "[alice]\nshare = 3\nmax_running_tasks = 20\nmax_workers = 4\nmax_cost_per_hour = 2.5\n"
        "max_job_result_bytes = 10_000_000_000\n"
    )
    folder.callback("", alice)  # a handshake always looks at the folder again
    assert folder.sharing_of(alice) == KeySharing(3.0, 20, 4, 2.5, 10_000_000_000)


def test_a_broken_edit_of_the_sharing_file_is_said_once_not_at_every_look(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/guide/sharing.md: "a broken edit later is logged and the previous settings stay in force". Walking it
    (a share of -1 written into a running stack's sharing.toml), the scheduler and the object storage server each
    logged the error at every look at the folder, several times a second for as long as the file stayed broken.
    Checked by switching it off (no memory of the broken folder): the error is counted five times."""
    import logging
    import os

    from scaler.security.authorized_folder import AuthorizedFolder
    from scaler.security.key_files import read_public_key

    make_keys(tmp_path, "alice")
    alice = read_public_key(str(tmp_path / "alice.key"))
    sharing = tmp_path / "sharing.toml"

    def edit(text: str, stamp: float) -> None:
        sharing.write_text(text)
        os.utime(sharing, (stamp, stamp))  # each edit a time of its own, however fast the test writes

    edit("[alice]\nshare = 3\n", 1_000_000.0)
    folder = AuthorizedFolder(str(tmp_path), server=b"s" * 40)
    assert folder.callback("", alice) and folder.sharing_of(alice) == KeySharing(3.0)
    edit("[alice]\nshare = -1\n", 1_000_001.0)
    with caplog.at_level(logging.ERROR, logger="scaler.security.authorized_folder"):
        for _ in range(5):  # handshakes: each looks at the folder
            assert folder.callback("", alice), "the previous keys stay in force"
        said = [record.getMessage() for record in caplog.records]
        assert len(said) == 1 and "share must be a positive number" in said[0], said
        assert folder.sharing_of(alice) == KeySharing(3.0), "the previous settings stay in force"
        edit("[alice]\nshare = 2\n", 1_000_002.0)
        assert folder.callback("", alice) and folder.sharing_of(alice) == KeySharing(2.0)
        edit("[alice]\nshare = 0\n", 1_000_003.0)  # broken again: said again
        folder.callback("", alice)
        assert len(caplog.records) == 2


def test_a_folder_that_could_not_be_read_for_a_while_is_read_again_and_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """While the folder cannot be read every peer is refused, said once; once it can be read again (unchanged), its
    keys are back. Checked by switching it off: without forgetting the folder's stamp, alice stays refused."""
    import logging

    from scaler.security import authorized_folder
    from scaler.security.key_files import read_public_key

    make_keys(tmp_path, "alice")
    alice = read_public_key(str(tmp_path / "alice.key"))
    folder = authorized_folder.AuthorizedFolder(str(tmp_path), server=b"s" * 40)
    assert folder.callback("", alice)
    readable = authorized_folder._folder_stamp

    def unreadable(path: str) -> object:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(authorized_folder, "_folder_stamp", unreadable)
    with caplog.at_level(logging.ERROR, logger="scaler.security.authorized_folder"):
        assert not folder.callback("", alice) and not folder.callback("", alice)
    assert len([r for r in caplog.records if "cannot read the authorised keys" in r.getMessage()]) == 1
    monkeypatch.setattr(authorized_folder, "_folder_stamp", readable)
    assert folder.callback("", alice), "the folder is readable again: its keys are back"


@pytest.mark.parametrize(
    "text, words",
    [
        ("[carol]\nshare = 2\n", "names no key file"),
        ("[alice]\nshare = 0\n", "share must be a positive number"),
        ("[alice]\nmax_running_tasks = 0\n", "max_running_tasks must be a positive integer"),
        ("[alice]\nmax_workers = 0\n", "max_workers must be a positive integer"),
        ("[alice]\nmax_workers = 2.5\n", "max_workers must be a positive integer"),
        ("[alice]\nmax_cost_per_hour = -1\n", "max_cost_per_hour must be a positive number"),
        ("[alice]\nmax_cost_per_hour = 0\n", "max_cost_per_hour must be a positive number"),
        ("[alice]\nmax_job_result_bytes = 0\n", "max_job_result_bytes must be a positive integer"),
        ("[alice]\nweight = 2\n", "may hold only share, max_running_tasks, max_workers, max_cost_per_hour, max_job"),
        ("[alice\n", "cannot read it"),
    ],
)
def test_a_wrong_sharing_file_is_refused_naming_the_entry(tmp_path: Path, text: str, words: str) -> None:
    from scaler.security.authorized_folder import authorized_sharing
    from scaler.security.key_files import KeyFileError

    make_keys(tmp_path, "alice")
    (tmp_path / "sharing.toml").write_text(text)
    with pytest.raises(KeyFileError, match=words):
        authorized_sharing(str(tmp_path))


def test_a_processor_link_must_come_with_the_key_its_worker_registered_with() -> None:
    """A processor's link speaks for its worker (docs/protocol.md section 3.7). Checked off by hand: without the
    comparison of keys in `PeerKeys.refusal`, the other pool's processor hello is let through."""
    keys = PeerKeys(Folder({b"k-pool": frozenset({"worker"}), b"k-other": frozenset({"worker"}),
                            b"k-alice": frozenset({"client"})}), "3.11.7")  # fmt: skip
    assert keys.refusal(POOL, b"k-pool", hello(m.Role.WORKER)) is None

    def processor_hello() -> m.Hello:
        return m.Hello(m.PROTOCOL_VERSION, "3.11.7", 2, "host", m.ProcessorInfo(b"p1", POOL))

    link = PeerID(POOL + b"/p1")
    assert keys.refusal(link, b"k-pool", processor_hello()) is None
    other = keys.refusal(PeerID(b"Worker|other/p1"), b"k-other", processor_hello())
    assert other is not None and isinstance(other.answer, m.HelloReply) and other.answer.reason == PROCESSOR_KEY
    client = keys.refusal(PeerID(b"Client|x/p1"), b"k-alice", processor_hello())
    assert client is not None and isinstance(client.answer, m.HelloReply) and "workers/" in client.answer.reason


def test_a_workers_hello_carries_its_key_for_the_clients_inside_its_tasks() -> None:
    """core/actors.py rule 5 compares it with a task client's key. Checked to fail with `settled` leaving a worker's
    hello unchanged."""
    keys = PeerKeys(Folder({b"k-pool": frozenset({"worker"})}), "3.11.7")
    settled = keys.settled(b"k-pool", hello(m.Role.WORKER))
    assert isinstance(settled, m.Hello) and isinstance(settled.info, m.WorkerInfo)
    assert settled.info.owner_key == "k-pool"
    assert keys.settled(None, hello(m.Role.WORKER)).info == m.WorkerInfo(())  # without CURVE: no key
