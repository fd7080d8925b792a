"""The scheduler's CURVE bookkeeping: roles decide hellos, an identity answers to the key that registered it,
and revoked keys are named once a second (the shell drops them)."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.scheduler.peer_keys import TAKEN, PeerKeys


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
