# scaler's worker image: what the ECS tasks and AWS Batch jobs of the cloud managers run. The image has an environment
# of its own (SCALER_IMAGE_VENV: DEFAULT_PYTHON with BAKED_REQUIREMENTS, bytecode compiled, made here): a container of
# that Python whose launch lists no PYTHON_REQUIREMENTS runs in it as it is. Any other makes a fresh virtual
# environment with PYTHON_VERSION and installs BAKED_REQUIREMENTS (from the image's cache) and PYTHON_REQUIREMENTS
# (from the package index). Then the entrypoint runs the container's command, or `sh -c "$COMMAND"`
# (docs/worker_managers.md, "The worker image"). scaler_fake_cloud runs the same entrypoint for its units, so a
# rehearsal that boots there boots in AWS.
#
#   docker build -f docker/worker.Dockerfile -t scaler-worker .
#   aws ecr create-repository --repository-name scaler-worker
#   aws ecr get-login-password | docker login --username AWS --password-stdin <account>.dkr.ecr.<region>.amazonaws.com
#   docker tag scaler-worker <account>.dkr.ecr.<region>.amazonaws.com/scaler-worker:latest
#   docker push <account>.dkr.ecr.<region>.amazonaws.com/scaler-worker:latest
#
# Build arguments:
#   BASE_IMAGE           a Debian or Ubuntu image (default debian:12-slim)
#   UV_IMAGE             where uv comes from (an image with /uv; default Astral's)
#   PYTHONS              the Pythons the image offers, installed with uv (PYTHON_VERSION must name one of them);
#                        empty: only the base image's python3.X
#   DEFAULT_PYTHON       the Python of a launch that names none, and of the image's environment
#   BAKED_REQUIREMENTS   requirements in every container: in the image's environment, and cached in the image for a
#                        fresh one, e.g. "scaler-compute[aws]==1.0" for an image that needs nothing at start
ARG BASE_IMAGE=debian:12-slim
ARG UV_IMAGE=ghcr.io/astral-sh/uv:latest
FROM ${UV_IMAGE} AS uv

FROM ${BASE_IMAGE}
ARG PYTHONS="3.10 3.11 3.12 3.13"
ARG DEFAULT_PYTHON=3.12
ARG BAKED_REQUIREMENTS=""
COPY --from=uv /uv /usr/local/bin/uv
ENV UV_PYTHON_INSTALL_DIR=/opt/python \
    UV_PYTHON_BIN_DIR=/usr/local/bin \
    UV_PYTHON_DOWNLOADS=never \
    UV_CACHE_DIR=/opt/uv-cache \
    SCALER_IMAGE_PYTHON=${DEFAULT_PYTHON} \
    SCALER_IMAGE_REQUIREMENTS=${BAKED_REQUIREMENTS} \
    SCALER_WORKER_VENV=/opt/scaler/venv \
    SCALER_IMAGE_VENV=/opt/scaler/image-venv
RUN if [ -n "$PYTHONS" ]; then UV_PYTHON_DOWNLOADS=automatic uv python install $PYTHONS; fi \
    && uv venv --python "$DEFAULT_PYTHON" "$SCALER_IMAGE_VENV" \
    && if [ -n "$BAKED_REQUIREMENTS" ]; then \
         printf '%s\n' "$BAKED_REQUIREMENTS" | tr ';' '\n' > /tmp/baked.txt \
         && uv pip install --compile-bytecode --python "$SCALER_IMAGE_VENV/bin/python" -r /tmp/baked.txt \
         && rm /tmp/baked.txt; \
       fi
COPY rehearsal/scaler_rehearsal/fake_cloud/image/worker-entrypoint.sh /usr/local/bin/scaler-worker-entrypoint
ENTRYPOINT ["/bin/sh", "/usr/local/bin/scaler-worker-entrypoint"]
CMD []
