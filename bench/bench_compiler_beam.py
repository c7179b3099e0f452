"""BEAM search against the default heuristics, and what a cached result costs.

    .venv/bin/python bench/bench_compiler_beam.py [--width N] [--target c|opencl] [--cases ...]

For each case (a fresh $TINYSPEC_CACHE, so nothing is cached at the start):
  * search: the wall time of the first `compile_graph(beam=N)` (the search itself,
    building and timing every candidate);
  * cached: the time to compile again with beam=N, against compiling with the default
    heuristics (both warm: the C compiler's cache holds the libraries); the difference
    is what applying the cached winner costs -- reading it and hashing the kernel --
    which `lookup` measures alone (every kernel's key and file read) and `+apply` with
    the OptOps applied to the kernels (the rest of `cached` is compiling the winner's
    kernel, a different kernel from the default's). Target: < 10 ms;
  * speed: the program's time with the BEAM winner and with the default opts, their
    launches interleaved (medians of 21), and the ratio default / beam (>= 1.00: BEAM
    never makes a kernel slower, since the default stays unless a candidate is measurably
    faster). When the winner is the default itself the program is the same: "the default
    kept", ratio 1.00 by construction.
"""
from __future__ import annotations
import argparse
import os
import tempfile
import time
from pathlib import Path
import numpy as np
from bench.bench_kernels import gemm_t, softmax_t
from tinyspec.compiler.passes import callify, rangeify
from tinyspec.compiler.beam import best_opts
from tinyspec.compiler.passes.optimize import apply_opts, initial_types
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.device import device
from tinyspec.compiler.passes.heuristics import default_opts

ROOT = Path(__file__).resolve().parent.parent


def cases(rng):
  r = lambda *s: rng.standard_normal(s).astype(np.float32)
  yield "add 4M", (r(1 << 22), r(1 << 22)), lambda a, b: a + b
  yield "sum 4M", (r(1 << 22),), lambda a: a.sum()
  yield "max 4M", (r(1 << 22),), lambda a: a.max()
  yield "softmax 1024x1024", (r(1024, 1024),), softmax_t
  yield "gemm 256", (r(256, 256), r(256, 256)), gemm_t
  yield "gemm 512", (r(512, 512), r(512, 512)), gemm_t


def lookup_ms(c_graph, target, width) -> tuple[float, float]:
  """The cost of applying every kernel's cached winner: finding it (its key and its
  file), and that plus applying its OptOps to the kernel."""
  kernels = rangeify.rangeify(callify.callify(c_graph.root_uops())).kernels
  t = time.perf_counter()
  found = [best_opts(k.sink, target, width) for k in kernels]
  t1 = time.perf_counter()
  for k, o in zip(kernels, found): apply_opts(initial_types(k.sink), o, target)
  t2 = time.perf_counter()
  return (t1 - t) * 1e3, (t2 - t) * 1e3


def interleaved(fns: dict, runs: int = 9) -> dict:
  for f in fns.values(): f(); f()
  ts = {k: [] for k in fns}
  for _ in range(runs):
    for k, f in fns.items():
      t = time.perf_counter(); f(); ts[k].append(time.perf_counter() - t)
  return {k: float(np.median(v)) for k, v in ts.items()}


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--width", type=int, default=2)
  ap.add_argument("--target", default="c")
  ap.add_argument("--cases")
  a = ap.parse_args(argv)
  os.environ["TINYSPEC_CACHE"] = tempfile.mkdtemp(prefix="tinyspec-beam-")
  print(f"BEAM width {a.width} on {a.target}; cache {os.environ['TINYSPEC_CACHE']}")
  print(f"{'case':20s}{'search':>10s}{'default':>11s}{'cached':>11s}{'lookup':>10s}{'+apply':>10s}{'t default':>12s}{'t beam':>11s}{'ratio':>8s}  winner")
  for name, arrays, build in cases(np.random.default_rng(0)):
    if a.cases and not any(w in name for w in a.cases.split(",")): continue
    t = build(*[Tensor(x) for x in arrays])
    g, inputs = t.graph(), t.inputs()
    s0 = time.perf_counter(); cb = compile_graph(g, a.target, keep_stages=False, beam=a.width); search = time.perf_counter() - s0
    compile_graph(g, a.target, keep_stages=False).executable()        # the default's libraries built
    d, c = [], []
    for _ in range(5):
      s0 = time.perf_counter(); cd = compile_graph(g, a.target, keep_stages=False); d.append(time.perf_counter() - s0)
      s0 = time.perf_counter(); compile_graph(g, a.target, keep_stages=False, beam=a.width); c.append(time.perf_counter() - s0)
    looks = [lookup_ms(g, a.target, a.width) for _ in range(5)]
    look, apply = min(x[0] for x in looks), min(x[1] for x in looks)
    ks = rangeify.rangeify(callify.callify(g.root_uops())).kernels
    win = [best_opts(k.sink, a.target, a.width) for k in ks]
    kept = win == [default_opts(initial_types(k.sink), a.target, device(a.target)) for k in ks]
    bd = cd.executable().bind(inputs)
    if kept:      # the same program: its ratio is 1 by construction, a timed one only noise
      tm = interleaved({"default": bd.run})
      tm["beam"] = tm["default"]
    else:
      tm = interleaved({"default": bd.run, "beam": cb.executable().bind(inputs).run}, runs=21)
    print(f"{name:20s}{search:9.1f}s{np.median(d) * 1e3:9.1f}ms{np.median(c) * 1e3:9.1f}ms{look:8.2f}ms{apply:8.2f}ms"
          f"{tm['default'] * 1e3:10.3f}ms{tm['beam'] * 1e3:9.3f}ms{tm['default'] / tm['beam']:7.2f}x  "
          f"{'the default kept' if kept else win}", flush=True)


if __name__ == "__main__":
  main()
