#!/usr/bin/env bash
# Set up (if needed) and run the conformance suite on the default backend.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TINYSPEC_CACHE=${TINYSPEC_CACHE:-$PWD/.cache/tinyspec}
.venv/bin/tinyspec conformance "$@"
