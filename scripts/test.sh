#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, lint, type-check, then every test,
# the end-to-end tests against a real etcd, kube-apiserver and kube-scheduler included, and the
# container image built and run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
# System packages from Debian: etcd, and chromium with chromium-driver for the browser tests
# (those tests fail, never skip, in CI when the browser is missing).
bash hack/install-deps.sh etcd browser || echo "WARNING: could not install the system packages (run hack/install-deps.sh etcd browser as root)" >&2
# Control-plane binaries (built once from the Go module proxy, cached outside the repo) and etcd.
BERTH_K8S_BIN_DIR=$(bash hack/build-k8s.sh | tail -n 1)
export BERTH_K8S_BIN_DIR
echo "control-plane binaries: $BERTH_K8S_BIN_DIR"
# The container image, built with buildah from the Dockerfile (its base and layers cached outside
# the repo, like the binaries); tests/image runs it as the chart does. Needs root: elsewhere the
# image tests skip (CI runs as root, and there they fail rather than skip).
if [[ "$(id -u)" == "0" ]]; then
  echo "== image"
  BERTH_IMAGE=$(bash hack/build-image.sh | tail -n 1)
  export BERTH_IMAGE
fi
echo "== ruff"; .venv/bin/ruff check .
echo "== mypy"; scripts/typecheck.sh
echo "== pytest"; .venv/bin/python -m pytest "$@"
