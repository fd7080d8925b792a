"""What a cloud manager sends each unit it launches, through its bucket (docs/guide/bursting.md).

A launch carries three things, in the worker image's contract (an EC2 boot script uses the same three):

- `PYTHON_VERSION`: the client's major.minor;
- `PYTHON_REQUIREMENTS`: this build of scaler, `scaler-compute==<version>` when it is a published version,
  else `scaler-compute @ <presigned URL of a wheel made here>`;
- `COMMAND`: `exec python3 -m scaler.worker_manager.unit.boot '<presigned URL of the unit's manifest>'`;
- `SCALER_UNIT_REPORT_URL`: where a boot that fails before scaler runs (the image has no such Python, installing
  scaler fails) writes the unit's boot report, so that the manager names the cause, not only an exit code.

The manifest, one JSON object per unit, holds the rest: the requirements and wheels of the environment, the
program (a pool of workers, or the hub), the environment it runs with (the workers' CURVE keys: never in the
launch request), and the URL the unit writes its boot report to. The unit deletes it when it has read it.

Reports are read back (`reports`) until a unit has said how its boot ended, and once more when a unit is seen
gone before its report said so (a boot that failed in the image writes its report and exits at once); what they
say becomes the unit's detail in the manager's log and status. A bucket deleted while the manager runs is made
again, and the wheels uploaded again, at the next launch.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scaler.worker_manager.aws.bucket import ManagerBucket
from scaler.worker_manager.aws.client import CloudError
from scaler.worker_manager.ship.distributions import DISTRIBUTION_NAME
from scaler.worker_manager.ship.environment import UnitEnvironment
from scaler.worker_manager.ship.wheels import Wheel
from scaler.worker_manager.unit.report import REPORT_URL_VARIABLE

logger = logging.getLogger(__name__)

BOOT_MODULE = "scaler.worker_manager.unit.boot"
#: Report states after which a unit's report is no longer read: its boot is over, one way or the other.
SETTLED = frozenset({"running", "failed", "ended"})
#: Seconds between two reads of one unit's report.
REPORT_PERIOD_SECONDS = 3.0


@dataclass(frozen=True)
class UnitLaunch:
    python: str  #: PYTHON_VERSION
    scaler_requirement: str  #: PYTHON_REQUIREMENTS ("" in `image` mode: the image has scaler)
    manifest_url: str
    report_url: str  #: where a boot that fails before scaler runs (the image's entrypoint, an EC2 boot script) reports

    @property
    def command(self) -> str:
        """COMMAND: the unit's boot, for `sh -c`."""
        return f"exec python3 -m {BOOT_MODULE} {shlex.quote(self.manifest_url)}"

    def image_environment(self) -> list[dict[str, str]]:
        """The container overrides of the worker image's contract."""
        return [
            {"name": "PYTHON_VERSION", "value": self.python},
            {"name": "PYTHON_REQUIREMENTS", "value": self.scaler_requirement},
            {"name": "COMMAND", "value": self.command},
            {"name": REPORT_URL_VARIABLE, "value": self.report_url},
        ]


