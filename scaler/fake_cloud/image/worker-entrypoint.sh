#!/bin/sh
# The entrypoint of scaler's worker image (docker/worker.Dockerfile); scaler_fake_cloud runs this same script for
# the ECS tasks and Batch jobs it starts. It makes a fresh virtual environment with the Python the launch asks for,
# installs what the launch lists, then runs the container's command.
#
#   PYTHON_VERSION       major.minor (3.12; a patch, 3.12.11, is accepted and ignored). Default: the image's
#                        SCALER_IMAGE_PYTHON. No `python<major.minor>` on the image's PATH: the container exits 1.
#   PYTHON_REQUIREMENTS  requirements, separated by newlines when there is one (environment markers allowed),
#                        else by ';': names, pins (scaler-compute==1.2), `name @ URL` of a wheel. Installed with uv
#                        from the package index; a failed install exits 1.
#   COMMAND              run with `sh -c` in the environment, when the container has no command of its own (an ECS
#                        task's override); a Batch job definition's command runs instead when given.
# Set by the image: SCALER_IMAGE_PYTHON, SCALER_IMAGE_REQUIREMENTS (baked in: installed in every container, from
# the image's cache), SCALER_WORKER_VENV (where the environment is made).
set -eu

say() {
    printf 'scaler-worker-image: %s\n' "$*" >&2
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
if [ -z "$minor" ]; then
    say "PYTHON_VERSION='$version' is not a Python version (major.minor, e.g. 3.12)"
    exit 1
fi
python=$(command -v "python$minor" || true)
if [ -z "$python" ]; then
    say "no Python $minor in this image (it has: $(interpreters)); set PYTHON_VERSION to one of them"
    exit 1
fi

venv=${SCALER_WORKER_VENV:-/opt/scaler/venv}
uv venv --quiet --no-config --python "$python" "$venv"
requirements=$(requirements_of "${SCALER_IMAGE_REQUIREMENTS:-}"; requirements_of "${PYTHON_REQUIREMENTS:-}")
if [ -n "$requirements" ]; then
    printf '%s\n' "$requirements" >"$venv/requirements.txt"
    say "installing $(printf '%s' "$requirements" | sed 's/[?].*//' | tr '\n' ' ' | sed 's/ *$//') with Python $minor"
    if ! uv pip install --quiet --no-config --python "$venv/bin/python" -r "$venv/requirements.txt"; then
        say "installing PYTHON_REQUIREMENTS failed (uv says why above); the container exits"
        exit 1
    fi
fi

VIRTUAL_ENV=$venv
PATH=$venv/bin:$PATH
export VIRTUAL_ENV PATH
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
if [ -z "${COMMAND:-}" ]; then
    say "COMMAND is not set and the container has no command: nothing to run"
    exit 1
fi
exec sh -c "$COMMAND"
