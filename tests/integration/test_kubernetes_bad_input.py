"""Bad input to `scaler_worker_manager kubernetes`, each refused at the start with exit code 2 and one line naming the
setting and the API's own reason, never a traceback: a kubeconfig that does not exist or names no such context, an
API server that does not answer, a namespace that does not exist, RBAC that forbids the pods, an image name or a
resource quantity that is not one."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import BIN_DIR, COLD_START_SECONDS
from tests.integration.kubernetes_harness import rehearsal_fixture  # noqa: F401 - the fixture is used by name

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes, pytest.mark.timeout(180)]


def refusal(*args: str) -> str:
    """The one line the manager exits 2 with (no scheduler is needed: it never gets that far)."""
    done = subprocess.run(
        [str(BIN_DIR / "scaler_worker_manager"), "kubernetes", "tcp://127.0.0.1:1", "-wmi", "bad-input", *args],
        capture_output=True,
        text=True,
        timeout=COLD_START_SECONDS,
    )
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == 2, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1, output
    return errors[0]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def base(rehearsal: Any) -> list[str]:
    return ["--k8s-kubeconfig", str(rehearsal.kubeconfig_path), "--k8s-image", "scaler-worker:latest"]


def test_a_kubeconfig_that_does_not_exist(tmp_path: Path) -> None:
    line = refusal("--k8s-kubeconfig", str(tmp_path / "nothing"), "--k8s-image", "scaler-worker")
    assert f"--k8s-kubeconfig {tmp_path / 'nothing'}: no such file" in line


def test_a_context_the_kubeconfig_does_not_have(base: list[str]) -> None:
    line = refusal(*base, "--k8s-context", "elsewhere")
    assert "--k8s-context" in line and "elsewhere" in line and "not found" in line


def test_an_api_server_that_does_not_answer(rehearsal: Any, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    port = _closed_port()
    kubeconfig.write_text(Path(rehearsal.kubeconfig_path).read_text().replace(f":{rehearsal.port}", f":{port}"))
    line = refusal("--k8s-kubeconfig", str(kubeconfig), "--k8s-image", "scaler-worker")
    assert f"--k8s-kubeconfig: the Kubernetes API at https://127.0.0.1:{port}" in line and "does not answer" in line


def test_a_namespace_that_does_not_exist(base: list[str]) -> None:
    line = refusal(*base, "--k8s-namespace", "nowhere")
    assert '--k8s-namespace nowhere: NotFound (404): namespaces "nowhere" not found' in line


def test_rbac_that_forbids_the_pods(rehearsal: Any, tmp_path: Path) -> None:
    from scaler_rehearsal.fake_kubernetes.tls import kubeconfig_text

    rehearsal.store.create("serviceaccounts", "default", {"metadata": {"name": "powerless"}})
    kubeconfig = tmp_path / "kubeconfig"
    token = rehearsal.tokens.for_account("default", "powerless")
    kubeconfig.write_text(kubeconfig_text(rehearsal.server_url, rehearsal.certificates.ca_pem, token))
    line = refusal("--k8s-kubeconfig", str(kubeconfig), "--k8s-image", "scaler-worker")
    assert "--k8s-namespace default: RBAC does not let" in line
    assert "Forbidden (403): " in line and 'User "system:serviceaccount:default:powerless" cannot create' in line


def test_an_image_name_that_is_not_one(base: list[str]) -> None:
    line = refusal(*base[:2], "--k8s-image", "Not An Image")
    assert "--k8s-image 'Not An Image': not an image reference (invalid reference format)" in line


def test_a_quantity_that_is_not_one(base: list[str]) -> None:
    line = refusal(*base, "--k8s-cpu", "two")
    assert "--k8s-cpu two" in line and "quantities must match the regular expression" in line


def test_without_the_kubernetes_extra() -> None:
    """As in an environment made by `pip install scaler-compute`: lightkube cannot be imported."""
    code = (
        'import sys; sys.modules["lightkube"] = None; from scaler.entry_points.worker_manager import main; '
        "sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "kubernetes", "tcp://127.0.0.1:1", "--k8s-image", "scaler-worker"],
        capture_output=True, text=True, timeout=COLD_START_SECONDS,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in output, output
    assert "needs the kubernetes extra (lightkube not installed): pip install 'scaler-compute[kubernetes]'" in output


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "apiVersion: v1\nkind: Config\nclusters:\n\t- name: a\n",
            "not YAML at line 4, column 1 (found character '\\t' that cannot start any token)",
        ),
        ("{}\n", "not a kubeconfig (it has no clusters and no contexts)"),
        ("just words\n", "not a kubeconfig (it has no clusters and no contexts)"),
    ],
    ids=["malformed", "empty-mapping", "a-string"],
)
def test_a_kubeconfig_that_is_not_one(tmp_path: Path, text: str, words: str) -> None:
    """issue 77, item 6: a malformed kubeconfig gave PyYAML's 40-line traceback, one of `{}` a bare `'clusters'`.
    Checked to fail before: a traceback (yaml.parser.ParserError), then "cannot read the Kubernetes configuration:
    'clusters'"."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(text)
    line = refusal("--k8s-kubeconfig", str(kubeconfig), "--k8s-image", "scaler-worker")
    assert f"--k8s-kubeconfig {kubeconfig}: {words}" in line, line
    assert "give the kubeconfig kubectl uses (`kubectl config view --raw > FILE` writes it)" in line, line


def test_the_rehearsal_without_its_extra(tmp_path: Path) -> None:
    """issue 77, item 6: `scaler_fake_kubernetes` without the fake-kubernetes extra raised ModuleNotFoundError
    (cryptography) from its start; now one line naming the extra, as scaler_fake_cloud's. Checked to fail before: a
    traceback ending in "No module named 'cryptography'"."""
    code = (
        'import sys; sys.modules["cryptography"] = None; '
        "from scaler_rehearsal.entry_points.fake_kubernetes import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--port", "0", "--kubeconfig", str(tmp_path / "kubeconfig")],
        capture_output=True, text=True, timeout=COLD_START_SECONDS,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in output, output
    said = output.strip().splitlines()
    assert len(said) == 1, output
    needs = "scaler_fake_kubernetes needs the fake-kubernetes extra: pip install 'scaler-compute[fake-kubernetes]'"
    assert needs in said[0], output
