"""Benchmark of the NumPy reference evaluator (refimpl), with the issue's bars:

  * kernel level, 1M-element elementwise kernel   out[i] = x[i]*2 + 1        < 0.2 s
  * kernel level, 1M-element sum kernel            (REDUCE over a RANGE, and the
                                                    tinygrad form: a REG accumulator,
                                                    over one loop or two)              < 0.2 s
  * tensor level, 512x512x512 gemm written as seed 001's composition
    (A.reshape(M,K,1) * B.reshape(1,K,N)).sum(1) as a raw graph  < 2 s, within the budget
  * when tinygrad is installed: the ratio to tinygrad's PYTHON emulator (DEV=PYTHON) on the
    equivalent kernels (goal: >= 100x faster). The emulator is timed inside its
    PythonProgram.__call__ only (its scheduling and compiling are not counted), at
    --tg-size elements, and extrapolated linearly to 1M (it runs one Python iteration per
    element); the same-size ratio is printed too.

Times are the median of --repeat warm runs, each a full evaluate() (validation included).
Run: .venv/bin/python bench/bench_refimpl.py [--repeat 5] [--tg-size 65536] [--no-tinygrad]
"""
from __future__ import annotations
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from tinyspec.refimpl import evaluate                      # noqa: E402
from tinyspec.refimpl.engine import run                    # noqa: E402
from tinyspec.refimpl.build import Builder                 # noqa: E402
from tinyspec.refimpl.budget import default_budget         # noqa: E402

F32 = "float32"
N1M = 1 << 20


def elementwise_kernel(n):
  b = Builder()
  x = b.param((n,), F32, 0); out = b.param((n,), F32, 1)
  i = b.range(n, 0, "GLOBAL")
  v = b.ADD(b.MUL(b.INDEX(x, i), b.const(2.0, F32)), b.const(1.0, F32))
  b.SINK(b.END(b.STORE(b.INDEX(out, i), v), i))
  return b.graph()


def sum_kernel_reduce(n):
  b = Builder()
  x = b.param((n,), F32, 0); out = b.param((1,), F32, 1)
  k = b.range(n, 0, "REDUCE")
  b.SINK(b.STORE(b.INDEX(out, b.const(0, "index")), b.REDUCE(b.INDEX(x, k), k, arg={"op": "ADD"})))
  return b.graph()


def sum_kernel_accumulator(n):
  """tinygrad's form: acc.after().store(0); acc.after(init, k).store(acc + x[k]).end(k); acc.after(end)."""
  b = Builder()
  x = b.param((n,), F32, 0); out = b.param((1,), F32, 1)
  acc = b.buffer((1,), F32, 0, addrspace="REG")
  z = b.const(0, "index")
  init = b.STORE(b.INDEX(acc, z), b.const(0.0, F32))
  k = b.range(n, 0, "REDUCE")
  a = b.AFTER(acc, init, k)
  e = b.END(b.STORE(b.INDEX(a, z), b.ADD(b.INDEX(a, z), b.INDEX(x, k))), k)
  b.SINK(b.STORE(b.INDEX(out, z), b.INDEX(b.AFTER(acc, e), z)))
  return b.graph()


def sum_kernel_accumulator_2d(m, n):
  """The expand stage's form of a REDUCE over two RANGEs: one ()-shaped register carried
  through both loops (AFTER(acc, init, r0, r1)), closed by one END."""
  b = Builder()
  x = b.param((m, n), F32, 0); out = b.param((), F32, 1)
  acc = b.buffer((), F32, 0, addrspace="REG")
  init = b.STORE(acc, b.const(0.0, F32))
  r0, r1 = b.range(m, 0, "REDUCE"), b.range(n, 1, "REDUCE")
  e = b.END(b.STORE(acc, b.ADD(b.AFTER(acc, init, r0, r1), b.INDEX(x, r0, r1))), r0, r1)
  b.SINK(b.STORE(out, b.AFTER(acc, e)))
  return b.graph()


def gemm_composition(M, K, N):
  b = Builder()
  A = b.buffer((M, K), F32, 0); B = b.buffer((K, N), F32, 1)
  prod = b.MUL(b.RESHAPE(A, b.shape(M, K, 1)), b.RESHAPE(B, b.shape(1, K, N)))
  b.REDUCE(prod, arg={"op": "ADD", "axes": [1]})
  return b.graph()


def timed(fn, repeat):
  fn()   # warm: tables loaded, caches filled
  ts = []
  for _ in range(repeat):
    t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
  return statistics.median(ts)


TINYGRAD_SCRIPT = r"""
import json, sys, time
import numpy as np
from tinygrad import Tensor
from tinygrad.runtime import ops_python
spent = [0.0]
orig = ops_python.PythonProgram.__call__
def timed_call(self, *a, **k):
  t = time.perf_counter(); r = orig(self, *a, **k); spent[0] += time.perf_counter() - t; return r
ops_python.PythonProgram.__call__ = timed_call
n = int(sys.argv[1])
xv = np.random.default_rng(0).random(n, dtype=np.float32)
x = Tensor(xv).realize()
out = {}
for name, f in (("elementwise", lambda: (x * 2 + 1)), ("sum", lambda: x.sum())):
  spent[0] = 0.0
  r = f().realize().numpy()
  out[name] = spent[0]
  want = xv * 2 + 1 if name == "elementwise" else xv.sum()
  assert np.allclose(r, want, rtol=1e-4), name
print(json.dumps(out))
"""


