# The voltpack image: one image for `voltpack operator`, `voltpack agent` and `voltpack api`
# (the Helm chart in helm/voltpack runs all three from it). Build from the repository root,
# with a registry (Docker with BuildKit, the default since Docker 23: RUN --mount below):
#   docker build -t voltpack:0.1.0 .
# or without a Docker daemon or a registry, from Debian's packages (what CI does; as root):
#   make image        # scripts/base_image.sh, then buildah bud --build-arg BASE=<that base>
#                     # (docs/install.md, "Building the image")
# BASE is any Debian-like image with python3 >= 3.11 and its venv module: python:3.12-slim-bookworm
# (the default) or the debootstrap base of scripts/base_image.sh (Debian's Python 3.11).
# The dependencies are the locked versions of requirements/runtime.lock, each checked against
# its hash, in a virtual environment in /opt/voltpack (without pip in the final image).
# Runs as an unprivileged user (uid 10001) with nothing to write but /tmp, so it works with a
# read-only root file system. The agent finds the NVIDIA driver's libnvidia-ml through the
# NVIDIA container toolkit (or a mounted driver directory); the image ships no driver.
ARG BASE=python:3.12-slim-bookworm

FROM ${BASE} AS build
WORKDIR /src
# python3 -m venv works on both bases (Debian's python3 has ensurepip but no pip of its own)
RUN python3 -m venv /opt/voltpack
COPY requirements/runtime.lock ./requirements/
# the dependencies at their locked versions, each checked against its hash. Behind a
# TLS-intercepting proxy, pip trusts the proxy's CA bundle passed as the build secret pip_cert
# (`make image` passes the host's $PIP_CERT); a secret is mounted for one RUN and never stored
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
    && /opt/voltpack/bin/pip install --no-cache-dir --require-hashes -r requirements/runtime.lock
COPY pyproject.toml README.md LICENSE ./
COPY voltpack ./voltpack
# (pip fetches the build backend, setuptools, to build voltpack's wheel); pip is not shipped
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
    && /opt/voltpack/bin/pip install --no-cache-dir --no-deps . \
    && /opt/voltpack/bin/pip uninstall --yes --quiet pip setuptools

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/voltpack/bin:$PATH \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
# LightGBM's wheel loads the OpenMP runtime, which python:*-slim lacks (the debootstrap base has it)
# hadolint ignore=DL3008
RUN if ! dpkg-query --show libgomp1 >/dev/null 2>&1; then \
      apt-get update && apt-get install -y --no-install-recommends libgomp1 \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
    && groupadd --gid 10001 voltpack \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin voltpack
COPY --from=build /opt/voltpack /opt/voltpack
# Gavel's measured throughput table (MIT), the default for the operator's training allocation
COPY data/gavel/simulation_throughputs.json data/gavel/LICENSE-gavel.txt /usr/share/voltpack/data/gavel/
ENV VOLTPACK_DATA_DIR=/usr/share/voltpack/data
USER 10001:10001
# agent metrics, operator metrics, admin API
EXPOSE 9410 9411 8080
ENTRYPOINT ["voltpack"]
CMD ["--help"]
