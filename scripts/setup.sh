#!/usr/bin/env bash
# Create .venv (once) and install tinyspec with the extras it needs. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
stamp=.venv/.tinyspec-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e ".[test,opencl,tinygrad]"
  touch "$stamp"
fi
# PoCL (OpenCL on the CPU) links kernels with `ld` from binutils at run time.
command -v ld >/dev/null || echo "warning: 'ld' (binutils) not found: the opencl backend on PoCL will fail" >&2
command -v cc >/dev/null || echo "warning: no C compiler 'cc': the c backend will fail" >&2
# pdflatex checks that the generated docs/spec.tex compiles. Installed only where we may
# (root with apt, e.g. CI); elsewhere that one test is skipped and says why.
if ! command -v pdflatex >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [ "${TINYSPEC_NO_TEX:-}" = "" ]; then
  echo "installing pdflatex (texlive-latex-base, texlive-latex-recommended) for the docs compile test" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
     texlive-latex-base texlive-latex-recommended >/dev/null) \
    || echo "warning: could not install pdflatex; the docs compile test will be skipped" >&2
fi
