#!/usr/bin/env bash
# Set up (if needed) and run the conformance suite: by default the whole case corpus on the
# default backend, `c` (the compiler's C backend). Any arguments replace the defaults,
# e.g. `bash scripts/conformance.sh --backend opencl --workers 2`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TINYSPEC_CACHE=${TINYSPEC_CACHE:-$PWD/.cache/tinyspec}
if [ $# -eq 0 ]; then set -- --backend c --workers 2; fi
exec .venv/bin/tinyspec conformance "$@"
