"""Our kernels against NumPy and tinygrad's CPU backend, on the same inputs in one run.

    .venv/bin/python bench/bench_kernels.py [--cases add,sum,...] [--targets c,opencl]
                                            [--beam N] [--runs N] [--no-tinygrad]

For each case the graph is built with the tinyspec front end (the seed's compositions:
gemm is `(A.reshape(M,K,1) * B.reshape(1,K,N)).sum(1)`, the convolution is PAD,
EXPAND/RESHAPE/SHRINK windows and a REDUCE), compiled with the default heuristics (or a
BEAM search), its inputs bound once (Executable.bind: uploaded, outputs allocated), and
each launch of the whole program is timed: every kernel, its launch overhead (ctypes
call and thread pool, or the OpenCL enqueue) and the wait for the device; compile time
is not. NumPy is timed on the same arrays, both as the plain expression (which
allocates its result) and, where NumPy has one, with a preallocated `out=`; the faster
counts. tinygrad (if importable; DEV=CPU, its clang backend) runs the same composition
on realized tensors; each realize includes its scheduling overhead.
Times are medians of warm runs (after 2 warm-up runs), the columns' runs interleaved
round by round. Ratios are throughput relative to NumPy: NumPy's time / ours (higher is
better; 1.00x = as fast as NumPy). The machine is shared: run it twice and compare
before trusting a single figure.
OpenBLAS's worker threads spin for about 2^28 cycles after each call returns before they
sleep; on a 2-core machine the column timed right after NumPy's gemm then shares its
cores with them (our gemm measured 55 ms instead of 23 ms that way). The benchmark sets
OPENBLAS_THREAD_TIMEOUT=4 (the shortest spin; NumPy's own times do not change with it)
unless the environment already sets it.
Every result is checked against NumPy before it is timed.
"""
from __future__ import annotations
import argparse
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("DEV", "CPU")       # tinygrad: its CPU (clang) backend
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")   # see the module doc; read when NumPy loads
import numpy as np  # noqa: E402  (after the environment above)

N16M = 16 * 1024 * 1024


# ------------------------------------------------------------------ the cases
# each: (inputs as numpy arrays, tinyspec builder, numpy expression, numpy with out= or None,
#        tinygrad builder or None, tolerance)
def _rand(rng, *shape): return rng.standard_normal(shape).astype(np.float32)


def softmax_t(x):
  m = x.max(1, keepdim=True)
  e = (x - m).exp()
  return e / e.sum(1, keepdim=True)


def softmax_np(x):
  e = np.exp(x - x.max(1, keepdims=True))
  return e / e.sum(1, keepdims=True)


def windows(x, k: int):
  """x (C, Hp, Wp) -> (C, k, k, Hp-k+1, Wp-k+1): w[c, i, j, h, v] = x[c, h+i, v+j], with
  EXPAND (repeat), RESHAPE and SHRINK only (tinygrad's pooling trick): repeating a row of
  length L and reading it back with period L+1 shifts each repetition by one."""
  C, Hp, Wp = x.shape
  for axis, L in ((1, Hp), (3, Wp)):     # after the first pass x is (C, k, Ho, Wp)
    o = L - k + 1
    reps = -(-k * (L + 1) // L)
    shape = list(x.shape)
    pre, post = shape[:axis], shape[axis + 1:]
    x = x.reshape(*pre, 1, L, *post).expand(*pre, reps, L, *post).reshape(*pre, reps * L, *post)
    x = x.shrink(tuple((0, d) for d in pre) + ((0, k * (L + 1)),) + tuple((0, d) for d in post))
    x = x.reshape(*pre, k, L + 1, *post)
    x = x.shrink(tuple((0, d) for d in pre) + ((0, k), (0, o)) + tuple((0, d) for d in post))
  # (C, k, Ho, k, Wo) -> (C, k, k, Ho, Wo)
  return x.permute(0, 1, 3, 2, 4)


def conv_t(x, w):
  """3x3 convolution, padding 1: x (1, Cin, H, W), w (Cout, Cin, 3, 3) -> (Cout, H, W)."""
  _, Cin, H, W = x.shape
  Cout = w.shape[0]
  xp = x.reshape(Cin, H, W).pad(((0, 0), (1, 1), (1, 1)))
  win = windows(xp, 3).reshape(1, Cin, 3, 3, H, W)
  return (win * w.reshape(Cout, Cin, 3, 3, 1, 1)).sum((1, 2, 3))


def conv_np(x, w):
  from numpy.lib.stride_tricks import sliding_window_view
  xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
  win = sliding_window_view(xp, (3, 3), axis=(1, 2))          # (Cin, H, W, 3, 3)
  return np.tensordot(w, win, axes=([1, 2, 3], [0, 3, 4]))    # BLAS


def gemm_t(a, b):
  M, K = a.shape
  N = b.shape[1]
  return (a.reshape(M, K, 1) * b.reshape(1, K, N)).sum(1)


def cases(rng):
  a, b, c = _rand(rng, N16M), _rand(rng, N16M), _rand(rng, N16M)
  out = np.empty_like(a)
  def fma_out(a, b, c):
    np.multiply(a, b, out=out); np.add(out, c, out=out)
  yield "add 16M", (a, b), lambda a, b: a + b, lambda a, b: a + b, (lambda a, b: np.add(a, b, out=out)), 0
  yield "a*b+c 16M", (a, b, c), lambda a, b, c: a * b + c, lambda a, b, c: a * b + c, fma_out, 1e-6
  yield "sum 16M", (a,), lambda a: a.sum(), lambda a: a.sum(), None, 1e-3
  yield "max 16M", (a,), lambda a: a.max(), lambda a: a.max(), None, 0
  x = _rand(rng, 4096, 1024)
  yield "softmax 4096x1024", (x,), softmax_t, softmax_np, None, 1e-5
  for n in (512, 1024, 2048):
    A, B = _rand(rng, n, n), _rand(rng, n, n)
    o = np.empty((n, n), np.float32)
    yield f"gemm {n}", (A, B), gemm_t, lambda A, B: A @ B, (lambda A, B, o=o: np.matmul(A, B, out=o)), 1e-3
  X, Wt = _rand(rng, 1, 64, 128, 128), _rand(rng, 64, 64, 3, 3) * 0.1
  yield "conv3x3 1x64x128x128", (X, Wt), conv_t, conv_np, None, 1e-3


# ------------------------------------------------------------------ runners
def ours(target: str, build, arrays, beam: int):
  """(launch, result) of the compiled program with its inputs bound, or (None, reason)."""
  from tinyspec.tensor import Tensor
  from tinyspec.compiler import compile_graph
  ts = [Tensor(x) for x in arrays]
  t = build(*ts)
  g, inputs = t.graph(), t.inputs()
  try:
    c = compile_graph(g, target, keep_stages=False, beam=beam)
    bound = c.executable().bind(inputs)
  except Exception as e:
    return None, f"{type(e).__name__}: {str(e)[:80]}"
  bound.run()
  return bound.run, bound.outputs()["out0"]


def tinygrad_module():
  try:
    from tinygrad import Tensor as TT, Device
    Device[Device.DEFAULT]
  except Exception as e:
    return None, f"tinygrad unavailable ({type(e).__name__}: {str(e)[:60]})"
  return TT, Device.DEFAULT


def theirs(TT, build, arrays):
  ts = [TT(x).realize() for x in arrays]
  f = lambda: build(*ts).realize()
  return f, f().numpy()


def close(got, want, tol) -> bool:
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  if got.shape != want.shape: got = got.reshape(want.shape)
  if tol == 0: return bool(np.array_equal(got, want))
  return bool(np.allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max()))))


