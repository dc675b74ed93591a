# syntax=docker/dockerfile:1
# One image, every operator: tf-, pytorch-, mpi-, xgboost-, paddle-, jax-operator and the all-in-one
# training-operator are console scripts of the same venv; a Deployment picks one with `command`.
# Build from the repository root:
#   docker build -t ghcr.io/example/kubeflow-operators-py:0.1.0 .

ARG PYTHON_IMAGE=python:3.11-slim
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9

FROM ${UV_IMAGE} AS uv

FROM ${PYTHON_IMAGE} AS builder
COPY --from=uv /uv /usr/local/bin/uv
# Use the image's interpreter (the final stage has the same one at the same path, which the
# venv's symlinks and script shebangs point at); compile bytecode now because the root
# filesystem is read-only at run time.
ENV UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON=/usr/local/bin/python3.11 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src

# Third-party dependencies first, from the lock alone, so source edits reuse this layer.
COPY pyproject.toml uv.lock ./
COPY packages/common/pyproject.toml packages/common/
COPY packages/tf_operator/pyproject.toml packages/tf_operator/
COPY packages/pytorch_operator/pyproject.toml packages/pytorch_operator/
COPY packages/mpi_operator/pyproject.toml packages/mpi_operator/
COPY packages/xgboost_operator/pyproject.toml packages/xgboost_operator/
COPY packages/paddle_operator/pyproject.toml packages/paddle_operator/
COPY packages/jax_operator/pyproject.toml packages/jax_operator/
COPY packages/trainer_operator/pyproject.toml packages/trainer_operator/
COPY packages/training_operator/pyproject.toml packages/training_operator/
COPY packages/testing/pyproject.toml packages/testing/
COPY packages/kfjob/pyproject.toml packages/kfjob/
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-install-workspace

# Then the runtime workspace packages, installed as wheels (not editable: /src is not
# copied on). The test kit (jobcontroller-testing, a dev dependency) is not installed, and the
# jobcontroller wheel leaves jobcontroller/testing out.
COPY packages/ packages/
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-editable

FROM ${PYTHON_IMAGE}
# Only the venv: no uv, no sources, no compilers.
COPY --from=builder /app/.venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532 is the conventional "nonroot" id; the Deployments run as it too (runAsNonRoot needs a
# numeric USER to verify).
USER 65532:65532
CMD ["tf-operator", "run"]
