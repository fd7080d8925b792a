#!/bin/sh
# The entrypoint of scaler's worker image (docker/worker.Dockerfile); scaler_fake_cloud runs this same script for
# the ECS tasks and Batch jobs it starts. A launch of the image's Python that lists nothing to install runs in the
# image's environment as it is (made when the image was built, its bytecode compiled: nothing to make or install at
# start). Otherwise it makes a fresh virtual environment with the Python the launch asks for and installs the
# image's baked requirements (from the image's cache) and what the launch lists. Then it runs the container's command.
#
#   PYTHON_VERSION       major.minor (3.12; a patch, 3.12.11, is accepted and ignored). Default: the image's
#                        SCALER_IMAGE_PYTHON. No `python<major.minor>` on the image's PATH: the container exits 1.
#   PYTHON_REQUIREMENTS  requirements, separated by newlines when there is one (environment markers allowed),
#                        else by ';': names, pins (scaler-compute==1.2), `name @ URL` of a wheel. Installed with uv
#                        from the package index; a failed install exits 1.
#   COMMAND              run with `sh -c` in the environment, when the container has no command of its own (an ECS
#                        task's override); a Batch job definition's command runs instead when given.
#   SCALER_UNIT_REPORT_URL  optional: where a boot that fails here (no such Python, an install that fails) writes
#                        the unit's boot report (a presigned PUT URL of the manager's bucket), so that the manager
#                        names what failed instead of only the container's exit code.
# Set by the image: SCALER_IMAGE_PYTHON, SCALER_IMAGE_REQUIREMENTS (baked in: in the image's environment, and
# installed from the image's cache in a fresh one), SCALER_IMAGE_VENV (the image's environment: SCALER_IMAGE_PYTHON's,
# with the baked requirements; never written at start, so that a fake cloud's units may share it),
# SCALER_WORKER_VENV (where a fresh environment is made).
set -eu

say() {
    printf 'scaler-worker-image: %s\n' "$*" >&2
}

# Writes a failed boot report with any Python's standard library (as a file's bytes: urllib would send a form, whose
# body S3's fake drops); a presigned URL of a local endpoint (the fake cloud's) is sent to the AWS endpoint this
# unit is told, which is the same service seen from its network.
REPORT_PY='
import json, os, sys, time, urllib.parse, urllib.request
url = urllib.parse.urlsplit(sys.argv[1])
endpoint = os.environ.get("AWS_ENDPOINT_URL")
if endpoint and url.hostname in ("127.0.0.1", "localhost", "::1"):
    mine = urllib.parse.urlsplit(endpoint)
    url = url._replace(scheme=mine.scheme, netloc=mine.netloc)
body = {"state": "failed", "phase": sys.argv[2], "problem": sys.argv[3], "updated_at": time.time()}
request = urllib.request.Request(urllib.parse.urlunsplit(url), data=json.dumps(body).encode(), method="PUT",
                                 headers={"Content-Type": "application/octet-stream"})
urllib.request.urlopen(request, timeout=20).close()
'

fail() {  # $1: what failed (python, install, command), $2: why (the report's line), $3: what to say (default $2)
    say "${3:-$2}"
    if [ -n "${SCALER_UNIT_REPORT_URL:-}" ]; then
        reporter=${python:-}
        [ -n "$reporter" ] || reporter=$(command -v python3 || true)
        [ -n "$reporter" ] || for found in $(interpreters); do reporter=$(command -v "python$found") && break; done
        if [ -n "$reporter" ]; then
            "$reporter" -c "$REPORT_PY" "$SCALER_UNIT_REPORT_URL" "$1" "$2" >/dev/null 2>&1 \
                || say "could not write the unit's boot report"
        fi
    fi
    exit 1
}

interpreters() {  # the python3.X this image has, on its PATH
    found=""
    old_ifs=$IFS
    IFS=:
    for directory in $PATH; do
        for candidate in "$directory"/python3.[0-9] "$directory"/python3.[0-9][0-9]; do
            [ -x "$candidate" ] || continue
            name=${candidate##*/}
            case " $found " in *" ${name#python} "*) ;; *) found="$found ${name#python}" ;; esac
        done
    done
    IFS=$old_ifs
    printf '%s' "${found# }"
}

requirements_of() {  # one requirement a line: newline-separated when the text has a newline, else ';'-separated
    case "$1" in
        *'
'*) printf '%s\n' "$1" ;;
        *) printf '%s\n' "$1" | tr ';' '\n' ;;
    esac | sed 's/^[[:space:]]*//; s/[[:space:]]*$//' | grep -v '^#' | grep -v '^$' || true
}

version=${PYTHON_VERSION:-${SCALER_IMAGE_PYTHON:-}}
minor=$(printf '%s' "$version" | sed -n 's/^\([0-9][0-9]*\.[0-9][0-9]*\)\(\.[0-9][0-9]*\)\{0,1\}$/\1/p')
python=""
if [ -z "$minor" ]; then
    fail python "PYTHON_VERSION='$version' is not a Python version (major.minor, e.g. 3.12)"
fi
python=$(command -v "python$minor" || true)
if [ -z "$python" ]; then
    fail python "no Python $minor in this image (it has: $(interpreters)); set PYTHON_VERSION to one of them (the \
client's Python: build the image with it, its PYTHONS argument)"
fi

image_minor=$(printf '%s' "${SCALER_IMAGE_PYTHON:-}" | sed -n 's/^\([0-9][0-9]*\.[0-9][0-9]*\)\(\.[0-9][0-9]*\)\{0,1\}$/\1/p')
image_venv=${SCALER_IMAGE_VENV:-}
added=$(requirements_of "${PYTHON_REQUIREMENTS:-}")
if [ -n "$image_venv" ] && [ -x "$image_venv/bin/python" ] && [ "$minor" = "$image_minor" ] && [ -z "$added" ]; then
    venv=$image_venv
    say "using the image's environment with Python $minor ($venv): nothing to install"
    requirements=""
else
    venv=${SCALER_WORKER_VENV:-/opt/scaler/venv}
    uv venv --quiet --no-config --python "$python" "$venv"
    requirements=$(requirements_of "${SCALER_IMAGE_REQUIREMENTS:-}"; requirements_of "${PYTHON_REQUIREMENTS:-}")
fi
if [ -n "$requirements" ]; then
    printf '%s\n' "$requirements" >"$venv/requirements.txt"
    shown=$(printf '%s' "$requirements" | sed 's/[?].*//' | tr '\n' ' ' | sed 's/ *$//')
    say "installing $shown with Python $minor"
    if ! uv pip install --quiet --no-config --python "$venv/bin/python" -r "$venv/requirements.txt" \
            2>"$venv/install.log"; then
        cat "$venv/install.log" >&2
        why=$(tail -c 600 "$venv/install.log" | tr -s ' \n\t' '   ' | sed 's/^ *//; s/ *$//')
        fail install "could not install $shown with Python $minor from the package index (PYTHON_REQUIREMENTS): \
uv says: $why" "installing PYTHON_REQUIREMENTS failed (uv says why above); the container exits"
    fi
    cat "$venv/install.log" >&2
fi

VIRTUAL_ENV=$venv
PATH=$venv/bin:$PATH
export VIRTUAL_ENV PATH
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
if [ -z "${COMMAND:-}" ]; then
    fail command "COMMAND is not set and the container has no command: nothing to run"
fi
exec sh -c "$COMMAND"
