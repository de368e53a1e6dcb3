#!/usr/bin/env bash
# Creates .venv (if missing) and installs berth with its pinned dependencies.
# Usage: scripts/setup.sh [--test]   (--test adds the test and lint tools)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
extras=""
if [ "${1:-}" = "--test" ]; then extras="[test]"; fi
.venv/bin/python -m pip install --quiet --upgrade "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0"
.venv/bin/python -m pip install --quiet -c requirements.lock -e ".${extras}"
