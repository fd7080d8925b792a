"""The worker image of the Kubernetes page (issue 77, item 3): its Dockerfile installs the wheel the reader built
(the package is not on PyPI yet), with the `kubernetes` extra its manager needs in the cluster.

No registry is reachable here, so the page's `FROM python:3.12-slim` cannot be pulled and the image is not built with
docker; its steps run outside docker instead, as written: the page's commands make the build context from the
reader's `~/scaler-wheels`, each COPY copies into a folder standing for the image's root, and each RUN runs with the
COPY destinations read as those folders and with the `pip` of a fresh virtual environment (the base image's Python).
That environment then runs what the image runs: the manager (`scaler_worker_manager kubernetes -h`, which needs the
extra's lightkube) and a worker's module.

The base image's Python is a virtual environment with a current pip, as the image has, made by uv (`venv_with_pip`:
a second, where venv's ensurepip took 12 to 20 s). Its pip does not compile what it installs to bytecode (the
documentation tier's readers' `NO_COMPILE`, which says why): nothing checked here depends on it, and compiling
numpy's and pandas's modules was half of the RUN line's time (80 s to 36 s with venv's pip 23.2, load 4; a current
pip takes half the CPU of that pip for the line).

Checked to fail before: the page's Dockerfile copied no wheel (`COPY` missing: the test stops there), and its
`pip install "scaler-compute==<this version>"` names a distribution the package index does not have; without
`[kubernetes]` in the RUN line, lightkube does not import in the image's environment.
"""

from __future__ import annotations

import glob
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.docs.readers import NO_COMPILE
from tests.integration.fresh_install import ROOT, run_wheel, venv_with_pip

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PAGE = ROOT / "docs" / "guide" / "kubernetes.md"
_HEREDOC = re.compile(r"^cat > (?P<path>\S+) <<'(?P<end>\w+)'$")


def image_block() -> tuple[list[str], Path, list[str]]:
    """The page's commands before its Dockerfile, the Dockerfile's path, and its lines."""
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(), flags=re.S)
    block = next(text for text in blocks if "Dockerfile <<" in text)
    lines = block.splitlines()
    start = next(index for index, line in enumerate(lines) if _HEREDOC.match(line))
    heredoc = _HEREDOC.match(lines[start])
    assert heredoc is not None
    end = lines.index(heredoc.group("end"), start)
    return lines[:start], Path(heredoc.group("path")), lines[start + 1 : end]


def test_the_dockerfiles_steps_install_the_readers_wheel_with_the_kubernetes_extra(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    before, dockerfile, instructions = image_block()
    home = tmp_path / "home"
    (home / "scaler-wheels").mkdir(parents=True)
    shutil.copy(run_wheel(tmp_path_factory), home / "scaler-wheels")
    environment = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    for command in before:
        subprocess.run(["bash", "-c", command], cwd=home, env=environment, check=True, timeout=60)
    context, root = home / dockerfile.parent, tmp_path / "image"
    venv = venv_with_pip(tmp_path / "python", pip="current").parent.parent
    image_path = {**environment, **NO_COMPILE, "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    destinations: dict[str, Path] = {}
    kinds = [line.split()[0] for line in instructions if line.strip()]
    assert kinds[0] == "FROM" and "COPY" in kinds and "RUN" in kinds, instructions
    for line in instructions[1:]:
        kind, _, rest = line.partition(" ")
        if kind == "COPY":
            *sources, destination = shlex.split(rest)
            target = root / destination.lstrip("/")
            target.mkdir(parents=True, exist_ok=True)
            found = [path for source in sources for path in glob.glob(str(context / source))]
            assert found, f"{line}: nothing in the build context {sorted(p.name for p in context.iterdir())}"
            for path in found:
                shutil.copy(path, target)
            destinations[destination.rstrip("/")] = target
        elif kind == "RUN":
            for destination, target in destinations.items():
                rest = rest.replace(destination, str(target))
            done = subprocess.run(["bash", "-c", rest], env=image_path, capture_output=True, text=True, timeout=780)
            assert done.returncode == 0, f"{line}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        else:
            pytest.fail(f"an instruction this test does not run: {line}")
    manager = subprocess.run([str(venv / "bin" / "scaler_worker_manager"), "kubernetes", "-h"], capture_output=True,
                             text=True, timeout=120)  # fmt: skip
    assert manager.returncode == 0 and "--k8s-image" in manager.stdout, manager.stdout[-1000:] + manager.stderr
    worker = subprocess.run([str(venv / "bin" / "python"), "-c", "import lightkube, scaler.worker.process"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert worker.returncode == 0, worker.stderr
