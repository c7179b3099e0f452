#!/usr/bin/env bash
# Run tinygrad's own tests from a checkout with tinyspec capturing every realize
# (docs/tinygrad-suite.md), then print every failing graph with its class and, last:
#   tinygrad suite: S schedules from T tests; imported I%, valid V%, agree A%, unclassified U
#
#   bash scripts/tinygrad-suite.sh CHECKOUT [TEST PATH...] [-- PYTEST ARGS...]
#
# CHECKOUT: a tinygrad git checkout (the 0.14.0 release's commit, or the nearest one). Its
# tests run against the installed tinygrad 0.14.0 (the release the importer maps), never
# its own tinygrad/: they run from OUT/run, which links only the checkout's test/,
# conftest.py, extra/ and examples/. Default tests: test/backend/test_ops.py test/backend/test_dtype_alu.py
# test/backend/test_uops.py test/backend/test_schedule.py test/unit.
# Environment: TINYGRAD_SUITE_OUT (default out/tinygrad-suite), TINYGRAD_SUITE_WORKERS
# (pytest-xdist workers, default 2; 0: none), TINYGRAD_SUITE_LIMIT (seconds per graph,
# default 60), TINYGRAD_SUITE_KEEP=1 (write each failing graph to OUT/records/failing/),
# DEV (tinygrad's device, default CPU), CC (the C compiler of tinygrad's CPU backend: one that
# compiles __bf16, scripts/bf16-cc.sh, which installs clang-19 as root with apt-get unless
# TINYGRAD_SUITE_NO_INSTALL=1).
# Exit status: the report's (0: every failure classified; 1: some unclassified; 2: no
# records), or 2 when the set-up or pytest itself failed (not a failing tinygrad test).
set -euo pipefail
if [ $# -lt 1 ] || [ ! -d "$1/test" ] || [ ! -f "$1/test/helpers.py" ]; then
  echo "usage: $0 CHECKOUT [TEST PATH...] [-- PYTEST ARGS...]  (CHECKOUT: a tinygrad checkout, with test/helpers.py)" >&2
  exit 2
fi
checkout=$(cd "$1" && pwd); shift
root=$(cd "$(dirname "$0")/.." && pwd)
out=${TINYGRAD_SUITE_OUT:-$root/out/tinygrad-suite}
mkdir -p "$out"; out=$(cd "$out" && pwd)
tests=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do tests+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#tests[@]} -gt 0 ] || tests=(test/backend/test_ops.py test/backend/test_dtype_alu.py test/backend/test_uops.py
                                 test/backend/test_schedule.py test/unit)

# The venv: tinyspec (editable) with tinygrad 0.14.0, pytest, pytest-xdist and hypothesis at
# the CI's pins, and torch (test_ops compares with it; the CPU build). mpmath is the one pin
# left out: torch's sympy needs mpmath < 1.4, and tinyspec works with 1.3 (constraints/lowest.txt).
# safetensors and gguf: test/unit's state-dict tests read those formats (tinygrad's testing extra).
venv=$root/.venv-tinygrad-suite
stamp=$venv/.tinyspec-suite-installed
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$root/constraints/ci.txt" -nt "$stamp" ] || [ "$0" -nt "$stamp" ]; then
  [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
  grep -v '^mpmath' "$root/constraints/ci.txt" > "$venv/constraints.txt"
  (cd "$root" && PYTHONWARNINGS=ignore "$venv/bin/pip" install -q -c "$venv/constraints.txt" -e ".[test,tinygrad]" \
     "torch==${TINYGRAD_SUITE_TORCH:-2.13.0+cpu}" safetensors==0.8.0 gguf==0.19.0) || { echo "error: could not set up $venv" >&2; exit 2; }
  touch "$stamp"
fi

# A folder with the checkout's tests but no tinygrad/: pytest puts it first on sys.path.
run=$out/run
rm -rf "$run"; mkdir -p "$run"
ln -s "$checkout/test" "$run/test"
[ -f "$checkout/conftest.py" ] && ln -s "$checkout/conftest.py" "$run/conftest.py"
for d in extra examples; do [ -d "$checkout/$d" ] && ln -s "$checkout/$d" "$run/$d"; done   # tests import these (not the tinygrad package)
printf '[pytest]\n# tinygrad %s checkout: %s\n' "$(git -C "$checkout" rev-parse --short HEAD 2>/dev/null || echo '?')" "$checkout" > "$run/pytest.ini"

# tinygrad's CPU backend compiles bfloat16 kernels with __bf16 (its compiler runs $CC, default
# clang): a clang before 17 refuses it and test_dtype_alu's bfloat16 tests fail as run. Pick
# one that compiles it (installing clang-19 where we may); the choice and why: one line.
if cc=$(bash "$root/scripts/bf16-cc.sh"); then export CC=$cc; fi

workers=${TINYGRAD_SUITE_WORKERS:-2}
xdist=(); [ "$workers" -gt 0 ] && xdist=(-n "$workers")
# DERANDOMIZE_CI: tinygrad's hypothesis profile draws the same examples every run (test_dtype_alu)
export TINYSPEC_CACHE=${TINYSPEC_CACHE:-$root/.cache/tinyspec} DEV=${DEV:-CPU} DERANDOMIZE_CI=${DERANDOMIZE_CI:-1}
start=$(date +%s)
set +e
keep=(); [ -n "${TINYGRAD_SUITE_KEEP:-}" ] && keep=(--tinygrad-suite-keep)
# (--rootdir and -c: pytest-xdist's workers would otherwise take a rootdir above OUT/run)
(cd "$run" && "$venv/bin/pytest" -p tinyspec.interop.suite.plugin --tinygrad-suite-out "$out/records" \
   --tinygrad-suite-limit "${TINYGRAD_SUITE_LIMIT:-60}" "${keep[@]}" --rootdir "$run" -c "$run/pytest.ini" \
   -p no:cacheprovider --continue-on-collection-errors -q -o console_output_style=classic "${xdist[@]}" "${tests[@]}" "$@")
rc=$?
set -e
echo "tinygrad's tests ran in $(( $(date +%s) - start )) s (pytest exit $rc)"
case $rc in 0|1|5) ;; *) echo "error: pytest did not finish its run (exit $rc)" >&2; exit 2 ;; esac
exec "$venv/bin/python" -m tinyspec.interop.suite report "$out/records" --json "$out/summary.json"
