"""#34, a new user's first day without a clone: the example files ship with the package (`scaler --example`),
`python -m scaler` is `scaler`, every command completes its flags in the shell, and the client needs neither
fork nor curses.

Checked by switching the mechanisms off: without `config/examples/*.toml` in the package data the wheel test
fails (no example in the fresh install); with `offer_completion` returning at once every completion test fails
(no completions written); with `import curses` added to `scaler/client/client.py` the fork-and-curses test
fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.config.completion import command_names
from scaler.config.example_files import EXAMPLES, shipped_file_names
from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import BIN_DIR, ProcessWatch, free_addresses, probe_scheduler, running_cluster
from tests.integration.fresh_install import ROOT, fresh_environment, run_wheel

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_first_day")]

#: The names the issue asks `scaler --example` for, in its order; `secure_local` is the tenth file of config/.
ISSUE_NAMES = ("local", "fixed", "tiers", "cost_tiers", "aws_ecs", "aws_ec2", "aws_batch", "symphony")


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a new environment with this tree's wheel installed and no clone on its path."""
    return fresh_environment(tmp_path_factory.mktemp("fresh-install"), run_wheel(tmp_path_factory))


def command(*argv: str, python: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    program = [str(python), "-m", "scaler"] if python is not None else [str(BIN_DIR / "scaler")]
    return subprocess.run(
        [*program, *argv], capture_output=True, text=True, timeout=60, cwd=cwd, stdin=subprocess.DEVNULL
    )


# ---------------------------------------------------------------- the example files


def test_every_example_file_has_a_name_and_config_is_the_package_folder() -> None:
    names = [example.name for example in EXAMPLES]
    assert set(ISSUE_NAMES) <= set(names) and len(names) == len(set(names))
    assert shipped_file_names() == sorted(example.file_name for example in EXAMPLES)
    config = ROOT / "config"
    assert config.is_symlink() and config.resolve() == ROOT / "scaler" / "config" / "examples"


def test_scaler_example_lists_the_examples_and_prints_each_as_it_ships() -> None:
    listing = command("--example")
    assert listing.returncode == 0, listing.stderr
    for example in EXAMPLES:
        assert f"  {example.name} " in listing.stdout and example.file_name in listing.stdout
        printed = command("--example", example.name)
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout == (ROOT / "config" / example.file_name).read_text()
    unknown = command("--example", "tier")
    assert unknown.returncode == 2 and 'did you mean "tiers"?' in unknown.stderr
    both = command("--example", "local", "stack.toml")
    assert both.returncode == 2 and "either FILE or --example" in both.stderr


@pytest.mark.timeout(300)
def test_a_fresh_install_prints_an_example_and_python_m_scaler_runs_it(
    fresh_python: Path, tmp_path: Path, processes: ProcessWatch
) -> None:
    """`pip install`, `python -m scaler --example local > local.toml`, `python -m scaler local.toml`, a task:
    from the wheel, in a folder that is not the clone."""
    for example in EXAMPLES:
        printed = command("--example", example.name, python=fresh_python, cwd=tmp_path)
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout == (ROOT / "config" / example.file_name).read_text()
    assert "scaler " in command("--version", python=fresh_python, cwd=tmp_path).stdout
    addresses = free_addresses()
    text = command("--example", "local", python=fresh_python, cwd=tmp_path).stdout
    text = text.replace("tcp://127.0.0.1:8516", addresses.scheduler).replace(
        "tcp://127.0.0.1:8517", addresses.object_storage
    )
    assert 'gui_address = "127.0.0.1:50001"' in text  # the local stack starts its dashboard
    text = text.replace("tcp://127.0.0.1:8518", addresses.monitor).replace(
        "127.0.0.1:50001", f"127.0.0.1:{free_tcp_port_block(1)}"
    )
    (tmp_path / "local.toml").write_text(text)
    log = tmp_path / "stack.log"
    with log.open("wb") as output:
        stack = processes.add(
            subprocess.Popen(
                [str(fresh_python), "-m", "scaler", "local.toml"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                stdout=output, stderr=subprocess.STDOUT,
            )
        )  # fmt: skip
    try:
        probe_scheduler(addresses.scheduler)
        with Client(address=addresses.scheduler, timeout_seconds=30) as client:
            assert client.submit(pow, 2, 10).result(timeout=60) == 1024
    except Exception as error:  # the stack's own words say why, where a bare "connection closed" does not
        raise AssertionError(f"{error!r}; the stack said:\n{log.read_text(errors='replace')[-4000:]}") from error
    processes.remember()
    stack.send_signal(signal.SIGTERM)
    assert stack.wait(timeout=60) == 0


# ---------------------------------------------------------------- shell completion

#: For every console script: a command line being completed, and one completion it must offer.
COMPLETIONS = {
    "scaler": ("scaler --exa", "--example"),
    "scaler_scheduler": ("scaler_scheduler --worker-t", "--worker-timeout-seconds"),
    "scaler_object_storage_server": ("scaler_object_storage_server --ident", "--identity"),
    "scaler_cluster": ("scaler_cluster --num", "--num-of-workers"),
    "scaler_worker": ("scaler_worker --task-t", "--task-timeout-seconds"),
    "scaler_worker_manager": ("scaler_worker_manager aws_hpc --job-q", "--job-queue"),
    "scaler_worker_adapter_native": ("scaler_worker_adapter_native --mo", "--mode"),
    "scaler_worker_adapter_symphony": ("scaler_worker_adapter_symphony --service", "--service-name"),
    "scaler_top": ("scaler_top --time", "--timeout"),
    "scaler_gui": ("scaler_gui --gui", "--gui-address"),
    "scaler_ui": ("scaler_ui --web-p", "--web-port"),
    "scaler_keygen": ("scaler_keygen --vers", "--version"),
    "scaler_fake_cloud": ("scaler_fake_cloud --boot", "--boot-seconds"),
    "scaler_fake_kubernetes": ("scaler_fake_kubernetes --node-c", "--node-cpu"),
    "scaler_simulate_policy": ("scaler_simulate_policy --pol", "--policy"),
    "scaler_link": ("scaler_link --rtt", "--rtt-ms"),
}


def completions(line: str, tmp_path: Path) -> list[str]:
    """What the command of `line` offers for its last word, asked as a completing shell asks (argcomplete's
    protocol: the line and the cursor in the environment, the answer in a file)."""
    answer = tmp_path / "completions"
    answer.unlink(missing_ok=True)
    environment = {
        **os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_IFS": "\n", "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }  # fmt: skip
    done = subprocess.run(
        [str(BIN_DIR / line.split()[0])], env=environment, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, f"{line!r}: exit {done.returncode}\n{done.stderr}"
    return answer.read_text().split() if answer.exists() else []


def test_every_command_is_in_the_completion_table() -> None:
    assert sorted(COMPLETIONS) == command_names()


@pytest.mark.parametrize("name", sorted(COMPLETIONS))
def test_every_command_completes_its_flags(name: str, tmp_path: Path) -> None:
    line, expected = COMPLETIONS[name]
    assert expected in completions(line, tmp_path)


def test_the_worker_manager_completes_its_types_then_the_settings_of_the_type(tmp_path: Path) -> None:
    assert {"baremetal_native", "aws_raw_ecs", "orb_aws_ec2", "aws_hpc", "symphony"} <= set(
        completions("scaler_worker_manager ", tmp_path)
    )
    assert completions("scaler_worker_manager -c stack.toml baremetal_native --mo", tmp_path) == ["--mode"]
    assert "--job-queue" not in completions("scaler_worker_manager baremetal_native --", tmp_path)


def test_the_documented_line_makes_bash_complete_every_command(tmp_path: Path) -> None:
    """`eval "$(scaler --completion bash)"`, then bash's own completion call, as at a prompt."""
    script = (
        'eval "$(scaler --completion bash)" || exit 3\n'
        'for name in "$@"; do complete -p "$name" >/dev/null || { echo "not registered: $name"; exit 4; }; done\n'
        'COMP_LINE="scaler_scheduler --worker-t"; COMP_POINT=${#COMP_LINE}\n'
        "COMP_WORDS=(scaler_scheduler --worker-t); COMP_CWORD=1\n"
        '_python_argcomplete scaler_scheduler; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    environment = {**os.environ, "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-c", script, "bash", *command_names()], env=environment, capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == ["--worker-timeout-seconds"]


# ---------------------------------------------------------------- the client without fork and curses

#: Run in a fresh interpreter: take away what Windows lacks (fork, curses, the POSIX-only modules a client could
#: reach for), then use the client.
WITHOUT_FORK_AND_CURSES = """
import os
import sys

for name in ("fork", "forkpty", "register_at_fork"):
    if hasattr(os, name):
        delattr(os, name)
sys.modules["_curses"] = None  # `import _curses` (and so `import curses`) raises ImportError, as on Windows
for name in ("fcntl", "resource", "termios", "pwd", "grp"):  # the other POSIX-only modules Windows lacks
    sys.modules[name] = None
try:
    import curses
except ImportError:
    pass
else:
    raise SystemExit("curses is still importable")

from scaler import Client

with Client(address=sys.argv[1]) as client:
    print(client.submit(pow, 2, 10).result())
    print(client.map(abs, [-1, -2, -3]))
print(sorted(name for name, module in sys.modules.items() if "curses" in name and module is not None))
"""


@pytest.fixture(scope="module")
def one_worker_cluster() -> Iterator[SchedulerClusterCombo]:
    with running_cluster(1) as cluster:
        yield cluster


def test_the_client_needs_neither_fork_nor_curses(one_worker_cluster: SchedulerClusterCombo) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_FORK_AND_CURSES, one_worker_cluster.get_address()],
        capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["1024", "[1, 2, 3]", "[]"]
