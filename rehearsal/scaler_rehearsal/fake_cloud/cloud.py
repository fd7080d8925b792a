"""The fake cloud: moto's server, plus runners that turn launched resources into units started from nothing.

    with FakeCloud(port=0, boot_seconds=5) as cloud:   # cloud.endpoint_url is what boto3 is pointed at
        ...

Tests use it in-process (one per session, `reset()` between tests); `scaler_fake_cloud` runs it as a command.
The same port serves moto's API, the package index the units install from (`package_index.INDEX_ROUTE`) and the
fault route (`faults.ROUTE`: a spot interruption of an ECS task, an EC2 spot instance or a Batch job). With
`isolate_network` (root only) the units run in network namespaces of the cloud's own (`network.py`) and the
endpoint is the cloud's address in their VPC, which the laptop reaches too.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

from scaler_rehearsal.fake_cloud import moto_costs, moto_dispatch, moto_requests
from scaler_rehearsal.fake_cloud.batch import BatchContainers, install, settle_array_parents
from scaler_rehearsal.fake_cloud.ec2_instances import Ec2Runner
from scaler_rehearsal.fake_cloud.ecs_tasks import EcsRunner
from scaler_rehearsal.fake_cloud.faults import with_fault_route
from scaler_rehearsal.fake_cloud.images import Image, ImageCatalogue
from scaler_rehearsal.fake_cloud.package_index import UPSTREAM_INDEX, PackageIndex
from scaler_rehearsal.fake_cloud.pythons import machine_interpreters
from scaler_rehearsal.fake_cloud.runners import SPOT_NOTICE_SECONDS, FakeCloudRunnerSettings
from scaler_rehearsal.fake_cloud.sandbox import Sandbox

logger = logging.getLogger(__name__)

#: The prefix of the units' folders (in the temporary directory), followed by the cloud's pid.
STATE_PREFIX = "scaler-fake-cloud-units-"
#: How often the runners look at moto's state.
STEP_SECONDS = 0.2


class FakeCloud:
    def __init__(
        self,
        port: int = 0,
        boot_seconds: float = 0.0,
        log_directory: Path | None = None,
        require_credentials: bool = False,
        spot_notice_seconds: float = SPOT_NOTICE_SECONDS,
        *,
        images: Iterable[Image] = (),
        cache_directory: Path | None = None,
        isolate_network: bool = False,
        container_engine: str | None = None,
        package_index: str = UPSTREAM_INDEX,
        ami_has_uv: bool = False,
    ) -> None:
        # Must be set before moto's IAM backend is first used: AWS-managed policies (ecsTaskExecutionRole's) exist.
        os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"
        if require_credentials:  # requests are checked against moto's IAM users, as AWS would
            os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        self.port = port or _free_port()
        self._network: Any = None
        if isolate_network:
            from scaler_rehearsal.fake_cloud.network import UnitNetwork

            self._network = UnitNetwork.create()  # NetworkError naming what is missing (root, nft, ip)
            self._network.open_endpoint(self.port)
        self.host = self._network.endpoint_address if self._network is not None else "127.0.0.1"
        self.endpoint_url = f"http://{self.host}:{self.port}"
        threading.Thread(target=remove_leftover_state, name="fake-cloud-leftovers", daemon=True).start()
        self._state_directory = Path(tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{os.getpid()}-"))
        # without a folder of the caller's, the logs go with the units' folders: nothing of a run is left behind
        self._log_directory = log_directory or self._state_directory / "logs"
        self._log_directory.mkdir(parents=True, exist_ok=True)
        cache = cache_directory or default_cache_directory()
        sandbox = Sandbox(self._state_directory, self._state_directory / "installer-cache", machine_interpreters(),
                          _uv(), ami_has_uv=ami_has_uv, commands_cache=cache / "system-bin",
                          environments_cache=cache / "image-environments")  # fmt: skip
        settings = FakeCloudRunnerSettings(
            self.endpoint_url, sandbox, boot_seconds, self._log_directory, spot_notice_seconds,
            ImageCatalogue(images), self._network, container_engine,
        )  # fmt: skip
        self._ecs = EcsRunner(settings)
        self._ec2 = Ec2Runner(settings)
        self._batch = BatchContainers(settings)
        self._package_index = PackageIndex(package_index, cache=cache)
        self._uninstall_batch: Any = None
        self._stop = threading.Event()
        #: a reset or an API call's follow-up never meets a runner step half-way (re-entrant: a step that
        #: terminates an instance goes through the patched API)
        self._lock = threading.RLock()
        self._unpatch: list[tuple[type, str, object]] = []
        self._undo_moto: list[Callable[[], None]] = []  #: what undoes the moto_* patches
        self._thread = threading.Thread(target=self._run, name="fake-cloud-runners", daemon=True)
        self._servers: list[Any] = []
        self._http_threads: list[threading.Thread] = []

    @property
    def log_directory(self) -> Path:
        return self._log_directory

    def start(self) -> FakeCloud:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        from moto.moto_api import state_manager
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        self._ecs.settings.sandbox.prepare()
        self._undo_moto = [moto_costs.install(), moto_requests.install(), moto_dispatch.install()]
        if self._ecs.settings.container_engine is not None:
            from scaler_rehearsal.fake_cloud.containers import remove_leftover_containers

            remove_leftover_containers(self._ecs.settings.container_engine)
        moto_app = DomainDispatcherApplication(create_backend_app)
        with_faults = with_fault_route(
            moto_app, (self.interrupt_spot_task, self.interrupt_spot_instance, self._reclaim_batch_job)
        )
        application = _with_package_index(with_faults, self._package_index)
        hosts = ["127.0.0.1"] if self.host == "127.0.0.1" else [self.host, "127.0.0.1"]
        for host in hosts:  # OSError when the port is taken
            server = make_server(host, self.port, application, threaded=True)
            self._servers.append(server)
            thread = threading.Thread(target=server.serve_forever, name=f"fake-cloud-http-{host}", daemon=True)
            self._http_threads.append(thread)
            thread.start()
        # ECS tasks keep the status the runners give them (moto would otherwise step them towards STOPPED).
        state_manager.set_transition(model_name="ecs::task", transition={"progression": "manual", "times": 10**9})
        self._follow_stops()
        self._uninstall_batch = install(self._batch)
        self._thread.start()
        return self

    def _follow_stops(self) -> None:
        """moto answers run_task/run_instances with RUNNING/running and stop_task/terminate_instances with
        STOPPED/terminated at once; right after each call the runners make that PROVISIONING/pending (booting)
        and STOPPING/shutting-down (until the resource's processes have exited), as AWS reports it."""
        from moto.ec2.models.instances import InstanceBackend
        from moto.ecs.models import EC2ContainerServiceBackend

        def launched_tasks(tasks: Any, _call: dict[str, Any]) -> None:
            self._ecs.launched_by_api(time.monotonic(), list(tasks))

        def launched_instances(reservation: Any, call: dict[str, Any]) -> None:
            # spot instances of run_instances' InstanceMarketOptions (moto's spot requests and fleets have theirs)
            spot = bool(call.get("instance_market_options"))
            self._ec2.launched_by_api(time.monotonic(), time.time(), list(reservation.instances), spot)

        def stopped_task(task: Any, _call: dict[str, Any]) -> None:
            self._ecs.stopped_by_api(time.monotonic(), [task.task_arn])

        def terminated(results: Any, _call: dict[str, Any]) -> None:
            self._ec2.terminated_by_api(time.monotonic(), time.time(), [instance.id for instance, _ in results])

        self._patch(EC2ContainerServiceBackend, "run_task", launched_tasks)
        self._patch(EC2ContainerServiceBackend, "stop_task", stopped_task)
        self._patch(InstanceBackend, "run_instances", launched_instances)
        self._patch(InstanceBackend, "terminate_instances", terminated)

    def _patch(self, owner: type, name: str, follow: Any) -> None:
        """`owner.name` runs moto's own method and then `follow(result, keyword arguments)`, both under the runners'
        lock: a runner's step between the two would see (and start) a resource the API call has not announced."""
        original = getattr(owner, name)
        lock = self._lock

        def call_and_follow(backend: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                result = original(backend, *args, **kwargs)
                follow(result, kwargs)
            return result

        setattr(owner, name, call_and_follow)
        self._unpatch.append((owner, name, original))

    def reclaim_batch_job(self, job_id: str) -> bool:
        """A running Batch job's spot instance is reclaimed: the job fails with "Host EC2 ... terminated."."""
        return self._batch.reclaim(job_id)

    def interrupt_spot_task(self, task_arn: str) -> str | None:
        """A Fargate Spot interruption of a running ECS task (what ECS does at the two-minute warning); None when
        no running task has that ARN."""
        with self._lock:
            if not self._ecs.interrupt(time.monotonic(), time.time(), task_arn):
                return None
        return f"ECS task {task_arn}: Fargate Spot interruption (stopCode SpotInterruption), SIGTERM sent"

    def interrupt_spot_instance(self, instance_id: str) -> str | None:
        """An EC2 spot interruption: the two-minute warning in the instance's spot request now, its termination when
        the notice ends (`set_spot_notice_seconds`). None when no instance has that id; `faults.Refused` when it is
        not a running spot instance."""
        if not instance_id.startswith("i-"):
            return None
        with self._lock:
            return self._ec2.interrupt(time.monotonic(), time.time(), instance_id)

    def _reclaim_batch_job(self, job_id: str) -> str | None:
        if not self.reclaim_batch_job(job_id):
            return None
        return f"Batch job {job_id}: its spot host was reclaimed"

    @property
    def state_directory(self) -> Path:
        """The units' folders, and the image's and AMI's tools (removed when the cloud stops)."""
        return self._state_directory

    def image_environment(self, repository: str) -> Path | None:
        """The environment of the image of `repository` (`image_environments.py`), once a container of it started."""
        return self._ecs.settings.sandbox.image_environment(repository)

    @property
    def network(self) -> Any:
        """The units' network (`network.UnitNetwork`) when the cloud isolates them, else None."""
        return self._network

    def set_boot_seconds(self, seconds: float) -> None:
        """The boot delay of resources launched from now on (the runners share their settings)."""
        self._ecs.settings.boot_seconds = seconds

    def set_ami_has_uv(self, has_uv: bool) -> None:
        """Whether EC2 instances launched from now on find `uv` on their AMI (one baked for scaler) or boot as stock
        Amazon Linux 2023, which has none."""
        self._ec2.settings.sandbox.ami_has_uv = has_uv

    def set_spot_notice_seconds(self, seconds: float) -> None:
        """How long EC2 spot instances interrupted from now on run on before EC2 terminates them."""
        self._ec2.settings.spot_notice_seconds = seconds

    def reset(self) -> None:
        """Stop every launched process and forget every resource (between tests)."""
        import urllib.request

        with self._lock:
            for runner in (self._ecs, self._ec2):
                runner.close()
                runner.launches.clear()
            self._ec2.notices.clear()
            self._batch.close(join_seconds=30.0)
            request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
            urllib.request.urlopen(request, timeout=60).close()

    def stop(self, remove_folders: bool = True) -> None:
        """Stop every launched process, the runners and the servers. The units' folders (`state_directory`) are
        removed too unless `remove_folders` is false: then the caller removes them (`remove_folders()`, which may take
        a while on a loaded disk), or the next fake cloud started on this machine does."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self._ecs.close()
        self._ec2.close()
        self._batch.close()
        if self._uninstall_batch is not None:
            self._uninstall_batch()
            self._uninstall_batch = None
        for owner, name, original in self._unpatch:
            setattr(owner, name, original)
        self._unpatch = []
        for undo in reversed(self._undo_moto):
            undo()
        self._undo_moto = []
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._http_threads:
            thread.join(5)
        self._servers, self._http_threads = [], []
        self._package_index.close()
        if self._network is not None:
            self._network.close()
        if remove_folders:
            self.remove_folders()

    def remove_folders(self) -> None:
        """The units' folders and the image's and AMI's tools, once the cloud is stopped."""
        shutil.rmtree(self._state_directory, ignore_errors=True)

    def __enter__(self) -> FakeCloud:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                for runner in (self._ecs, self._ec2):
                    try:
                        runner.step(now)
                    except Exception:  # a runner bug must not stop the cloud; logged, and the next step retries
                        logger.exception("fake cloud: a runner step failed")
                try:
                    settle_array_parents()
                except Exception:
                    logger.exception("fake cloud: settling array jobs failed")
            self._stop.wait(STEP_SECONDS)


def remove_leftover_state() -> None:
    """The units' folders of fake clouds that are gone and did not remove them (killed, or stopped while the folders
    were still being removed: their names carry their pid). In the background of a new cloud: a large leftover must
    not delay its start."""
    for folder in Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*-*"):
        pid = folder.name[len(STATE_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def default_cache_directory() -> Path:
    """Where the package index mirror keeps the files it downloaded from PyPI between runs (`index-files/`), the
    units' mirror of this machine's commands (`system-bin/`) and the images' environments (`image-environments/`):
    `$XDG_CACHE_HOME/scaler-fake-cloud`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scaler-fake-cloud"


def _uv() -> Path:
    """The uv the units' image and AMI tools run (the `uv` distribution, a dependency of the fake-cloud extra)."""
    try:
        from uv import find_uv_bin
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            raise RuntimeError("the fake cloud needs uv: pip install 'scaler-compute[fake-cloud]'") from None
        return Path(found)
    return Path(find_uv_bin())


def _with_package_index(application: Callable[..., Any], index: PackageIndex) -> Callable[..., Any]:
    def dispatch(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if index.handles(environ.get("PATH_INFO", "")):
            return index(environ, start_response)
        return application(environ, start_response)

    return dispatch


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
