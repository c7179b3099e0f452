#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite, then check that docs/ matches the tables
# and that the wheel installs and works from an unrelated directory (scripts/check-install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TINYSPEC_CACHE=${TINYSPEC_CACHE:-$PWD/.cache/tinyspec}
.venv/bin/python -m pytest -n 2 "$@"
.venv/bin/python tools/gen_docs.py --check
bash scripts/check-install.sh
