"""What a cloud manager ships (#28 item 2), the parts that need no cloud: wheels of local builds, the units' Python
and platform, the environment plan, a unit's install failures, the EC2 boot script, boot reports."""

from __future__ import annotations

import dataclasses
import os
import time
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("packaging", reason="packaging comes with the aws extra (make test installs it)")

from scaler.worker_manager.aws.shipping import UnitLaunch, describe_report
from scaler.worker_manager.orb_aws_ec2.user_data import user_data
from scaler.worker_manager.ship.distributions import DISTRIBUTION_NAME, installed_distributions, this_build, this_python
from scaler.worker_manager.ship.environment import (
    EnvironmentProblem,
    check_environment,
    direct_reference_problem,
    parse_requirements,
    plan_environment,
)
from scaler.worker_manager.ship.unit_target import UnitTarget, python_version_problem
from scaler.worker_manager.ship.wheels import KEEP_SECONDS, wheel_of
from scaler.worker_manager.unit.install import FailedInstall, _culprit, write_stubs

TARGET = UnitTarget(this_python())


def test_this_build_is_a_local_install_and_its_wheel_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    build = this_build()
    assert build.name == DISTRIBUTION_NAME and not build.is_public, "a clone's editable install: no index has it"
    first, second = wheel_of(build, tmp_path), wheel_of(build, tmp_path)
    assert first.sha256 == second.sha256 and first.path == second.path
    assert first.filename == f"scaler_compute-{build.version}-py3-none-any.whl"
    with zipfile.ZipFile(first.path) as archive:
        names = archive.namelist()
        metadata = archive.read(f"scaler_compute-{build.version}.dist-info/METADATA").decode()
    assert "scaler/worker_manager/unit/boot.py" in names and "scaler/protocol/message.capnp" in names
    assert not any("__pycache__" in name for name in names)
    assert "Requires-Dist: pyzmq" in metadata
    assert TARGET.wheel_problem(first.path) is None


def test_a_wheel_not_shipped_for_a_week_leaves_the_cache_when_a_new_one_is_made(tmp_path: Path) -> None:
    stale, recent = tmp_path / ("0" * 32), tmp_path / ("1" * 32)
    for folder, age in ((stale, KEEP_SECONDS + 60), (recent, KEEP_SECONDS - 3600)):
        folder.mkdir()
        (folder / "old-0.1-py3-none-any.whl").write_bytes(b"")
        os.utime(folder, (time.time() - age, time.time() - age))
    shipped = wheel_of(this_build(), tmp_path)
    assert not stale.exists() and recent.exists() and shipped.path.is_file()
    os.utime(shipped.path.parent, (0, 0))
    assert wheel_of(this_build(), tmp_path).path == shipped.path
    assert shipped.path.parent.stat().st_mtime > time.time() - 3600, "shipping a cached wheel marks it as used"


def test_only_the_clients_python_is_accepted() -> None:
    assert python_version_problem("ecs_python_version", "") is None
    assert python_version_problem("ecs_python_version", f"{this_python()}.4") is None
    problem = python_version_problem("ecs_python_version", "3.99")
    assert problem is not None and "3.99 differs from the client's Python" in problem and this_python() in problem
    assert "expected a Python version" in str(python_version_problem("python_version", "latest"))


@pytest.mark.parametrize(
    ("tag", "fits"),
    [
        ("py3-none-any", True),
        ("py2.py3-none-any", True),
        (f"cp{this_python().replace('.', '')}-cp{this_python().replace('.', '')}-manylinux_2_17_x86_64", True),
        ("cp39-abi3-manylinux2014_x86_64", True),
        ("cp39-cp39-manylinux2014_x86_64", False),
        (f"cp{this_python().replace('.', '')}-cp{this_python().replace('.', '')}-macosx_11_0_arm64", False),
        (f"cp{this_python().replace('.', '')}-cp{this_python().replace('.', '')}-manylinux_2_39_x86_64", False),
    ],
)
def test_a_wheel_tag_fits_the_units_python_and_platform(tag: str, fits: bool) -> None:
    assert TARGET.fits_tag(tag) is fits


