#!/usr/bin/env bash
# Creates (once) a virtualenv with current PyTorch 2.x from PyPI for the store interop tests and
# the store benchmark, and prints its python path on stdout. Idempotent: a venv whose torch
# imports is reused as is. Location: ${XDG_CACHE_HOME:-$HOME/.cache}/ddprun/torch2-venv
# (override with DDPRUN_TORCH2_VENV).
set -euo pipefail

venv="${DDPRUN_TORCH2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ddprun/torch2-venv}"
base_python="${DDPRUN_TORCH2_BASE_PYTHON:-python3}"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch, torch.distributed' 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
echo "setup-torch2-venv: creating $venv (PyTorch from PyPI, several GB on first install)" >&2
"$base_python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet torch numpy >&2
"$venv/bin/python" -c 'import torch, torch.distributed; assert torch.__version__.startswith("2.")' >&2
echo "$venv/bin/python"
