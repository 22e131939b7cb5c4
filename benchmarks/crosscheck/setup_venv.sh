#!/usr/bin/env bash
# Create the virtual environment in which the TorchRL cross-check runs.
#
# TorchRL 0.14 needs torch 2.14.1, which marl's own environment does not have, so the
# cross-check gets a venv of its own, outside the repository (reused by every checkout):
#   ${MARL_CROSSCHECK_VENV:-$HOME/.cache/marl-crosscheck/venv}
# marl is NOT installed there: run.sh puts the repository on PYTHONPATH and uses the
# pure-Python parts (marl.objectives falls back to its torch scans without marl._C).
# Idempotent: a venv that already imports the pinned versions is left as it is.
set -euo pipefail

VENV="${MARL_CROSSCHECK_VENV:-$HOME/.cache/marl-crosscheck/venv}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="2.14.1"
TORCHRL_SPEC="torchrl==0.14.*"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - <<PY 2>/dev/null
import torch, torchrl, tensordict
assert torch.__version__.split("+")[0] == "$TORCH_VERSION", torch.__version__
assert torchrl.__version__.startswith("0.14"), torchrl.__version__
PY
then
    echo "crosscheck venv ready: $VENV"
    exit 0
fi

echo "creating the crosscheck venv in $VENV (torch $TORCH_VERSION, $TORCHRL_SPEC); this takes a few minutes"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
pip_install() {
    # pip's exit status is kept; only its notices about absent local index folders are dropped
    "$VENV/bin/python" -m pip install -q "$@" 2> >(grep -v "^WARNING: Location" >&2)
}
pip_install "torch==$TORCH_VERSION"
# pin torch so that resolving torchrl never swaps it for another build
pip_install "$TORCHRL_SPEC" "torch==$TORCH_VERSION" numpy
"$VENV/bin/python" - <<'PY'
import tensordict, torch, torchrl
print(f"crosscheck venv ready: torch {torch.__version__}, torchrl {torchrl.__version__}, "
      f"tensordict {tensordict.__version__}")
PY
