"""UPCAST lanes as vector types against the same lanes as unrolled scalar code, on C.

    .venv/bin/python bench/bench_compiler_vectors.py

Expand turns an UPCAST axis into (k,)-vector values -- GCC vector extensions in C
(render.yaml `vectors`) -- where it can; with vectors off (their `widths` emptied) the
same lanes are k scalar copies behind `restrict` pointers, left to GCC's vectorizers.
Both variants of each kernel get the default OptOps and run on one thread; the table
gives the CPU time of one launch (median of interleaved runs, so the other processes
on the shared machine count less) and the ratio scalar / vector (> 1: vectors win).
"""
from __future__ import annotations
import time
from pathlib import Path
import numpy as np
from bench.bench_kernels import gemm_t, conv_t
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.rendertables import render_tables

ROOT = Path(__file__).resolve().parent.parent


def main():
  rng = np.random.default_rng(0)
  r = lambda *s: rng.standard_normal(s).astype(np.float32)
  cases = [("add 4M", (r(1 << 22), r(1 << 22)), lambda a, b: a + b),
           ("a*b+c 4M", (r(1 << 22), r(1 << 22), r(1 << 22)), lambda a, b, c: a * b + c),
           ("gemm 512", (r(512, 512), r(512, 512)), gemm_t),
           ("gemm 1024", (r(1024, 1024), r(1024, 1024)), gemm_t),
           ("conv3x3 1x32x64x64", (r(1, 32, 64, 64), r(32, 32, 3, 3) * 0.1), conv_t)]
  V = render_tables()["vectors"]
  widths = list(V["widths"])
  print(f"{'case':20s}{'vector':>12s}{'scalar':>12s}{'scalar/vector':>15s}")
  for name, arrays, build in cases:
    t = build(*[Tensor(x) for x in arrays])
    g, inputs = t.graph(), t.inputs()
    runs = {}
    for label, w in (("vector", widths), ("scalar", [])):
      V["widths"] = w
      try:
        b = compile_graph(g, "c", keep_stages=False).executable().bind(inputs, threads=1)
      finally:
        V["widths"] = widths
      b.run()
      runs[label] = b.run
    ts = {k: [] for k in runs}
    for _ in range(7):
      for k, f in runs.items():
        c = time.process_time(); f(); ts[k].append(time.process_time() - c)
    tv, tsc = (float(np.median(ts[k])) for k in ("vector", "scalar"))
    print(f"{name:20s}{tv * 1e3:10.2f}ms{tsc * 1e3:10.2f}ms{tsc / tv:14.2f}x", flush=True)


if __name__ == "__main__":
  main()
