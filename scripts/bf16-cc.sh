#!/usr/bin/env bash
# The C compiler for tinygrad's CPU backend in scripts/tinygrad-suite.sh: one that compiles
# bfloat16 (`__bf16`), which tinygrad's CPU renderer emits for bfloat16 kernels and which
# clang before 17 refuses on x86-64 ("__bf16 is not supported on this target").
#
#   CC=$(bash scripts/bf16-cc.sh)
#
# Prints the compiler's name on stdout (nothing when there is none) and on stderr one line
# saying which it is and why. Tried in order: $CC (default clang, what tinygrad runs), then
# clang-19 ... clang-15 on PATH; when none compiles the probe and we run as root with apt-get,
# Debian's clang-19 is installed (as scripts/setup.sh installs its packages; skip:
# TINYGRAD_SUITE_NO_INSTALL=1). Exit status: 0 with a compiler, 1 without.
set -uo pipefail
target="$(uname -m)-none-unknown-elf"   # as tinygrad's ClangCompiler compiles (freestanding, no libc)
probe() {   # the compiler $1 compiles bfloat16 arithmetic
  command -v "$1" >/dev/null &&
    printf '__bf16 f(__bf16 a, __bf16 b) { return a * b + a; }\n' |
      "$1" -c -x c -O2 -ffreestanding -nostdlib "--target=$target" - -o /dev/null >/dev/null 2>&1
}
first=${CC:-clang}
for cc in "$first" clang-19 clang-18 clang-17 clang-16 clang-15; do
  if probe "$cc"; then
    if [ "$cc" = "$first" ]; then why="it compiles __bf16"; else why="$first does not compile __bf16"; fi
    echo "tinygrad's CPU backend compiles with $cc ($why)" >&2
    echo "$cc"; exit 0
  fi
done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [ -z "${TINYGRAD_SUITE_NO_INSTALL:-}" ]; then
  echo "installing clang-19 ($first and clang-19 ... clang-15 on PATH do not compile __bf16)" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang-19 >/dev/null) \
    || echo "warning: could not install clang-19" >&2
  if probe clang-19; then
    echo "tinygrad's CPU backend compiles with clang-19 (installed: $first does not compile __bf16)" >&2
    echo clang-19; exit 0
  fi
fi
echo "warning: no C compiler here compiles __bf16 ($first, clang-19 ... clang-15 on PATH): tinygrad's CPU backend" \
     "compiles with $first and its bfloat16 tests (test_dtype_alu's test_bfloat16*) fail as run (class host-clang-without-bf16)" >&2
exit 1
