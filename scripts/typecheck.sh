#!/usr/bin/env bash
# mypy (strict) over the import package berth as it installs: berth/, with the folders extender/
# and operator/ reached through the links berth/extender and berth/operator.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/mypy -p berth
