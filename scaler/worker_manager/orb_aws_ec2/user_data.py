"""An EC2 unit's boot script (its user data): the worker image's contract, done by a shell script as root on the
AMI (`--debug-dump-path` writes it out).

1. Python of the client's major.minor and its pip: the AMI's `pythonX.Y`, else installed with dnf (yum) (Amazon
   Linux 2023, the default AMI, has 3.9 as `python3`, without pip, and offers 3.11 to 3.14 as packages).
2. This build of scaler: already importable with that Python at this version (an AMI made with it), else
   installed in a fresh virtual environment (`PYTHON_REQUIREMENTS`: a pin, or a presigned wheel URL) by uv:
   the AMI's own `uv` when it has one on its PATH (an AMI baked for scaler), else one pip installs there first
   (pip alone when it cannot): seconds instead of tens of seconds. The boot program installs the rest of the
   environment with the same uv.
3. `python -m scaler.worker_manager.unit.boot '<manifest URL>'`, as an ECS task's COMMAND does.
4. When the boot program ends (its workers gone, the lease over), the instance shuts itself down
   (`shutdown -h now`), which terminates it: the manager launches it with InstanceInitiatedShutdownBehavior=
   terminate. An instance outlives its user data otherwise, billed. The fake cloud's instances have a `shutdown`
   of their own that does the same to the fake instance (never to the machine the rehearsal runs on).

A boot that fails before scaler runs (no such Python, an install that fails) writes the unit's boot report
with python3's standard library, naming what failed, and powers off.
"""

from __future__ import annotations

import shlex

from scaler.version import __version__
from scaler.worker_manager.aws.shipping import BOOT_MODULE, UnitLaunch

#: Writes a failure report: python3 (any version) and its standard library only; sent as a file's bytes (urllib's
#: default content type is a form's, whose body the fake cloud's S3 drops).
_REPORT = (
    "import json, sys, time, urllib.request; "
    "body = json.dumps({'state': 'failed', 'phase': sys.argv[2], 'problem': sys.argv[3], 'updated_at': time.time()}); "
    "urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=body.encode(), method='PUT', "
    "headers={'Content-Type': 'application/octet-stream'}), timeout=20)"
)


def user_data(launch: UnitLaunch, report_url: str, unit_id: str, manager_id: str) -> str:
    python = f"python{launch.python}"
    requirement = launch.scaler_requirement
    marker = f"# scaler: unit {unit_id} of worker manager {manager_id}"
    install = (
        ['  UV=$(command -v uv || true)',
         '  if [ -n "$UV" ]; then echo "scaler: installing with the AMI\'s uv ($UV)"; fi',
         f'  install_scaler {shlex.quote(requirement)} >"$UNIT.log" 2>&1 \\',
         f'    || fail scaler "could not install {requirement.split(" @ ")[0]} with $PY: $(tail -c 400 "$UNIT.log")"',
         '  RUN="$UNIT/bin/python"']
        if requirement
        else ['  fail scaler "this AMI has no scaler for $PY (environment = image): make one with it, or ship it"']
    )  # fmt: skip
    return "\n".join(
        [
            "#!/bin/sh",
            marker,
            f"PY={python}",
            f"REPORT={shlex.quote(report_url)}",
            f'UNIT="${{TMPDIR:-/tmp}}/scaler-unit-{unit_id}"',
            "fail() {",
            f'  python3 -c {shlex.quote(_REPORT)} "$REPORT" "$1" "$2" >/dev/null 2>&1',
            '  echo "scaler unit boot failed ($1): $2" >&2',
            "  shutdown -h now",
            "  exit 1",
            "}",
            "install_scaler() {",
            '  "$PY" -m venv --without-pip "$UNIT" || return 1',
            "  # uv installs in seconds what pip takes tens of seconds for: the AMI's, else one installed with pip",
            '  if [ -z "$UV" ]; then',
            '    "$PY" -m pip --python "$UNIT/bin/python" install --quiet uv || true',
            '    if [ -x "$UNIT/bin/uv" ]; then UV="$UNIT/bin/uv"; fi',
            "  fi",
            '  if [ -n "$UV" ]; then',
            '    "$UV" pip install --quiet --python "$UNIT/bin/python" "$1"',
            "  else",
            '    "$PY" -m pip --python "$UNIT/bin/python" install --quiet "$1"',
            "  fi",
            "}",
            'if ! "$PY" -m pip --version >/dev/null 2>&1; then',
            '  (dnf install -y "$PY" "$PY-pip" || yum install -y "$PY" "$PY-pip") >"$UNIT.python.log" 2>&1',
            '  command -v "$PY" >/dev/null 2>&1 || fail python "this instance has no $PY and dnf/yum could not install '
            "it (the client runs Python " + launch.python + '): $(tail -c 300 "$UNIT.python.log")"',
            "fi",
            f'if "$PY" -c \'import sys, scaler.version as v; sys.exit(v.__version__ != "{__version__}")\' '
            "2>/dev/null; then",
            '  RUN="$PY"',
            "else",
            *install,
            "fi",
            f'"$RUN" -m {BOOT_MODULE} {shlex.quote(launch.manifest_url)}',
            "CODE=$?",
            'rm -rf "$UNIT" "$UNIT.log" "$UNIT.python.log"',
            'echo "scaler: the unit\'s boot program ended (exit status $CODE): shutting the instance down"',
            "shutdown -h now",
            'exit "$CODE"',
            "",
        ]
    )