def test_an_installed_wheel_built_here_is_not_taken_for_one_the_index_has() -> None:
    python = f"cp{this_python().replace('.', '')}"
    assert TARGET.fits_installed(("py3-none-any",))
    assert not TARGET.fits_installed((f"{python}-{python}-linux_x86_64",))


def test_sync_pins_public_distributions_and_leaves_out_tools_this_build_and_exclusions(tmp_path: Path) -> None:
    environment = plan_environment("sync", "extra==1.0", "psutil", TARGET, cache=tmp_path)
    names = [requirement.split("==")[0].lower() for requirement in environment.requirements]
    assert "pyzmq" in names and "extra" in names
    assert not {"pip", "setuptools", "psutil", DISTRIBUTION_NAME} & set(names)
    assert environment.scaler_wheel is not None and environment.scaler is None
    public = [item for item in installed_distributions() if item.is_public and item.key != "psutil"]
    pinned = [item.pin for item in public if item.key not in ("pip", "setuptools", "wheel")]
    assert set(pinned) <= set(environment.requirements)
    assert "extra==1.0" not in environment.trusted, "what is not installed here is asked of the index"
    assert dict(environment.import_names)["extra==1.0"] == ("extra",)


def test_sync_never_ships_the_rehearsals(tmp_path: Path) -> None:
    """scaler-rehearsal runs beside the managers, never on a unit: `sync` neither packs it (an editable install, as
    in a clone) nor pins it (a wheel installed from a folder of links looks published, and no index has it).
    Checked with `REHEARSALS` left out of what `sync` skips: the wheel, then the pin, appears."""
    installed = installed_distributions()
    (rehearsals,) = [item for item in installed if item.key == "scaler-rehearsal"]
    looking_published = dataclasses.replace(rehearsals, direct_url=None, editable=False)
    for found in (rehearsals, looking_published):
        others = [item for item in installed if item.key in ("pyzmq", DISTRIBUTION_NAME)]
        environment = plan_environment("sync", None, "", TARGET, cache=tmp_path, installed=[*others, found])
        assert [wheel.distribution for wheel in environment.wheels] == []
        assert [pin for pin in environment.requirements if pin.startswith("pyzmq==")] == [f"pyzmq=={others[0].version}"]
        assert [pin for pin in environment.requirements if "rehearsal" in pin] == []


def test_image_installs_nothing_and_requirements_only_the_list(tmp_path: Path) -> None:
    image = plan_environment("image", "ignored==1", "", TARGET, cache=tmp_path)
    assert image.scaler is None and image.scaler_wheel is None and image.requirements == ()
    listed = plan_environment("requirements", "a==1; b>=2\n# c\nd @ https://example.invalid/d.whl", "", TARGET,
                              cache=tmp_path)  # fmt: skip
    assert listed.requirements == ("a==1", "b>=2", "d @ https://example.invalid/d.whl")
    with pytest.raises(EnvironmentProblem, match="expected one of sync, requirements, image"):
        plan_environment("everything", None, "", TARGET)


def test_the_check_names_what_the_units_cannot_install(tmp_path: Path) -> None:
    wheel = tmp_path / "old-1.0-cp39-cp39-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("old-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: old\nVersion: 1.0\n")
    environment = plan_environment("requirements", f"{wheel};missing==9;url @ https://x.invalid/u.whl", "", TARGET,
                                   cache=tmp_path)  # fmt: skip
    asked: list[str] = []

    def index(requirements: object, target: UnitTarget) -> list[tuple[str, str]]:
        asked.extend(requirements)  # type: ignore[call-overload]
        return [("missing==9", "the package index has no file of it")]

    problems = check_environment(environment, index)
    assert any(problem.startswith("old 1.0: old-1.0-cp39-cp39") for problem in problems), problems
    assert "missing==9: the package index has no file of it" in problems
    assert "url @ https://x.invalid/u.whl" not in asked, "a URL requirement is not asked of the index"


