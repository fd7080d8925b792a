"""What an AWS Batch job of `aws_hpc` runs: one task's bundle, from the job's parameters to S3.

    python3 -m scaler.worker_manager.aws_hpc.job_runner PAYLOAD S3_BUCKET S3_KEY RESULT_PREFIX

(the job definition passes `Ref::payload Ref::s3_bucket Ref::s3_key Ref::result_prefix`). The bundle is PAYLOAD
(gzipped, base64) or, when PAYLOAD is "none", the S3 object S3_KEY, where "ARRAY_INDEX" stands for the child's
`AWS_BATCH_JOB_ARRAY_INDEX`. The outcome is written to `RESULT_PREFIX/<AWS_BATCH_JOB_ID>.bin` (gzipped), also for
a task that raised: the job then exits 1, so that Batch shows it FAILED. Exit 2: the job could not read its bundle
or write its outcome (the message on stderr, in the job's CloudWatch log, says why). Exit 3: its manager's lease
ran out (`job_lease`): the task is not run, or stopped. Needs boto3 and the modules
the task's function uses, with the client's Python version.
"""

from __future__ import annotations

import base64
import gzip
import os
import sys

from scaler.payload.remote_bundle import BundleError
from scaler.protocol import messages as m
from scaler.worker.task_execution import run_bundle
from scaler.worker_manager.aws_hpc.job_lease import EXIT_LEASE_EXPIRED, watch_lease

#: The job parameters this runner reads (the job definition's `Ref::` names), with the value meaning "not given".
JOB_PARAMETERS = ("payload", "s3_bucket", "s3_key", "result_prefix")
NONE = "none"


def read_bundle(payload: str, bucket: str, key: str, s3: object) -> bytes:
    if payload != NONE:
        return gzip.decompress(base64.b64decode(payload))
    key = key.replace("ARRAY_INDEX", os.environ.get("AWS_BATCH_JOB_ARRAY_INDEX", "0"))
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()  # type: ignore[attr-defined]
    return gzip.decompress(body)


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 4:
        print("usage: python3 -m scaler.worker_manager.aws_hpc.job_runner PAYLOAD S3_BUCKET S3_KEY RESULT_PREFIX",
              file=sys.stderr)  # fmt: skip
        return 2
    payload, bucket, key, result_prefix = arguments
    job_id = os.environ.get("AWS_BATCH_JOB_ID", "")
    if not job_id:
        print("AWS_BATCH_JOB_ID is not set: this runs inside an AWS Batch job", file=sys.stderr)
        return 2
    import boto3

    s3 = boto3.client("s3")
    stale = watch_lease(s3, job_id)
    if stale is not None:
        print(f"job {job_id}: not running its task: {stale}", file=sys.stderr)
        return EXIT_LEASE_EXPIRED
    try:
        bundle = read_bundle(payload, bucket, key, s3)
        outcome = run_bundle(bundle, on_log=lambda log: print(log.text, end="", flush=True))
    except (BundleError, OSError, ValueError) as error:
        print(f"job {job_id}: cannot read its task: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # an S3 error: the message names the code
        print(f"job {job_id}: cannot fetch its task from s3://{bucket}/{key}: {error}", file=sys.stderr)
        return 2
    try:
        s3.put_object(Bucket=bucket, Key=f"{result_prefix}/{job_id}.bin", Body=gzip.compress(outcome, compresslevel=1))
    except Exception as error:
        print(f"job {job_id}: cannot write its result to s3://{bucket}/{result_prefix}/: {error}", file=sys.stderr)
        return 2
    return 0 if _succeeded(outcome) else 1


def _succeeded(outcome: bytes) -> bool:
    from scaler.payload.remote_bundle import open_outcome

    result, _objects, _logs = open_outcome(outcome)
    return result.status is m.ResultStatus.SUCCESS


if __name__ == "__main__":
    sys.exit(main())
