"""How long a cached program takes to load, against compiling it.

    .venv/bin/python bench/bench_compiler_cache.py

For each target: render a kernel, build it once (cold: the C compiler / PoCL), then in a
fresh process (nothing loaded, the device already open) time loading it from the cache
by its source: hashing, finding the library or binary, dlopen / clCreateProgramWithBinary.
Opening the OpenCL device (context, queue, PoCL's one-time per-process setup) happens
once per process and is printed separately.
Target: under 5 ms. (The cold child also runs the kernel once: an OpenCL cache entry is
written after the first launch, when PoCL's binary holds the compiled work-group code.)
"""
from __future__ import annotations
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r'''
import json, sys, time
from tinyspec.uop import UOp
from tinyspec.compiler import compile_graph
from tinyspec.compiler.literals import shape_operand as S, const
target = sys.argv[1]
a = UOp("BUFFER", (S((256, 256)),), {{"slot": 0, "dtype": "float32", "device": "CPU"}})
g = [UOp("REDUCE", (UOp("MUL", (a, const(1.5, "float32"))),), {{"op": "ADD", "axes": [1]}})]
c = compile_graph(g, target, keep_stages=False)
ks = c.sources[0]
t = time.perf_counter()
if target == "opencl":
  from tinyspec.compiler.runtime.opencl import device, CLProgram as P
  device()
else:
  from tinyspec.compiler.runtime.c import CProgram as P
opened = time.perf_counter() - t
t = time.perf_counter()
if sys.argv[2] == "cold": c.run()     # build from source and launch once (completes the cache entry)
else: P(ks)                           # load from the cache
print(json.dumps([time.perf_counter() - t, opened]))
'''


def run(target: str, mode: str, env) -> float:
  r = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), target, mode], capture_output=True, text=True, env=env)
  if r.returncode != 0: raise SystemExit(f"{target}: {r.stderr[-2000:]}")
  return json.loads(r.stdout.strip().splitlines()[-1])


def main():
  with tempfile.TemporaryDirectory() as d:
    env = dict(os.environ, TINYSPEC_CACHE=d)
    env.pop("POCL_CACHE_DIR", None)
    for target in ("c", "opencl"):
      try:
        cold = run(target, "cold", env)[0]
      except SystemExit as e:
        print(f"{target}: unavailable ({str(e)[:200]})"); continue
      runs = [run(target, "warm", env) for _ in range(5)]           # a fresh process each time
      med = sorted(r[0] for r in runs)[2]
      opened = sorted(r[1] for r in runs)[2]
      print(f"{target:7s} cold build+run {cold * 1e3:8.1f} ms   cached load (fresh process, median of 5) {med * 1e3:6.2f} ms"
            f"   ratio {cold / med:7.0f}x   {'OK' if med < 5e-3 else 'OVER'} (target < 5 ms)"
            + (f"   [device open, once per process: {opened * 1e3:.1f} ms]" if target == "opencl" else ""))


if __name__ == "__main__":
  main()
