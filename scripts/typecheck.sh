#!/usr/bin/env bash
# mypy over the import package berth as it installs: berth/, with extender/ and operator/ mapped
# to berth.extender and berth.operator (mypy does not read setuptools' package-dir mapping, so a
# tree of symlinks under build/ lays the package out as Python imports it).
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/typecheck
rm -rf "$tree"
mkdir -p "$tree/berth"
for entry in berth/*; do
  ln -s "../../../$entry" "$tree/berth/"
done
ln -s ../../../extender "$tree/berth/extender"
ln -s ../../../operator "$tree/berth/operator"
cd "$tree"
exec ../../.venv/bin/mypy --config-file ../../pyproject.toml -p berth
