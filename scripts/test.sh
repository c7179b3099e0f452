#!/usr/bin/env bash
# Set up (if needed), lint (ruff) and type-check the core (mypy), run the whole test suite,
# then check that docs/ matches the tables,
# run the CI slice of the sanitizer fuzzer (conformance/fuzz/sanitize.py CI_EXAMPLES, CI_SEED;
# skipped with a note where the C compiler has no sanitizer runtimes) and check that the
# wheel installs and works from an unrelated directory (scripts/check-install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh tests
export TINYSPEC_CACHE=${TINYSPEC_CACHE:-$PWD/.cache/tinyspec}
.venv/bin/ruff check .                  # the linter (pyproject.toml [tool.ruff])
.venv/bin/mypy                          # the type checker on the core (pyproject.toml [tool.mypy])
.venv/bin/python -m pytest -n 2 "$@"
.venv/bin/python tools/gen_docs.py --check
if .venv/bin/python -c "import sys; from tinyspec.conformance.fuzz.sanitize import unavailable; sys.exit(unavailable() is not None)"; then
  .venv/bin/tinyspec fuzz --backend c --sanitize --examples 400 --seed 0 --out "$(mktemp -d)"
else
  echo "note: no sanitizer runtimes for the C compiler: the sanitizer fuzzer's CI slice is skipped"
fi
bash scripts/check-install.sh
