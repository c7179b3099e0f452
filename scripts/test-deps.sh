#!/usr/bin/env bash
# Opt-in: the test suite against other dependency versions than CI's pins (constraints/ci.txt).
#   bash scripts/test-deps.sh newest   # the newest releases on PyPI today (no constraints, --upgrade)
#   bash scripts/test-deps.sh lowest   # every dependency at the lower bound pyproject.toml allows
# Each has its own venv (.venv-newest, .venv-lowest); further arguments go to pytest. The
# corpus check (tools/gen_cases.py --check) is part of the suite: the reference evaluator's
# expected values must come out bit for bit the same under every NumPy the bounds allow.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: test-deps.sh newest|lowest [pytest args]}; shift
PY=${PYTHON:-python3}
venv=.venv-$mode
case "$mode" in
  newest) pins=(--upgrade --upgrade-strategy eager) ;;
  lowest) pins=(-c constraints/lowest.txt) ;;
  *) echo "usage: test-deps.sh newest|lowest [pytest args]" >&2; exit 2 ;;
esac
[ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip >/dev/null
PYTHONWARNINGS=ignore "$venv/bin/pip" install -q "${pins[@]}" -e ".[test,opencl,tinygrad]"
"$venv/bin/pip" freeze --exclude-editable | grep -iE "^(numpy|ml.dtypes|pyyaml|jsonschema|mpmath|hypothesis|pytest|pyopencl|tinygrad)=" | tr '\n' ' '; echo
export TINYSPEC_CACHE=${TINYSPEC_CACHE:-$PWD/.cache/tinyspec-$mode}
"$venv/bin/python" -m pytest -n 2 -p no:cacheprovider "$@"
"$venv/bin/python" tools/gen_cases.py --check
