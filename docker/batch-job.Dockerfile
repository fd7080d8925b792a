# The image of the AWS Batch jobs an `aws_hpc` manager submits: Python (the clients' version), boto3 and scaler.
#
#   docker build -f docker/batch-job.Dockerfile --build-arg PYTHON_VERSION=3.12 -t scaler-batch-job .
#   docker tag scaler-batch-job <account>.dkr.ecr.<region>.amazonaws.com/scaler-batch-job:latest && docker push ...
#   python -m scaler.worker_manager.aws_hpc.provision config/aws_batch.toml --image <that image>
#
# The job definition's command runs the job runner with the job's parameters:
#   python3 -m scaler.worker_manager.aws_hpc.job_runner Ref::payload Ref::s3_bucket Ref::s3_key Ref::result_prefix
# Add the packages your tasks import (numpy, pandas, ...) to the pip line.
ARG PYTHON_VERSION=3.12
FROM python:${PYTHON_VERSION}-slim
COPY . /src/scaler
RUN pip install --no-cache-dir "/src/scaler[aws]" && rm -rf /src/scaler
ENTRYPOINT []
CMD ["python3", "-m", "scaler.worker_manager.aws_hpc.job_runner"]
