#!/usr/bin/env bash
# Cross-check marl's losses and value estimators against TorchRL 0.14 (see README.md here).
#
#   bash benchmarks/crosscheck/run.sh            # float64, every check
#   bash benchmarks/crosscheck/run.sh --dtype float32 --only sac --verbose
#
# Creates the TorchRL venv on first use (setup_venv.sh), then runs crosscheck.py in it with
# this repository on PYTHONPATH. Exits non-zero on an unexplained mismatch.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VENV="${MARL_CROSSCHECK_VENV:-$HOME/.cache/marl-crosscheck/venv}"

MARL_CROSSCHECK_VENV="$VENV" bash "$HERE/setup_venv.sh"
# marl is used from the source tree: no build, no install, and marl._C is not needed (the
# estimators fall back to their torch scans). SKBUILD_EDITABLE_SKIP keeps an editable marl
# of another environment, should one be on the path, from redirecting the import.
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export SKBUILD_EDITABLE_SKIP=1
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec "$VENV/bin/python" "$HERE/crosscheck.py" "$@"
