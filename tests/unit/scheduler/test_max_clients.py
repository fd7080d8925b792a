"""`max_clients`: the scheduler refuses a client beyond its limit at registration, and makes room when one leaves.

The setting is declared once (`SchedulerConfig.max_clients`, `core=True, combo=True`); these tests read it from
each source the declaration gives (flag, environment, TOML, `SchedulerClusterCombo` keyword) into the core. Checked
by hand: with the check in `Registration._register_client` removed, the refusal tests fail (the third client is
accepted); with `core=True` removed from the declaration, `test_every_source_reaches_the_core` fails.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from scaler.cluster.combo import SchedulerClusterCombo
from scaler.config.combo import sections_of
from scaler.config.loader import load_section
from scaler.config.sections import SchedulerConfig
from scaler.policy.registry import make_policy
from scaler.protocol import messages as m
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.process import core_settings_of
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, hello

ADDRESS = "tcp://127.0.0.1:8516"


def reply_to(sim: SimulatedCluster, name: str) -> m.HelloReply:
    peer = b"Client|" + name.encode()
    effects = sim.send(peer, hello(m.ClientInfo(name)))
    (reply,) = [
        e.message for e in effects if isinstance(e, Send) and e.peer == peer and isinstance(e.message, m.HelloReply)
    ]
    return reply


def test_a_client_beyond_the_limit_is_refused_naming_it_and_a_leaving_client_makes_room() -> None:
    sim = SimulatedCluster(CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON, max_clients=2))
    assert reply_to(sim, "a").accepted and reply_to(sim, "b").accepted
    refused = reply_to(sim, "c")
    assert not refused.accepted
    assert "at most 2 client(s)" in refused.reason and "--max-clients" in refused.reason
    assert b"Client|c" not in sim.core.clients and b"Client|c" not in sim.core.tasks.queue.shares
    assert reply_to(sim, "a").accepted  # a registered client saying hello again is no new client
    sim.send(b"Client|a", m.ClientDisconnect(shutdown_cluster=False))
    assert reply_to(sim, "c").accepted
    assert set(sim.core.clients) == {b"Client|b", b"Client|c"}


def test_no_limit_by_default() -> None:
    sim = SimulatedCluster(CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON))
    assert all(reply_to(sim, f"c{number}").accepted for number in range(20))


def core_max_clients(config: SchedulerConfig) -> int:
    policy = make_policy(config.policy_engine_type, config.policy_content)
    return core_settings_of(config, ADDRESS, ADDRESS, policy, instance_id=b"").max_clients


def test_every_source_reaches_the_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def scheduler(argv: list[str]) -> SchedulerConfig:
        return load_section(SchedulerConfig, argv, prog="scaler_scheduler", toml_sections=["scheduler"])

    assert core_max_clients(scheduler([ADDRESS])) == 0
    assert core_max_clients(scheduler([ADDRESS, "--max-clients", "2"])) == 2
    toml = tmp_path / "stack.toml"
    toml.write_text(f'[scheduler]\nbind_address = "{ADDRESS}"\nmax_clients = 3\n')
    assert core_max_clients(scheduler(["-c", str(toml)])) == 3
    monkeypatch.setenv("SCALER_SCHEDULER_MAX_CLIENTS", "4")
    assert core_max_clients(scheduler(["-c", str(toml)])) == 4
    assert core_max_clients(scheduler(["-c", str(toml), "--max-clients", "5"])) == 5
    combo = SchedulerConfig(bind_address=ADDRESS, **sections_of({"max_clients": 6})[SchedulerConfig])
    assert core_max_clients(combo) == 6
    assert inspect.signature(SchedulerClusterCombo).parameters["max_clients"].default == 0


def test_a_negative_limit_is_refused_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        load_section(SchedulerConfig, [ADDRESS, "--max-clients", "-1"], prog="scaler_scheduler", toml_sections=[])
    assert exit_info.value.code == 2
    assert 'bad value "-1" for --max-clients: expected an integer >= 0' in capsys.readouterr().err
