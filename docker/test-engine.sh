#!/bin/sh
# The container engine of the tests (`make test` runs `start` before the suite and `stop` after it): Debian's
# docker.io started as `dockerd --bridge=none --iptables=false` (it touches no network of the machine), a Debian 12
# base image made with debootstrap (no registry is reachable: cached in $SCALER_TEST_DOCKER_STATE, minutes the
# first time), and the worker image built from it (docker/worker.Dockerfile, tag scaler-worker:test) for the one
# test that runs ECS tasks as real containers. Root and apt-get only; whatever cannot be done is said, and that
# test skips. `stop` stops the daemon only if `start` started it, and leaves the cached base image for next time.
#   sh docker/test-engine.sh start|stop
set -u
state=${SCALER_TEST_DOCKER_STATE:-/var/cache/scaler-test-docker}
root=$(cd "$(dirname "$0")/.." && pwd)
base=scaler-test-debian:12
say() { echo "test-engine: $*"; }

install_tools() {
    command -v dockerd >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || { say "no apt-get: no container engine (the docker test skips)"; return 1; }
    say "installing docker.io and debootstrap"
    apt-get install -y -q docker.io debootstrap >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q docker.io debootstrap >/dev/null 2>&1; } \
        || { say "could not install docker.io and debootstrap (the docker test skips)"; return 1; }
}

start_daemon() {
    docker info >/dev/null 2>&1 && return 0
    say "starting dockerd --bridge=none --iptables=false (log: $state/dockerd.log)"
    dockerd --bridge=none --iptables=false --ip6tables=false --pidfile "$state/dockerd.pid" >"$state/dockerd.log" 2>&1 &
    echo $! >"$state/started-here"
    tries=0
    until docker info >/dev/null 2>&1; do
        tries=$((tries + 1))
        [ "$tries" -lt 60 ] || { say "dockerd did not answer within 30 s (see $state/dockerd.log)"; return 1; }
        sleep 0.5
    done
}

base_image() {
    docker image inspect "$base" >/dev/null 2>&1 && return 0
    if [ ! -s "$state/debian-12.tar" ]; then
        say "making a Debian 12 base image with debootstrap (minutes, once: cached in $state)"
        rootfs=$(mktemp -d)
        debootstrap --variant=minbase --include=python3,ca-certificates bookworm "$rootfs" http://deb.debian.org/debian \
            >"$state/debootstrap.log" 2>&1 || { say "debootstrap failed (see $state/debootstrap.log)"; rm -rf "$rootfs"; return 1; }
        tar -C "$rootfs" -cf "$state/debian-12.tar" . && rm -rf "$rootfs"
    fi
    docker import "$state/debian-12.tar" "$base" >/dev/null
}

worker_image() {
    uv=$(command -v uv || echo "$root/.venv/bin/uv")
    [ -x "$uv" ] || { say "no uv binary to put in the image (pip install uv)"; return 1; }
    context=$(mktemp -d)
    cp "$uv" "$context/uv"
    printf 'FROM scratch\nCOPY uv /uv\n' >"$context/Dockerfile"
    docker build -q -t scaler-test-uv "$context" >/dev/null 2>"$state/build.log" || { say "could not build the uv image (see $state/build.log)"; rm -rf "$context"; return 1; }
    rm -rf "$context"
    python=$(docker run --rm --network none "$base" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    docker build -q --network host -f "$root/docker/worker.Dockerfile" --build-arg BASE_IMAGE="$base" \
        --build-arg UV_IMAGE=scaler-test-uv --build-arg PYTHONS= --build-arg DEFAULT_PYTHON="$python" \
        -t scaler-worker:test "$root" >/dev/null 2>>"$state/build.log" \
        || { say "could not build the worker image (see $state/build.log)"; return 1; }
    say "scaler-worker:test is built (Python $python)"
}

case "${1:-}" in
    start)
        if [ "$(id -u)" != 0 ]; then say "not root: no container engine for the tests (the docker test skips)"; exit 0; fi
        if [ "${SCALER_TEST_DOCKER:-1}" = 0 ]; then say "SCALER_TEST_DOCKER=0: skipped"; exit 0; fi
        mkdir -p "$state"
        install_tools && start_daemon && base_image && worker_image
        exit 0
        ;;
    stop)
        if [ -s "$state/started-here" ]; then
            pid=$(cat "$state/started-here")
            rm -f "$state/started-here"
            kill "$pid" 2>/dev/null && say "stopping the dockerd it started"
            tries=0
            while kill -0 "$pid" 2>/dev/null && [ "$tries" -lt 60 ]; do tries=$((tries + 1)); sleep 0.5; done
        fi
        exit 0
        ;;
    *)
        echo "usage: sh docker/test-engine.sh start|stop" >&2
        exit 2
        ;;
esac
