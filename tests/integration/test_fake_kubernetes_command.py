"""`scaler_fake_kubernetes` as users run it, with `kubectl` (on this machine: the google-cloud-cli package's): it writes
a kubeconfig kubectl takes, `kubectl apply` creates pods it runs, `kubectl get pods -w` follows them, `kubectl logs`
reads them, and Ctrl-C stops it and every pod's process."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import BIN_DIR, DEADLINE_SECONDS, wait_for
from tests.integration.kubernetes_harness import KUBECTL, needs_kubectl

pytest.importorskip("cryptography", reason="the fake-kubernetes extra is not installed")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.kubernetes,
    pytest.mark.timeout(120),
    needs_kubectl,
]

MANIFEST = """
apiVersion: v1
kind: Pod
metadata:
  name: hello
  labels: {app: hello}
spec:
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo hello from $HOSTNAME; exec sleep 300"]
"""


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )


def test_kubectl_against_the_command_and_ctrl_c_stops_every_pod(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    command = subprocess.Popen(
        [str(BIN_DIR / "scaler_fake_kubernetes"), "--port", "0", "--kubeconfig", str(kubeconfig), "--node-cpu", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    watcher: subprocess.Popen[str] | None = None
    try:
        assert command.stdout is not None
        first = command.stdout.readline()
        assert first.strip() == f"KUBECONFIG={kubeconfig}", first
        applied = kubectl(kubeconfig, "apply", "-f", "-", stdin=MANIFEST)
        assert applied.returncode == 0 and "pod/hello created" in applied.stdout, applied.stderr
        assert KUBECTL is not None
        watcher = subprocess.Popen(
            [KUBECTL, "--kubeconfig", str(kubeconfig), "get", "pods", "-w", "--no-headers"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert watcher.stdout is not None
        deadline = time.monotonic() + DEADLINE_SECONDS
        line = ""
        while "Running" not in line and time.monotonic() < deadline:
            line = watcher.stdout.readline()
        assert "Running" in line and line.startswith("hello"), line
        logs = wait_for(lambda: kubectl(kubeconfig, "logs", "hello").stdout, "the pod's output")
        assert logs.strip() == "hello from hello"
        pids = [
            process.pid for process in psutil.process_iter(["cmdline"]) if process.info["cmdline"] == ["sleep", "300"]
        ]
        assert pids, "the pod's process"
        command.send_signal(signal.SIGINT)
        assert command.wait(DEADLINE_SECONDS) == 0
        wait_for(
            lambda: (
                not [
                    pid
                    for pid in pids
                    if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                ]
            ),
            "the pod's process to be gone",
        )
    finally:
        if watcher is not None:
            watcher.kill()
            watcher.wait()
            assert watcher.stdout is not None
            watcher.stdout.close()
        if command.poll() is None:
            command.kill()
            command.wait()
        assert command.stdout is not None
        command.stdout.close()
