# syntax=docker/dockerfile:1
#
# One image for every berth component: `berth extender`, `berth operator` and the CLI.
#
#   docker build -t berth:dev .                      (or: podman build -t berth:dev .)
#   docker run --rm berth:dev --help
#   bash hack/build-image.sh                          (buildah, no daemon; see the README)
#
# Two stages: the first builds berth's wheel and installs it with its pinned dependencies
# (requirements.lock) into a virtualenv at /opt/berth; the second copies only that virtualenv
# onto the same Python base. The runtime runs as an unprivileged user (65532) and writes nothing
# outside /tmp (bytecode is compiled at build time), so it runs with readOnlyRootFilesystem and an
# emptyDir on /tmp, as the Helm chart does.
#
# PYTHON_IMAGE is any Debian-like image with `python3` (3.11 or newer, with its venv module),
# groupadd and useradd: the public python image by default, or a base made from Debian's own
# packages (hack/build-image.sh makes one with mmdebstrap).
#
# The package index: pip reads an optional build secret `pip.conf` (and `pip-ca`, a CA bundle the
# pip.conf may name as its `cert`), mounted only while pip runs, so an index URL, its credentials
# and a private CA are never written into a layer:
#
#   docker build --secret id=pip.conf,src=$HOME/.config/pip/pip.conf -t berth:dev .

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------- build
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PIP_CONFIG_FILE=/run/secrets/pip.conf \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src

RUN --mount=type=secret,id=pip.conf --mount=type=secret,id=pip-ca \
    python3 -m venv /opt/berth \
 && /opt/berth/bin/python -m pip install --quiet "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0"

# The runtime dependencies first, pinned by requirements.lock: this layer stays cached while
# only berth's own code changes.
COPY pyproject.toml requirements.lock ./
RUN --mount=type=secret,id=pip.conf --mount=type=secret,id=pip-ca \
    python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
      > /tmp/runtime-requirements.txt \
 && /opt/berth/bin/python -m pip install --quiet -c requirements.lock -r /tmp/runtime-requirements.txt

# berth itself, as a wheel (the build context is narrowed by .dockerignore; berth/extender and
# berth/operator are links to extender/ and operator/, and the wheel holds their files).
COPY . .
RUN /opt/berth/bin/python -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir /dist . \
 && /opt/berth/bin/python -m pip install --quiet --no-deps /dist/berth-*.whl \
 && /opt/berth/bin/berth --help >/dev/null \
 && /opt/berth/bin/python -m pip uninstall --quiet --yes pip setuptools wheel \
 && find /opt/berth -name '__pycache__' -type d -prune -exec rm -rf {} + \
 && /opt/berth/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/berth

# ---------------------------------------------------------------------------- runtime
# The image's settings come before the one large step (the COPY of /opt/berth), so that a
# builder that makes a container per step (buildah with --layers) copies only the small base.
FROM ${PYTHON_IMAGE} AS runtime
ARG BERTH_UID=65532
RUN groupadd --system --gid "${BERTH_UID}" berth \
 && useradd --system --uid "${BERTH_UID}" --gid berth --home-dir /tmp --no-create-home \
      --shell /usr/sbin/nologin berth
ENV PATH=/opt/berth/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    USER=berth \
    MPLCONFIGDIR=/tmp/matplotlib
LABEL org.opencontainers.image.title="berth" \
      org.opencontainers.image.description="berth placement engine: kube-scheduler extender, PlacementPolicy operator, CLI" \
      org.opencontainers.image.licenses="Apache-2.0"
USER ${BERTH_UID}:${BERTH_UID}
WORKDIR /tmp
EXPOSE 8443 8080 9443
ENTRYPOINT ["berth"]
CMD ["--help"]
# Owned by root and read-only to the user, like every file outside /tmp.
COPY --from=build /opt/berth /opt/berth
