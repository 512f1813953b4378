#!/usr/bin/env bash
# mypy on the packages pyproject.toml's [tool.mypy] names. The four folders install as rooftop.models,
# rooftop.probes, rooftop.store and rooftop.tui through a package-dir mapping that leaves no rooftop/ folder
# on disk, so static tools see four unrelated folders: build/typecheck/rooftop/ links each folder under its
# installed name (mypy_path points there). An import-graph tool reads the same tree. Extra arguments go to
# mypy, e.g. `scripts/typecheck.sh -p rooftop.tui.app` for one room alone.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/typecheck/rooftop
for pkg in models probes store tui; do
    ln -sfn "../../../$pkg" "build/typecheck/rooftop/$pkg"
done
exec python3 -m mypy "$@"
