# The image of the AWS Batch jobs an `aws_hpc` manager submits: the worker image (docker/worker.Dockerfile) with
# this checkout of scaler, and boto3, baked in, so that a job needs nothing from the index at start.
#
#   docker build -f docker/worker.Dockerfile -t scaler-worker .
#   docker build -f docker/batch-job.Dockerfile --build-arg DEFAULT_PYTHON=3.12 -t scaler-batch-job .
#   docker tag scaler-batch-job <account>.dkr.ecr.<region>.amazonaws.com/scaler-batch-job:latest && docker push ...
#   python -m scaler.worker_manager.aws_hpc.provision config/aws_batch.toml --image <that image>
#
# Build it with DEFAULT_PYTHON set to the clients' Python (`provision` sets the job definition's PYTHON_VERSION to
# it): a job of that Python runs in the image's environment as it is (scaler and boto3, bytecode compiled, made here),
# and installs nothing at start. The job definition's command runs the job runner with the job's parameters:
#   python3 -m scaler.worker_manager.aws_hpc.job_runner Ref::payload Ref::s3_bucket Ref::s3_key Ref::result_prefix
# Add the packages your tasks import (numpy, pandas, ...) to /opt/scaler/baked.txt below (the job definition's
# PYTHON_REQUIREMENTS works too, at the cost of a fresh environment and an install at each job's start).
ARG WORKER_IMAGE=scaler-worker:latest
FROM ${WORKER_IMAGE}
ARG DEFAULT_PYTHON=3.12
ENV SCALER_IMAGE_VENV=/opt/scaler/image-venv
COPY pyproject.toml README.md /src/scaler/
COPY scaler /src/scaler/scaler
RUN uv build --wheel --out-dir /opt/scaler/wheels /src/scaler && rm -rf /src/scaler \
    && echo "scaler[aws] @ file://$(ls /opt/scaler/wheels/*.whl)" > /opt/scaler/baked.txt \
    && rm -rf "$SCALER_IMAGE_VENV" && uv venv --python "$DEFAULT_PYTHON" "$SCALER_IMAGE_VENV" \
    && uv pip install --compile-bytecode --python "$SCALER_IMAGE_VENV/bin/python" -r /opt/scaler/baked.txt
ENV SCALER_IMAGE_PYTHON=${DEFAULT_PYTHON} \
    SCALER_IMAGE_REQUIREMENTS="-r /opt/scaler/baked.txt"
