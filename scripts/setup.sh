#!/usr/bin/env bash
# Create .venv (once) and install tinyspec with the extras it needs, at the exact versions of
# constraints/ci.txt (the ones the suite passes with), and a C compiler where missing.
# `setup.sh tests` also installs what the tests use (where root with apt). Idempotent.
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
# What the main job needs beyond the venv: a C compiler (the default backend, c). The
# tests need more (below); `setup.sh tests` installs it where we may (root with apt, e.g. CI).
want=()
if ! command -v cc >/dev/null; then want+=(gcc libc6-dev); fi
if [ "${1:-}" = tests ]; then
  # System packages the tests use, installed only where we may (root with apt):
  #   pocl-opencl-icd: the distribution's PoCL, which builds on every x86-64 generation (the pip
  #     PoCL's LLVM 14 cannot build on CPUs it does not know, e.g. AMD Zen 5; it stays the fallback)
  #   oclgrind: the OpenCL simulator whose race, bounds and uninitialized-read checks run the
  #     GPU tables' kernels (TINYSPEC_OPENCL_DEVICE=Oclgrind)            (skip: TINYSPEC_NO_OCLGRIND=1)
  #   pdflatex (texlive): a test compiles the generated docs/spec.tex   (skip: TINYSPEC_NO_TEX=1)
  #   clang: tinygrad's CPU device (the tinygrad backend, interop tests) (skip: TINYSPEC_NO_CLANG=1)
  #   chromium: a headless browser loads the pages `tinyspec show` writes (skip: TINYSPEC_NO_BROWSER=1)
  #   graphviz: `dot` reads the dot text `tinyspec show --format dot` writes (skip: TINYSPEC_NO_GRAPHVIZ=1)
  # Elsewhere the tests that need one skip and say why; without clang the tinygrad backend
  # runs on tinygrad's PYTHON device.
  [ -e /etc/OpenCL/vendors/pocl.icd ] || [ -n "${TINYSPEC_NO_POCL:-}" ] || want+=(pocl-opencl-icd)
  command -v oclgrind >/dev/null || [ -n "${TINYSPEC_NO_OCLGRIND:-}" ] || want+=(oclgrind)
  command -v pdflatex >/dev/null || [ -n "${TINYSPEC_NO_TEX:-}" ] || want+=(texlive-latex-base texlive-latex-recommended)
  command -v clang >/dev/null || [ -n "${TINYSPEC_NO_CLANG:-}" ] || want+=(clang)
  command -v chromium >/dev/null || [ -n "${TINYSPEC_NO_BROWSER:-}" ] || want+=(chromium)
  command -v dot >/dev/null || [ -n "${TINYSPEC_NO_GRAPHVIZ:-}" ] || want+=(graphviz)
fi
if [ ${#want[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing ${want[*]}" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null) \
    || echo "warning: could not install ${want[*]}; what needs them is skipped or fails and says why" >&2
fi
command -v cc >/dev/null || echo "warning: no C compiler 'cc': the c backend will fail" >&2
# PoCL (OpenCL on the CPU) links kernels with `ld` from binutils at run time.
command -v ld >/dev/null || echo "warning: 'ld' (binutils) not found: the opencl backend on PoCL will fail" >&2
if [ "${1:-}" = tests ]; then
  [ -e /etc/OpenCL/vendors/pocl.icd ] || echo "note: no distribution PoCL: OpenCL runs on the pip PoCL where it can build (\`tinyspec backends\` says)" >&2
  command -v oclgrind >/dev/null || echo "note: no oclgrind: the Oclgrind checks of the GPU kernels are skipped" >&2
  command -v clang >/dev/null || echo "note: no clang: the tinygrad backend uses tinygrad's PYTHON device (tests of its CPU device are skipped)" >&2
  command -v pdflatex >/dev/null || echo "note: no pdflatex: the docs compile test is skipped" >&2
  command -v chromium >/dev/null || echo "note: no chromium: the headless-browser tests of tinyspec show are skipped" >&2
  command -v dot >/dev/null || echo "note: no graphviz: the test that Graphviz reads tinyspec show's dot is skipped" >&2
fi