class Shipment:
    """One manager's shipping: its bucket, its units' environment, their manifests and reports."""

    def __init__(self, bucket: ManagerBucket, environment: UnitEnvironment, manager_id: str, boot_seconds: float):
        self.bucket = bucket
        self.environment = environment
        self._manager_id = manager_id
        self._boot_seconds = boot_seconds  #: how long launch URLs stay valid (the boot timeout, plus a margin)
        self._uploaded: dict[str, str] = {}  #: wheel sha256 -> its key, once uploaded
        self._prepared = False
        self._reports: dict[str, dict[str, Any]] = {}  #: unit id -> its latest report
        self._read_at: dict[str, float] = {}
        self._logged: dict[str, str] = {}  #: unit id -> the report line logged last
        self._read_gone: set[str] = set()  #: units whose report was read once more after they were seen gone

    async def prepare(self) -> None:
        """The bucket exists and holds every wheel (uploaded only when missing: a cache across runs)."""
        if self._prepared:
            return
        await self.bucket.ensure()
        wheels = [self.environment.scaler_wheel] if self.environment.scaler_wheel else []
        for wheel in wheels + list(self.environment.wheels):
            key = f"wheels/{wheel.sha256[:32]}/{wheel.filename}"
            if not await self.bucket.has(key):
                logger.info("uploading %s to s3://%s/%s", wheel.filename, self.bucket.name, key)
                await self.bucket.put_file(key, wheel.path)
            self._uploaded[wheel.sha256] = key
        self._prepared = True

    async def launch(
        self, unit_id: str, program: Sequence[str], environment: dict[str, str], reach: str | None
    ) -> UnitLaunch:
        """Put the unit's manifest in the bucket; what the launch request carries."""
        try:
            return await self._launch(unit_id, program, environment, reach)
        except CloudError as error:
            if error.code != "NoSuchBucket":
                raise
        logger.warning(
            "the bucket %s is gone (deleted while the manager ran): creating it again and uploading the wheels again",
            self.bucket.name,
        )
        self._prepared = False
        self._uploaded.clear()
        return await self._launch(unit_id, program, environment, reach)

    async def _launch(
        self, unit_id: str, program: Sequence[str], environment: dict[str, str], reach: str | None
    ) -> UnitLaunch:
        await self.prepare()
        folder = self.unit_folder(unit_id)
        valid = self._boot_seconds + 600
        report_url = self.bucket.presign("put_object", f"{folder}/report.json", 7 * 24 * 3600)
        manifest = {
            "unit_id": unit_id,
            "manager_id": self._manager_id,
            "launched_at": time.time(),
            "requirements": list(self.environment.requirements),
            "wheels": [self._wheel_entry(wheel, valid) for wheel in self.environment.wheels],
            "modules": {requirement: list(names) for requirement, names in self.environment.import_names},
            "environment": environment,
            "program": list(program),
            "reach": reach,
            "report_url": report_url,
            "delete_url": self.bucket.presign("delete_object", f"{folder}/manifest.json", valid),
        }
        await self.bucket.put_json(f"{folder}/manifest.json", manifest)
        return UnitLaunch(
            self.environment.target.python,
            self._scaler_requirement(valid),
            self.bucket.presign("get_object", f"{folder}/manifest.json", valid),
            report_url,
        )

    def unit_folder(self, unit_id: str) -> str:
        return f"units/{self._manager_id}/{unit_id}"

    def _scaler_requirement(self, valid: float) -> str:
        wheel = self.environment.scaler_wheel
        if wheel is not None:
            url = self.bucket.presign("get_object", self._uploaded[wheel.sha256], valid)
            return f"{DISTRIBUTION_NAME} @ {url}"
        return self.environment.scaler or ""

    def _wheel_entry(self, wheel: Wheel, valid: float) -> dict[str, str]:
        url = self.bucket.presign("get_object", self._uploaded[wheel.sha256], valid)
        return {"distribution": wheel.distribution, "filename": wheel.filename, "url": url}

    # ------------------------------------------------------------ boot reports

    async def reports(
        self, unit_ids: Sequence[str], now: float, gone: Sequence[str] = (), prune: bool = True,
        period_seconds: float = REPORT_PERIOD_SECONDS,
    ) -> dict[str, dict[str, Any]]:  # fmt: skip
        """The latest report of each unit (read again at most every `period_seconds`, until its boot is over); the
        units of `gone` (seen ended) are read once more, at once, unless their report had said how the boot ended.
        `prune`: forget every unit not named (the caller names the whole listing); False for a look at a few units,
        which must not make the others' reports read, and logged, again at the next listing. A caller that waits
        for one unit's report polls at its own pace (`period_seconds=0`)."""
        for unit_id in [*unit_ids, *gone]:
            report = self._reports.get(unit_id)
            if report is not None and report.get("state") in SETTLED:
                continue
            if unit_id in gone:
                if unit_id in self._read_gone:
                    continue
                self._read_gone.add(unit_id)
            elif now - self._read_at.get(unit_id, 0.0) < period_seconds:
                continue
            self._read_at[unit_id] = now
            try:
                found = await self.bucket.get_json(f"{self.unit_folder(unit_id)}/report.json")
            except CloudError as error:
                logger.debug("could not read the report of unit %s: %s", unit_id, error)
                continue
            if isinstance(found, dict):
                self._reports[unit_id] = found
                self._log_change(unit_id, found)
        listed = {*unit_ids, *gone}
        if not prune:
            return {unit_id: self._reports[unit_id] for unit_id in listed if unit_id in self._reports}
        for unit_id in set(self._reports) - listed:
            self._reports.pop(unit_id, None)
            self._read_at.pop(unit_id, None)
            self._logged.pop(unit_id, None)
        self._read_gone &= listed
        return {unit_id: self._reports[unit_id] for unit_id in listed if unit_id in self._reports}

    def _log_change(self, unit_id: str, report: dict[str, Any]) -> None:
        """Each new thing a unit reports, once: boot and install times, what it could not install or reach. A
        `started` unit (the hub, whose program says `running` itself) is said once it runs, not twice."""
        line = describe_report(report)
        troubled = report.get("state") in ("failed", "unreachable") or report.get("problems")
        if self._logged.get(unit_id) == line or (report.get("state") == "started" and not troubled):
            return
        self._logged[unit_id] = line
        (logger.error if troubled else logger.info)("unit %s: %s", unit_id, line)


def describe_report(report: dict[str, Any]) -> str:
    """One line for a unit's detail: how its boot went, where it stands, what went wrong."""
    parts = [str(report.get("state", "?"))]
    if "boot_seconds" in report:
        parts.append(f"booted in {float(report['boot_seconds']):.1f} s")
    if "install_seconds" in report:
        parts.append(f"install {float(report['install_seconds']):.1f} s")
    problems = list(report.get("problems") or [])
    if report.get("problem"):
        problems.append(str(report["problem"]))
    if problems:
        parts.append("; ".join(problems))
    return ", ".join(parts)
