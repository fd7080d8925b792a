"""The worker managers' settings sections (`scaler_worker_manager <type>`, the `[[worker_manager]]` entries of a
`scaler FILE` stack): `WorkerManagerSettings` and one section per type, which `manager_types.MANAGER_TYPES` names.

They are declared as the others are (`scaler.config.sections`, whose names for them still work), in a module of
their own so that the processes that never manage workers (the scheduler, a worker, a storage server, a cluster
host) do not build them when they import their own sections: dataclasses compiles every section's methods at import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from scaler.config.fields import setting
from scaler.config.sections import WorkerSettings


@dataclass(frozen=True, kw_only=True)
class WorkerManagerSettings(WorkerSettings):
    """Settings every `scaler_worker_manager <type>` shares; the worker settings are passed on to its workers."""

    scheduler_address: str = setting(help="scheduler the manager connects to", positional=True)
    worker_manager_id: str = setting(
        "", help="stable id, unique per scheduler (default: <type>@<host name>)", short=("-wmi",)
    )
    worker_scheduler_address: str | None = setting(
        None, help="scheduler address given to the workers (default: scheduler_address)", short=("-wsa",)
    )
    max_task_concurrency: int = setting(
        os.cpu_count() or 1,
        shown_default="CPU count",
        help="most workers at once; -1 for no limit",
        short=("-mtc", "-mw"),
        aliases=("max_workers",),  # -mw/--max-workers: the 1.12-1.15 worker adapters
        ge=-1,
    )
    scale_down_cooldown_seconds: float = setting(
        0, help="keep surplus workers this long after the scheduler's target dropped before stopping them",
        short=("-sdc",), ge=0,
    )  # fmt: skip
    billing_granularity_seconds: float = setting(
        0, help="the provider bills a unit by this period (e.g. 3600 for hourly, 1 for EC2 per second); a surplus "
        "unit is kept until its paid time ends; 0: billing ignored", ge=0,
    )  # fmt: skip
    billing_minimum_seconds: float = setting(
        0, help="the shortest time a unit is billed for (e.g. 60 for EC2 Linux)", ge=0
    )
    boot_timeout_seconds: float = setting(
        300, help="a unit (process, task, instance) still booting after this long is stopped and replaced; "
        "it counts as a failed launch", gt=0,
    )  # fmt: skip
    max_waiting_units: int = setting(
        10, help="most units waiting at once in their provider's queue (Slurm jobs pending, pods unschedulable; "
        "launches not listed yet count too): more launches wait for one of them to start or go", gt=0,
    )  # fmt: skip
    worker_cost_per_hour: float = setting(
        0, help="what one worker of this manager costs per hour, in any currency (the cost policy and the spend "
        "rate read it); 0: free or unknown", ge=0,
    )  # fmt: skip
    expected_boot_seconds: float = setting(
        -1, help="how long a launched worker takes to connect (the cost policy plans with it); -1: measure it",
        ge=-1,
    )  # fmt: skip
    min_workers: int = setting(
        0, help="warm capacity: workers kept even when idle, whatever the scaling policy (at most the most workers)",
        ge=0,
    )  # fmt: skip
    buffer_workers: int = setting(
        0, help="warm capacity: idle workers kept beyond what the queue needs, so that a burst does not wait for a "
        "boot (every scaling policy; not added while a budget holds this manager back)", ge=0,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class NativeWorkerManagerConfig(WorkerManagerSettings):
    """`scaler_worker_manager baremetal_native`: local worker processes, fixed or scheduler-driven."""

    max_task_concurrency: int = setting(
        os.cpu_count() or 1,
        shown_default="CPU count",
        help="most workers at once (-1: no limit); the exact pool size in fixed mode",
        short=("-mtc", "-mw", "-n"),
        aliases=("num_of_workers", "max_workers"),
        ge=-1,
    )
    mode: str = setting("dynamic", help="dynamic: the scheduler decides; fixed: start exactly -mtc workers",
                        choices=("dynamic", "fixed"))  # fmt: skip
    worker_type: str | None = setting(None, help="prefix of worker ids (default NAT for dynamic, FIX for fixed)")


@dataclass(frozen=True, kw_only=True)
class CloudUnitSettings:
    """What the cloud managers that start workers (ECS, EC2) send their units: docs/guide/bursting.md."""

    environment: str = setting(
        "sync", help="what the units install at boot besides this build of scaler: sync (the environment this manager "
        "runs in: installed distributions pinned, local ones as wheels), requirements (the explicit list only) or "
        "image (nothing: the image has everything)", choices=("sync", "requirements", "image"),
    )  # fmt: skip
    environment_exclude: str = setting(
        "", help="comma-separated distributions environment = sync leaves out (e.g. ones only this OS has)"
    )
    s3_bucket: str = setting(
        "", help="the manager's S3 bucket (wheels, unit manifests and boot reports), created when missing; "
        "default: scaler-<account id>-<region>",
    )  # fmt: skip
    lease_seconds: float = setting(
        300, help="a unit that has lost its scheduler (the laptop gone, asleep or cut off) ends itself after this "
        "long (plus a minute at most); a manager restarted within it adopts its units", gt=0,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ECSWorkerManagerConfig(CloudUnitSettings, WorkerManagerSettings):
    """`scaler_worker_manager aws_raw_ecs`: whole workers in AWS ECS Fargate tasks."""

    aws_access_key_id: str | None = setting(None, help="AWS access key (default: the AWS credential chain)")
    aws_secret_access_key: str | None = setting(None, help="AWS secret key (default: the AWS credential chain)")
    aws_region: str = setting("us-east-1", help="AWS region")
    aws_endpoint_url: str | None = setting(None, help="AWS API endpoint (e.g. a local moto server); default: AWS")
    ecs_subnets: str = setting(
        help='comma-separated subnets the Fargate tasks run in; "default": the default VPC\'s subnets'
    )
    ecs_security_groups: str = setting(
        "", help="comma-separated security groups of the tasks (default: the VPC's default security group)"
    )
    ecs_cluster: str = setting("scaler-cluster", help="ECS cluster, created when missing")
    ecs_task_image: str = setting(
        "", help="container image of the tasks (default: the project's worker image in this account's ECR, "
        "<account>.dkr.ecr.<region>.amazonaws.com/scaler-worker:latest, built as `scaler --docs worker_managers` "
        "shows)",
    )  # fmt: skip
    ecs_python_requirements: str = setting(
        "", help="';'-separated requirements the units install besides scaler (names, pins, name @ URL, local .whl "
        "files): the whole list with environment = requirements, added to the synced ones with sync",
    )  # fmt: skip
    ecs_python_version: str = setting(
        "", help="Python major.minor of the tasks (default and only allowed value: the client's, this Python's)"
    )
    ecs_task_definition: str = setting("scaler-task-definition", help="task definition family, created when missing")
    ecs_task_cpu: int = setting(4, help="vCPUs per task, which is also the number of workers per task", gt=0)
    ecs_task_memory: int = setting(30, help="memory per task in GB", gt=0)
    ecs_execution_role_arn: str | None = setting(
        None, help="task execution role (default: ecsTaskExecutionRole, created when missing)"
    )
    ecs_capacity_provider: str = setting(
        "FARGATE", help="FARGATE, or FARGATE_SPOT: cheaper capacity AWS may take back with a two-minute notice (the "
        "manager replaces the task at once and the scheduler drains its workers)", choices=("FARGATE", "FARGATE_SPOT"),
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class EC2WorkerManagerConfig(CloudUnitSettings, WorkerManagerSettings):
    """`scaler_worker_manager orb_aws_ec2`: workers on AWS EC2 instances, one worker per vCPU."""

    aws_region: str = setting(help="AWS region")
    aws_profile: str | None = setting(None, help="AWS profile of ~/.aws (default: the AWS credential chain)")
    aws_access_key_id: str | None = setting(None, help="AWS access key (default: the AWS credential chain)")
    aws_secret_access_key: str | None = setting(None, help="AWS secret key (default: the AWS credential chain)")
    aws_endpoint_url: str | None = setting(None, help="AWS API endpoint (e.g. scaler_fake_cloud); default: AWS")
    image_id: str | None = setting(
        None, help="AMI of the instances (default: the latest Amazon Linux 2023; Python and scaler installed at boot)"
    )
    python_version: str | None = setting(
        None, help="Python major.minor of the instances, installed with dnf at boot when the AMI lacks it (default and "
        "only allowed value: the client's, this Python's)",
    )  # fmt: skip
    requirements_txt: str | None = setting(
        None, help="requirements the units install besides scaler: a file path or the text (';' or new lines); the "
        "whole list with environment = requirements, added to the synced ones with sync",
    )  # fmt: skip
    instance_type: str = setting("t2.micro", help="EC2 instance type; one worker per vCPU")
    key_name: str | None = setting(None, help="EC2 key pair for SSH (default: none)")
    subnet_id: str | None = setting(None, help="subnet of the instances (default: the default VPC's)")
    security_group_ids: str = setting("", help="comma-separated security groups (default: the VPC's default)")
    instance_tags: str = setting("", help="extra tags of the instances: K=V,K=V")
    market_type: str = setting(
        "on-demand", help="on-demand, or spot: cheaper instances AWS may take back with a two-minute notice (the "
        "manager replaces the instance at once and the scheduler drains its workers)", choices=("on-demand", "spot"),
    )  # fmt: skip
    spot_max_price: float | None = setting(
        None, help="the most a spot instance may cost, USD per hour (default: the on-demand price)", gt=0
    )
    debug_dump_path: str | None = setting(None, help="write the instances' user data script here (for debugging)")


@dataclass(frozen=True, kw_only=True)
class KubernetesWorkerManagerConfig(WorkerManagerSettings):
    """`scaler_worker_manager kubernetes`: each worker a pod, through the Kubernetes API (`scaler --docs
    kubernetes`)."""

    k8s_image: str = setting(help="the workers' container image: one with this build of scaler and the tasks' packages")
    k8s_kubeconfig: str | None = setting(
        None, help="kubeconfig file (default: the pod's service account inside a cluster, else $KUBECONFIG or "
        "~/.kube/config)",
    )  # fmt: skip
    k8s_context: str | None = setting(None, help="context of the kubeconfig (default: its current context)")
    k8s_namespace: str | None = setting(None, help="namespace of the pods (default: the context's, else default)")
    k8s_cpu: str = setting("1", help="CPU of each worker's pod, its request and limit (a quantity: 1, 500m)")
    k8s_memory: str = setting("2Gi", help="memory of each worker's pod, its request and limit (a quantity: 2Gi)")
    k8s_service_account: str | None = setting(None, help="service account of the pods (default: the namespace's)")
    k8s_node_selector: str = setting("", help="node labels the pods need: KEY=VALUE,KEY=VALUE")
    k8s_tolerations: str = setting(
        "", help="taints the pods tolerate: KEY[=VALUE][:EFFECT],... (no VALUE: any value of KEY)"
    )
    k8s_pod_template: str | None = setting(
        None, help="a Pod (YAML or JSON) the worker pods are made from: its volumes, sidecars, security context ... "
        "(the settings above and the worker container's command go over it)",
    )  # fmt: skip
    k8s_grace_seconds: int = setting(
        30, help="how long a stopped worker's pod has to leave (its tasks go back to the queue) before SIGKILL", ge=0
    )


@dataclass(frozen=True, kw_only=True)
class AWSHPCWorkerManagerConfig(WorkerManagerSettings):
    """`scaler_worker_manager aws_hpc`: each task runs as an AWS Batch job."""

    job_queue: str = setting(help="AWS Batch job queue", short=("-q",))
    job_definition: str = setting(help="AWS Batch job definition", short=("-d",))
    s3_bucket: str = setting(help="S3 bucket for task payloads and results")
    aws_region: str = setting("us-east-1", help="AWS region")
    aws_endpoint_url: str | None = setting(None, help="AWS API endpoint (e.g. a local moto server); default: AWS")
    s3_prefix: str = setting("scaler-tasks", help="key prefix of the task objects in the bucket")
    max_concurrent_jobs: int = setting(100, help="most Batch jobs in flight per proxy worker", short=("-mcj",), gt=0)
    job_timeout_minutes: int = setting(60, help="a job running longer than this is stopped", gt=0)
    lease_seconds: float = setting(
        300, help="a job whose manager is gone (the laptop gone, asleep or cut off: its lease object in the bucket "
        "not renewed) ends itself after this long (plus a minute at most), and a job starting after it does not run",
        gt=0,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SymphonyWorkerManagerConfig(WorkerManagerSettings):
    """`scaler_worker_manager symphony`: each task runs as an IBM Symphony (SOAM) task."""

    service_name: str = setting(help="Symphony service the tasks are sent to", short=("-sn",))


@dataclass(frozen=True, kw_only=True)
class SlurmWorkerManagerConfig(WorkerManagerSettings):
    """`scaler_worker_manager slurm`: each worker a Slurm batch job (`scaler --docs slurm`)."""

    max_task_concurrency: int = setting(
        16, help="most workers (jobs, queued ones included) at once; -1 for no limit", short=("-mtc", "-mw"),
        aliases=("max_workers",), ge=-1,
    )  # fmt: skip
    slurm_partition: str = setting("", help="partition of the jobs (sbatch --partition; default: the cluster's)")
    slurm_account: str = setting("", help="account the jobs are charged to (sbatch --account; default: yours)")
    slurm_qos: str = setting("", help="quality of service of the jobs (sbatch --qos; default: the account's)")
    slurm_time_limit: str = setting(
        "", help="time limit of each job in Slurm's format: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS "
        "(sbatch --time; default: the partition's); its worker drains lifetime_drain_seconds before it and leaves",
    )  # fmt: skip
    slurm_cpus_per_worker: int = setting(
        1, help="processors of each job, for its worker's tasks (sbatch --cpus-per-task)", gt=0
    )
    slurm_memory_per_worker: str = setting(
        "", help="memory of each job in Slurm's format, e.g. 4G or 500M (sbatch --mem; default: the partition's)"
    )
    slurm_gres: str = setting("", help='generic resources of each job, e.g. "gpu:1" (sbatch --gres)')
    slurm_extra_directives: tuple[str, ...] = setting(
        (),
        help='more #SBATCH lines, e.g. "--constraint=skylake" "--reservation=r1" (after the manager\'s own: they win; '
        "the leading -- may be left out: constraint=skylake)",
    )
    slurm_job_prologue: str = setting(
        "", help="shell lines each job runs before its worker, e.g. 'module load python/3.11' or 'source "
        "~/venvs/x/bin/activate' (a TOML multi-line string: one command a line)",
    )  # fmt: skip
    slurm_worker_python: str = setting(
        "", help="the Python each job runs its worker with, with this version of scaler installed (default: this "
        "manager's own interpreter, on a file system the compute nodes share)",
    )  # fmt: skip
    slurm_commands_folder: str = setting(
        "", help="the folder of Slurm's commands sbatch, squeue, scancel, sinfo and sacct (default: found on PATH)"
    )
    slurm_output_folder: str = setting(
        "", help="where each job writes its output, <folder>/<job id>.out, on a file system the compute nodes share "
        "(default: ~/.cache/scaler/slurm/<manager id>)",
    )  # fmt: skip
    slurm_poll_seconds: float = setting(
        2, help="how often the manager asks squeue about its jobs (each ask costs the Slurm controller a request)", gt=0
    )
    slurm_dry_run: bool = setting(
        False, help="print the job script the manager would submit, check it with sbatch --test-only, and exit: "
        "nothing is submitted",
    )  # fmt: skip
