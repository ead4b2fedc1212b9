# The voltpack image: one image for `voltpack operator`, `voltpack agent` and `voltpack api`
# (the Helm chart in helm/voltpack runs all three from it). Build from the repository root:
#   docker build -t voltpack:0.1.0 .
# Runs as an unprivileged user (uid 10001) with nothing to write but /tmp, so it works with a
# read-only root file system. The agent finds the NVIDIA driver's libnvidia-ml through the
# NVIDIA container toolkit (or a mounted driver directory); the image ships no driver.

FROM python:3.12-slim-bookworm AS build
WORKDIR /src
COPY requirements/runtime.lock ./requirements/
# the dependencies at their locked versions, each checked against its hash
RUN pip wheel --no-cache-dir --wheel-dir /wheels --require-hashes -r requirements/runtime.lock
COPY pyproject.toml README.md LICENSE ./
COPY voltpack ./voltpack
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.12-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
RUN groupadd --gid 10001 voltpack \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin voltpack
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels
# Gavel's measured throughput table (MIT), the default for the operator's training allocation
COPY data/gavel/simulation_throughputs.json data/gavel/LICENSE-gavel.txt /usr/share/voltpack/data/gavel/
ENV VOLTPACK_DATA_DIR=/usr/share/voltpack/data
USER 10001:10001
# agent metrics, operator metrics, admin API
EXPOSE 9410 9411 8080
ENTRYPOINT ["voltpack"]
CMD ["--help"]
