#!/usr/bin/env bash
# Create .venv (once) and install tinyspec with the extras it needs, at the exact versions of
# constraints/ci.txt (the ones the suite passes with). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
stamp=.venv/.tinyspec-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] || [ constraints/ci.txt -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip >/dev/null
  # (PYTHONWARNINGS: setuptools warns on every editable install that a folder named like the
  # package may shadow it; here that folder is the package)
  PYTHONWARNINGS=ignore .venv/bin/pip install -q -c constraints/ci.txt -e ".[test,opencl,tinygrad]"
  touch "$stamp"
fi
# PoCL (OpenCL on the CPU) links kernels with `ld` from binutils at run time.
command -v ld >/dev/null || echo "warning: 'ld' (binutils) not found: the opencl backend on PoCL will fail" >&2
command -v cc >/dev/null || echo "warning: no C compiler 'cc': the c backend will fail" >&2

# System packages some tests need, installed only where we may (root with apt, e.g. CI):
#   pdflatex (texlive): a test compiles the generated docs/spec.tex   (skip: TINYSPEC_NO_TEX=1)
#   clang: tinygrad's CPU device (the tinygrad backend, interop tests) (skip: TINYSPEC_NO_CLANG=1)
#   chromium: a headless browser loads the pages `tinyspec show` writes (skip: TINYSPEC_NO_BROWSER=1)
#   graphviz: `dot` reads the dot text `tinyspec show --format dot` writes (skip: TINYSPEC_NO_GRAPHVIZ=1)
# Elsewhere the tests that need one skip and say why; without clang the tinygrad backend
# runs on tinygrad's PYTHON device.
want=()
command -v pdflatex >/dev/null || [ -n "${TINYSPEC_NO_TEX:-}" ] || want+=(texlive-latex-base texlive-latex-recommended)
command -v clang >/dev/null || [ -n "${TINYSPEC_NO_CLANG:-}" ] || want+=(clang)
command -v chromium >/dev/null || [ -n "${TINYSPEC_NO_BROWSER:-}" ] || want+=(chromium)
command -v dot >/dev/null || [ -n "${TINYSPEC_NO_GRAPHVIZ:-}" ] || want+=(graphviz)
if [ ${#want[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing ${want[*]} (pdflatex for the docs compile test, clang for tinygrad's CPU device, chromium and graphviz for the show tests)" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null) \
    || echo "warning: could not install ${want[*]}; the tests that need them will be skipped" >&2
fi
command -v clang >/dev/null || echo "note: no clang: the tinygrad backend uses tinygrad's PYTHON device (tests of its CPU device are skipped)" >&2
command -v pdflatex >/dev/null || echo "note: no pdflatex: the docs compile test is skipped" >&2
command -v chromium >/dev/null || echo "note: no chromium: the headless-browser tests of tinyspec show are skipped" >&2
command -v dot >/dev/null || echo "note: no graphviz: the test that Graphviz reads tinyspec show's dot is skipped" >&2
