"""How long `tinyspec fuzz` takes: examples per second per backend, and the time for the
issue's bar (1000 examples on the C backend in under 10 minutes) as a ratio of it.

  .venv/bin/python bench/bench_fuzz.py                     # c, 1000 examples, seed 0
  .venv/bin/python bench/bench_fuzz.py --backend opencl --examples 200

Failures found along the way are shrunk (which costs time too) and listed, not written.
Run it on a quiet machine: it measures wall time. A fresh build cache (TINYSPEC_CACHE
pointing at an empty folder) gives the cold figure.
"""
from __future__ import annotations
import argparse
import sys
import time
from pathlib import Path
from tinyspec.conformance.fuzz.driver import fuzz

ROOT = Path(__file__).resolve().parent.parent
BAR_SECONDS = 600.0   # the bar for 1000 examples on c


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--backend", default="c")
  ap.add_argument("--examples", type=int, default=1000)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--no-stages", action="store_true")
  a = ap.parse_args(argv)
  t0 = time.perf_counter()
  rep = fuzz(a.backend, a.examples, a.seed, None, stages=not a.no_stages)
  dt = time.perf_counter() - t0
  per = dt / max(rep.examples, 1)
  print(f"{a.backend}: {rep.examples} examples in {dt:.1f} s ({rep.examples / dt:.1f} examples/s, {1000 * per:.0f} ms each), "
        f"{len(rep.failures)} failures, stages {'off' if a.no_stages else 'on'}")
  for f in rep.failures: print(f"  {f}"[:300])
  if rep.refused: print("  refused: " + ", ".join(f"{k} {v}" for k, v in sorted(rep.refused.items())))
  print(f"1000 examples at this rate: {1000 * per:.0f} s = {1000 * per / BAR_SECONDS:.2f} x the 10-minute bar")
  return 0


if __name__ == "__main__":
  sys.exit(main())