def interleaved(fns: dict, runs: int, budget: float = 6.0) -> dict:
  """Median seconds of each function, their runs interleaved round by round so that a
  busy moment of the shared machine hits every column alike."""
  for f in fns.values(): f(); f()
  ts = {k: [] for k in fns}
  start = time.perf_counter()
  for r in range(runs):
    for k, f in fns.items():
      t = time.perf_counter(); f(); ts[k].append(time.perf_counter() - t)
    if r >= 2 and time.perf_counter() - start > budget: break
  return {k: float(np.median(v)) for k, v in ts.items()}


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--cases", help="comma-separated substrings of case names")
  ap.add_argument("--targets", default="c,opencl")
  ap.add_argument("--beam", type=int, default=0, help="also time each target with a BEAM search of this width")
  ap.add_argument("--runs", type=int, default=9)
  ap.add_argument("--no-tinygrad", action="store_true")
  a = ap.parse_args(argv)
  targets = a.targets.split(",")
  want = a.cases.split(",") if a.cases else None
  tg = (None, "--no-tinygrad") if a.no_tinygrad else tinygrad_module()
  from tinyspec.compiler.device import device
  print(f"host: {device('c').name}, {device('c').threads} threads; default heuristics"
        f"{f' and BEAM={a.beam}' if a.beam else ''}; tinygrad: {('DEV=' + tg[1]) if tg[0] else tg[1]}")
  cols = ["numpy"] + targets + ([f"{t}+beam" for t in targets] if a.beam else []) + (["tinygrad"] if tg[0] else [])
  print(f"{'case':22s}" + "".join(f"{c:>12s}" for c in cols) + "   " + "".join(f"{'x ' + c:>13s}" for c in cols[1:]))
  rng = np.random.default_rng(0)
  for name, arrays, build, np_expr, np_out, tol in cases(rng):
    if want and not any(w in name for w in want): continue
    ref = np_expr(*arrays)
    fns, notes = {"numpy": lambda: np_expr(*arrays)}, []
    if np_out is not None: fns["numpy out="] = lambda: np_out(*arrays)
    for col in cols[1:]:
      if col == "tinygrad":
        try: f, res = theirs(tg[0], build, arrays)
        except Exception as e: notes.append(f"tinygrad: {type(e).__name__}: {str(e)[:60]}"); continue
        if not close(res, ref, tol): notes.append("tinygrad: differs")
      else:
        target, bw = col.split("+")[0], (a.beam if col.endswith("+beam") else 0)
        f, res = ours(target, build, arrays, bw)
        if f is None: notes.append(f"{col}: {res}"); continue
        if not close(res, ref, tol): notes.append(f"{col}: WRONG RESULT")
      fns[col] = f
    t = interleaved(fns, a.runs)
    t_np = min(t["numpy"], t.get("numpy out=", float("inf")))
    cells = "".join(f"{t[c] * 1e3:10.2f}ms" if c in t else f"{'n/a':>12s}" for c in ["numpy"] + cols[1:])
    cells = cells[:12].replace(f"{t['numpy'] * 1e3:10.2f}ms", f"{t_np * 1e3:10.2f}ms") + cells[12:]
    ratios = "".join(f"{t_np / t[c]:12.2f}x" if c in t else f"{'n/a':>13s}" for c in cols[1:])
    print(f"{name:22s}{cells}   {ratios}" + (f"   [{'; '.join(notes)}]" if notes else ""), flush=True)


if __name__ == "__main__":
  main()
