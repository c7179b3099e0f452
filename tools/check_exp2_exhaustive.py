"""Every float32 through the C EXP2 helper (spec/render.yaml helpers exp2_f32), both of its
paths, against long double exp2l rounded to float (64-bit significand: a double rounding
would need the exact value within 2^-40 ulp of a midpoint), as ulp distances:

    python3 tools/check_exp2_exhaustive.py [--path fma|double|both]

Prints the worst distance of each path, where it is, how many elements are 1 ulp off, and
exits 1 when any is over the strict bound (ops.yaml tolerances EXP2 float32) or a NaN
loses its bits. On a 2-core AMD EPYC (Zen 4): fma path 80 s, worst 1 ulp (11,273,528 of
the 2^32 inputs 1 ulp off); double path 14 min, worst 1 ulp (1,204,016 off).
tests/compiler/test_compiler_exp2.py checks a dense sample of both on every run.
"""
from __future__ import annotations
import argparse
import ctypes
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":   # run as a script: a plain checkout works too (tools/checkout.py)
  import checkout
  checkout.use_checkout()
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.runtime.c import _compiler
from tinyspec.tolerance import tolerance

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
static int64_t key(float x) { int32_t b = (int32_t)f32_bits(x); return b < 0 ? -(int64_t)(b & 0x7fffffff) : b; }
/* out: worst distance, its input's bits, elements 1 ulp off, NaNs that lost their bits */
void check(int64_t* out) {
  int64_t worst = 0, ones = 0, nanbad = 0; uint32_t at = 0;
  for (uint64_t u = 0; u < 0x100000000ull; u++) {
    float x = bits_f32((uint32_t)u), got = exp2_f32(x);
    if (x != x) { nanbad += f32_bits(got) != (uint32_t)u; continue; }
    float want = (float)exp2l((long double)x);
    int64_t d = llabs(key(got) - key(want));
    ones += d == 1;
    if (d > worst) { worst = d; at = (uint32_t)u; }
  }
  out[0] = worst; out[1] = at; out[2] = ones; out[3] = nanbad;
}
"""


def run(path: str) -> bool:
  T = render_tables()
  src = T["targets"]["c"]["prelude"] + T["helpers"]["exp2_f32"] + HARNESS
  extra = [] if path == "fma" else ["-U__FP_FAST_FMAF"]
  with tempfile.TemporaryDirectory() as d:
    c, so = Path(d) / "exp2.c", Path(d) / "exp2.so"
    c.write_text(src)
    probe = subprocess.run(_compiler() + extra + ["-dM", "-E", "-x", "c", "-"], input="", capture_output=True, text=True).stdout
    if path == "fma" and "__FP_FAST_FMAF " not in probe:
      print("fma: this host's compiler has no fast fma; the double path is the only one built here")
      return True
    subprocess.run(_compiler() + extra + [str(c), "-o", str(so), "-lm"], check=True)
    lib = ctypes.CDLL(str(so))
    out = (ctypes.c_int64 * 4)()
    lib.check(out)
  x = struct.unpack("<f", struct.pack("<I", out[1]))[0]
  bound, _ = tolerance("EXP2", "float32")
  ok = out[0] <= bound and out[3] == 0
  print(f"{path}: worst {out[0]} ulp at {x!r} ({out[1]:#010x}), {out[2]} elements 1 ulp off, "
        f"{out[3]} NaNs changed, bound {bound:g}: {'ok' if ok else 'OVER'}")
  return ok


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--path", choices=["fma", "double", "both"], default="both")
  a = ap.parse_args()
  paths = ["fma", "double"] if a.path == "both" else [a.path]
  return 0 if all([run(p) for p in paths]) else 1


if __name__ == "__main__":
  sys.exit(main())
