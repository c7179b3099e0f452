#!/usr/bin/env bash
# Create .venv (once) and install tinyspec with the extras it needs. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
stamp=.venv/.tinyspec-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e ".[test,opencl]"
  touch "$stamp"
fi
# PoCL (OpenCL on the CPU) links kernels with `ld` from binutils at run time.
command -v ld >/dev/null || echo "warning: 'ld' (binutils) not found: the opencl backend on PoCL will fail" >&2