def tinygrad_times(n):
  try:
    import tinygrad  # noqa: F401
  except ImportError:
    return None
  env = dict(os.environ, DEV="PYTHON")
  p = subprocess.run([sys.executable, "-c", TINYGRAD_SCRIPT, str(n)], env=env, capture_output=True, text=True, timeout=1800)
  if p.returncode != 0:
    print("tinygrad PYTHON emulator failed:", p.stderr.strip().splitlines()[-1:] or p.returncode)
    return None
  return json.loads(p.stdout.strip().splitlines()[-1])


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=5)
  ap.add_argument("--tg-size", type=int, default=1 << 16, help="elements for the tinygrad emulator runs (extrapolated to 1M)")
  ap.add_argument("--no-tinygrad", action="store_true")
  a = ap.parse_args()
  rng = np.random.default_rng(0)
  x = rng.random(N1M, dtype=np.float32)
  rows = []

  def bar(name, t, limit):
    ok = "ok" if t < limit else "OVER"
    rows.append((name, t, limit, ok))
    print(f"{name:<48} {t * 1e3:9.2f} ms   (bar {limit:g} s: {ok})")

  print(f"refimpl benchmark  (numpy {np.__version__}, budget {default_budget() / 2**30:.1f} GiB, median of {a.repeat})")
  g_ew = elementwise_kernel(N1M)
  out = evaluate(g_ew, {"param0": x})
  assert np.array_equal(out["param1"], x * np.float32(2) + np.float32(1))
  t_ew = timed(lambda: evaluate(g_ew, {"param0": x}), a.repeat)
  bar("kernel: 1M elementwise  out[i] = x[i]*2+1", t_ew, 0.2)

  g_red = sum_kernel_reduce(N1M)
  assert np.isclose(evaluate(g_red, {"param0": x})["param1"][0], x.sum(dtype=np.float64), rtol=1e-5)
  t_red = timed(lambda: evaluate(g_red, {"param0": x}), a.repeat)
  bar("kernel: 1M sum, REDUCE over RANGE", t_red, 0.2)

  g_acc = sum_kernel_accumulator(N1M)
  got = evaluate(g_acc, {"param0": x})["param1"][0]
  assert got == np.add.accumulate(x)[-1], "the accumulator must be bit-exact with the sequential loop"
  t_acc = timed(lambda: evaluate(g_acc, {"param0": x}), a.repeat)
  bar("kernel: 1M sum, REG accumulator (sequential order)", t_acc, 0.2)

  g_acc2 = sum_kernel_accumulator_2d(1024, N1M // 1024)
  x2 = x.reshape(1024, -1)
  got = evaluate(g_acc2, {"param0": x2})["param1"]
  assert got == np.add.accumulate(x)[-1], "the accumulator over two loops must be bit-exact with the sequential loops"
  t_acc2 = timed(lambda: evaluate(g_acc2, {"param0": x2}), a.repeat)
  bar("kernel: 1M sum, REG accumulator over 2 loops", t_acc2, 0.2)

  M = K = N = 512
  A, B = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
  g_mm = gemm_composition(M, K, N)
  res, m = run(g_mm, {0: A, 1: B})
  err = np.abs(res["out0"][:, 0, :].astype(np.float64) - A.astype(np.float64) @ B.astype(np.float64)).max()
  t_mm = timed(lambda: evaluate(g_mm, {0: A, 1: B}), max(1, a.repeat // 2))
  bar("tensor: 512^3 gemm as (A.reshape*B.reshape).sum(1)", t_mm, 2.0)
  print(f"{'':<48} peak {m.budget.peak / 2**20:.1f} MiB held (the (M,K,N) product would be "
        f"{M * K * N * 4 / 2**20:.0f} MiB; budget {m.budget.limit / 2**30:.1f} GiB), max |err| vs float64 {err:.2e}")

  if not a.no_tinygrad:
    n = a.tg_size
    tg = tinygrad_times(n)
    if tg is None:
      print("tinygrad not available: no emulator ratio")
    else:
      ours_ew = timed(lambda: evaluate(elementwise_kernel(n), {"param0": x[:n]}), a.repeat)
      ours_acc = timed(lambda: evaluate(sum_kernel_accumulator(n), {"param0": x[:n]}), a.repeat)
      scale = N1M / n
      print(f"tinygrad PYTHON emulator (kernel execution only) at {n} elements:")
      for name, t_tg, t_same, t_1m in (("elementwise", tg["elementwise"], ours_ew, t_ew), ("sum", tg["sum"], ours_acc, t_acc)):
        est = t_tg * scale
        print(f"  {name:<11} emulator {t_tg:8.3f} s; refimpl same size {t_same * 1e3:7.2f} ms -> {t_tg / t_same:8.0f}x;"
              f"  1M: emulator ~{est:6.1f} s (linear) vs refimpl {t_1m * 1e3:6.2f} ms -> {est / t_1m:8.0f}x (goal >= 100x)")
  bad = [r for r in rows if r[3] != "ok"]
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
