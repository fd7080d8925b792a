# PYTHON_ARGCOMPLETE_OK
"""`scaler_fake_kubernetes [--port PORT] [--kubeconfig FILE] [--nodes 1] [--node-cpu 8] [--node-memory 16Gi] ...`:
a local Kubernetes API server and kubelets that run each pod's container as a local process (`scaler --docs
kubernetes`, "Rehearse on this machine")."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scaler.config.completion import offer_completion
from scaler.version import __version__
from scaler_rehearsal.command import StopSignals, say, say_extra_missing


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="scaler_fake_kubernetes",
        description="A local Kubernetes API server (HTTPS, a bearer token, core v1 pods, secrets, configmaps, events, "
        "namespaces, nodes, with watches, resourceVersions and graceful deletion) and a kubelet that runs each pod's "
        "container as a local process with only what its pod spec gives it. It writes a kubeconfig for kubectl and "
        "the kubernetes worker manager, and prints where it is.",
    )
    parser.add_argument("--port", type=int, default=6443, help="port of the API server (0: any free port)")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path("fake-kubernetes.kubeconfig"),
        help="where to write the kubeconfig (its context is fake-kubernetes; default: ./fake-kubernetes.kubeconfig)",
    )
    parser.add_argument(
        "--nodes", type=int, default=1, help="how many nodes (rehearsal-node, rehearsal-node-2 ...), each as below"
    )
    parser.add_argument("--node-cpu", default="8", help="CPU a node offers to pods (a quantity: 8, 3500m)")
    parser.add_argument("--node-memory", default="16Gi", help="memory a node offers to pods (a quantity: 16Gi)")
    parser.add_argument("--node-pods", type=int, default=110, help="how many pods a node takes")
    parser.add_argument(
        "--node-taint",
        action="append",
        default=[],
        metavar="KEY[=VALUE]:EFFECT",
        help="a taint of the node (NoSchedule, PreferNoSchedule, NoExecute); repeatable",
    )
    parser.add_argument(
        "--namespace", action="append", default=[], help="a namespace to create at the start (default exists)"
    )
    parser.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="NAME=FOLDER[:FOLDER...]",
        help="an image the kubelet can pull: its name (the repository's last part) and the folders of its PATH; "
        "repeatable. Known without it: scaler-worker and scaler (this Python environment), python, busybox",
    )
    parser.add_argument(
        "--backoff-seconds",
        type=float,
        default=10.0,
        help="the kubelet's first back-off between image pulls and container restarts (Kubernetes: 10)",
    )
    parser.add_argument(
        "--node-monitor-grace-seconds",
        type=float,
        default=50.0,
        help="how long a node's kubelet may be silent before the node is unreachable (Kubernetes: 50)",
    )
    parser.add_argument(
        "--toleration-seconds",
        type=int,
        default=300,
        help="how long a pod stays on an unreachable or not ready node, unless its spec says (Kubernetes: 300)",
    )
    parser.add_argument(
        "--pod-gc-seconds",
        type=float,
        default=40.0,
        help="how long the pods of a deleted node wait before they are force-deleted (Kubernetes: 40)",
    )
    parser.add_argument("--state-dir", type=Path, default=None, help="where the pods' folders and logs go")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def _taint(text: str) -> dict[str, str]:
    head, separator, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    if not separator or not key or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise ValueError(
            f"--node-taint {text!r}: expected KEY[=VALUE]:EFFECT, EFFECT one of NoSchedule, PreferNoSchedule, NoExecute"
        )
    return {"key": key, **({"value": value} if value else {}), "effect": effect}


def _make(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> Any:
    try:
        import cryptography  # noqa: F401  (the extra's: FakeKubernetes makes its certificates with it when made)

        from scaler_rehearsal.fake_kubernetes.cluster import FakeKubernetes
        from scaler_rehearsal.fake_kubernetes.images import parse_image_option
        from scaler_rehearsal.fake_kubernetes.quantity import QuantityError, parse_quantity
    except ImportError as error:
        say_extra_missing("scaler_fake_kubernetes", "fake-kubernetes", error)
        return None
    try:
        images = [parse_image_option(text) for text in arguments.image]
        taints = [_taint(text) for text in arguments.node_taint]
        for flag, value in (("--node-cpu", arguments.node_cpu), ("--node-memory", arguments.node_memory)):
            try:
                parse_quantity(value)
            except QuantityError as error:
                raise ValueError(f"{flag} {value!r}: {error}") from None
        if arguments.nodes < 1:
            raise ValueError(f"--nodes {arguments.nodes}: give at least 1")
        if arguments.node_monitor_grace_seconds <= 0:
            raise ValueError(f"--node-monitor-grace-seconds {arguments.node_monitor_grace_seconds:g}: give more than 0")
        for flag, seconds in (
            ("--toleration-seconds", arguments.toleration_seconds),
            ("--pod-gc-seconds", arguments.pod_gc_seconds),
        ):
            if seconds < 0:
                raise ValueError(f"{flag} {seconds:g}: give a number of seconds, 0 or more")
    except ValueError as error:
        parser.error(str(error))
    return FakeKubernetes(
        arguments.port,
        node_cpu=arguments.node_cpu,
        node_memory=arguments.node_memory,
        node_pods=arguments.node_pods,
        node_taints=taints,
        nodes=arguments.nodes,
        images=images,
        state_directory=arguments.state_dir,
        kubeconfig_path=arguments.kubeconfig.resolve(),
        backoff_seconds=arguments.backoff_seconds,
        namespaces=arguments.namespace,
        node_monitor_grace_seconds=arguments.node_monitor_grace_seconds,
        toleration_seconds=arguments.toleration_seconds,
        pod_gc_seconds=arguments.pod_gc_seconds,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    offer_completion(parser)
    arguments = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if arguments.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    cluster = _make(parser, arguments)
    if cluster is None:
        return 2
    stops = StopSignals()
    stops.install()
    try:
        cluster.start()
    except OSError as error:
        cluster.stop()
        print(f"scaler_fake_kubernetes: cannot listen on 127.0.0.1:{arguments.port}: {error}", file=sys.stderr)
        return 2
    print(f"KUBECONFIG={cluster.kubeconfig_path}", flush=True)
    print(
        f"# API server {cluster.server_url}; node(s) {', '.join(cluster.node_names)} ({arguments.node_cpu} CPU, "
        f"{arguments.node_memory} each); "
        f"images: {', '.join(cluster.image_names())}",
        flush=True,
    )
    print(
        f"# kubectl --kubeconfig {cluster.kubeconfig_path} get pods -A; Ctrl-C stops the cluster and its pods",
        flush=True,
    )
    stops.wait()
    say("# stopping the cluster and its pods")
    cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
