#!/usr/bin/env bash
# Create the virtual environment in which the SMAX trace recorder runs.
#
# JaxMARL 0.2.0 (the reference of marl.envs.native.smax) needs jax, which marl's own
# environment does not have, so the recorder gets a venv of its own, outside the
# repository (reused by every checkout):
#   ${MARL_JAX_VENV:-$HOME/.cache/marl-crosscheck/jax-venv}
# marl is NOT installed there: smax_traces.py only needs jaxmarl and numpy.
# Idempotent: a venv that already imports the pinned versions is left as it is.
set -euo pipefail

VENV="${MARL_JAX_VENV:-$HOME/.cache/marl-crosscheck/jax-venv}"
PYTHON="${PYTHON:-python3}"
JAXMARL_VERSION="0.2.0"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - <<PY 2>/dev/null
import importlib.metadata as md
import jax, jaxmarl
assert md.version("jaxmarl") == "$JAXMARL_VERSION", md.version("jaxmarl")
PY
then
    echo "jax venv ready: $VENV"
    exit 0
fi

echo "creating the jax venv in $VENV (jax[cpu], jaxmarl==$JAXMARL_VERSION); this takes a few minutes"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
pip_install() {
    # pip's exit status is kept; only its notices about absent local index folders are dropped
    "$VENV/bin/python" -m pip install -q "$@" 2> >(grep -v "^WARNING: Location" >&2)
}
pip_install "jax[cpu]" "jaxmarl==$JAXMARL_VERSION" numpy
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import jax
print(f"jax venv ready: jax {jax.__version__}, jaxmarl {md.version('jaxmarl')}")
PY