def test_a_direct_reference_to_a_wheel_of_another_distribution_is_refused_naming_both() -> None:
    """pip and uv refuse `scaler @ .../scaler_compute-...whl` on the unit, after its boot; the check says it first."""
    url = "http://127.0.0.1:9/builds/scaler_compute-0.1.0-py3-none-any.whl?Signature=x"
    problem = direct_reference_problem(f"scaler @ {url}")
    assert problem is not None and "is of scaler-compute, not scaler" in problem, problem
    assert direct_reference_problem(f"scaler-compute @ {url}") is None
    assert direct_reference_problem(f"Scaler_Compute[aws] @ {url}") is None
    assert direct_reference_problem("numpy==2.0") is None and direct_reference_problem("x @ https://h/u.whl") is None
    environment = plan_environment("requirements", f"scaler @ {url}", "", TARGET)
    assert check_environment(environment, lambda requirements, target: []) == [problem]


def test_parse_requirements_reads_a_file_or_the_text(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("numpy==2.0  # pinned\n\npandas\n")
    assert parse_requirements(str(path)) == ["numpy==2.0", "pandas"]
    assert parse_requirements("a;b\nc") == ["a", "b", "c"] and parse_requirements(None) == []


def test_a_failed_requirement_is_named_from_pips_words_and_its_modules_raise_saying_why(tmp_path: Path) -> None:
    wanted = ["good==1", "nothere==2", "/w/bad-1.0-cp39-cp39-linux_x86_64.whl"]
    assert _culprit("ERROR: No matching distribution found for nothere==2", wanted) == "nothere==2"
    assert _culprit("ERROR: bad-1.0-cp39-cp39-linux_x86_64.whl is not a supported wheel on this platform.",
                    wanted) == wanted[2]  # fmt: skip
    write_stubs([FailedInstall("nothere==2", "pip: no such thing")], {"nothere==2": ["nothere"]}, tmp_path, "unit u1")
    namespace: dict[str, object] = {}
    with pytest.raises(ImportError, match=r"nothere==2 could not be installed on unit u1: pip: no such thing"):
        exec(compile((tmp_path / "nothere.py").read_text(), "nothere.py", "exec"), namespace)


def test_a_python_the_default_ami_cannot_install_is_refused_at_start() -> None:
    from scaler.worker_manager.orb_aws_ec2.manager import default_ami_problem

    problem = default_ami_problem(None, "3.10")
    assert problem is not None and "Python 3.10" in problem and "3.9, 3.11, 3.12, 3.13" in problem
    assert default_ami_problem(None, "3.12") is None and default_ami_problem("ami-1", "3.10") is None


def test_the_ec2_boot_script_shuts_the_instance_down_when_its_boot_program_ends_or_fails() -> None:
    launch = UnitLaunch("3.11", "scaler-compute @ https://bucket.example/w.whl?X-Amz-Signature=abc&x=1",
                        "https://bucket.example/m.json?sig=1", "https://bucket.example/r.json")  # fmt: skip
    script = user_data(launch, launch.report_url, "u1", "ec2")
    assert script.startswith("#!/bin/sh\n# scaler: unit u1 of worker manager ec2\n")
    assert "PY=python3.11" in script and "dnf install -y" in script
    assert "'scaler-compute @ https://bucket.example/w.whl?X-Amz-Signature=abc&x=1'" in script, "quoted for sh"
    assert "scaler.worker_manager.unit.boot 'https://bucket.example/m.json?sig=1'" in script
    failing = script[script.index("fail() {") : script.index("\n}\n", script.index("fail() {"))]
    assert "shutdown -h now" in failing, "a boot that fails ends the instance (terminate behaviour)"
    assert script.rstrip().splitlines()[-2:] == ["shutdown -h now", 'exit "$CODE"'], "so does one that ends"
    assert "SCALER_CURVE" not in script, "keys travel in the manifest, never in user data"


def test_a_boot_report_reads_as_one_line() -> None:
    line = describe_report({"state": "running", "boot_seconds": 12.34, "install_seconds": 8.0,
                            "problems": ["x==1 could not be installed: pip: gone"]})  # fmt: skip
    assert line == "running, booted in 12.3 s, install 8.0 s, x==1 could not be installed: pip: gone"
