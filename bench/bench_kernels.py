"""Our kernels against NumPy and tinygrad's CPU backend (and torch on a CUDA GPU), on the
same inputs in one run.

    .venv/bin/python bench/bench_kernels.py [--cases add,sum,...] [--targets c,opencl]
                                            [--beam N] [--runs N] [--no-tinygrad]
                                            [--gpu] [--json PATH|-] [--scale S]

--gpu: the GPU mode. Our opencl program (on the OpenCL device TINYSPEC_OPENCL_DEVICE
opens: register NVIDIA's ICD first) against torch on CUDA (fp32, TF32 off), when torch
with CUDA is importable; ratios are torch's time / ours, and each column's GB/s (inputs
read + output written, once) and GFLOPS are printed next to the device's datasheet peak
(spec/render.yaml device_tables, matched by name, or --peak NAME).
--json: every figure as one JSON document (to a file, or - for stdout).
--scale: divide every case's element count by about this factor (quick runs, tests).

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
Every result is checked against NumPy before it is timed: a column whose result is
outside the case's tolerance is not timed, is reported WRONG, and the run exits 1.
"""
from __future__ import annotations
import argparse
import ctypes
import json
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# NumPy is timed as a user has it: OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) pin OpenBLAS to
# another CPU's kernels (Haswell's AVX2 ones on an AVX-512 host: gemm 2x slower), so the
# benchmark runs itself again without them, before NumPy loads (--keep-openblas-env keeps them)
PINS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if __name__ == "__main__" and any(k in os.environ for k in PINS) and "--keep-openblas-env" not in sys.argv[1:]:
  print(f"note: running without {', '.join(k + '=' + os.environ[k] for k in PINS if k in os.environ)} "
        "(NumPy's OpenBLAS picks this CPU's own kernels, as a user's would)", file=sys.stderr, flush=True)
  os.execve(sys.executable, [sys.executable, *sys.argv], {k: v for k, v in os.environ.items() if k not in PINS})
os.environ.setdefault("DEV", "CPU")       # tinygrad: its CPU (clang) backend
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")   # see the module doc; read when NumPy loads
# NumPy, and tinyspec (which loads it), after the environment above
import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402
from tinyspec.tensor import Tensor  # noqa: E402
from tinyspec.compiler import compile_graph  # noqa: E402
from tinyspec.compiler.device import host_threads, device  # noqa: E402
from tinyspec.compiler.rendertables import render_tables  # noqa: E402
from tinyspec.compiler.analysis.gpucheck import launch_report  # noqa: E402
from tinyspec.compiler.runtime.c import load, CHUNKS_PER_WORKER  # noqa: E402
from tinyspec.compiler.runtime.opencl import device as cl_device  # noqa: E402

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
  xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
  win = sliding_window_view(xp, (3, 3), axis=(1, 2))          # (Cin, H, W, 3, 3)
  return np.tensordot(w, win, axes=([1, 2, 3], [0, 3, 4]))    # BLAS


def gemm_t(a, b):
  M, K = a.shape
  N = b.shape[1]
  return (a.reshape(M, K, 1) * b.reshape(1, K, N)).sum(1)


def cases(rng, scale: int = 1, gpu: bool = False):
  """(name, arrays, tinyspec builder, numpy expression, numpy with out= or None, tolerance,
  flops) of each benchmark case; `scale` shrinks the element counts (quick runs); `gpu`
  adds gemm 4096 (a GPU's fp32 gemm reaches its peak only there)."""
  n = max(1024, N16M // scale)
  a, b, c = _rand(rng, n), _rand(rng, n), _rand(rng, n)
  out = np.empty_like(a)
  def fma_out(a, b, c):
    np.multiply(a, b, out=out); np.add(out, c, out=out)
  tag = "16M" if n == N16M else str(n)
  yield f"add {tag}", (a, b), lambda a, b: a + b, lambda a, b: a + b, (lambda a, b: np.add(a, b, out=out)), 0, n
  yield f"a*b+c {tag}", (a, b, c), lambda a, b, c: a * b + c, lambda a, b, c: a * b + c, fma_out, 1e-6, 2 * n
  yield f"sum {tag}", (a,), lambda a: a.sum(), lambda a: a.sum(), None, 1e-3, n
  yield f"max {tag}", (a,), lambda a: a.max(), lambda a: a.max(), None, 0, n
  rows = max(16, 4096 // scale)
  x = _rand(rng, rows, 1024)
  yield f"softmax {rows}x1024", (x,), softmax_t, softmax_np, None, 1e-5, 5 * x.size
  shrink = 2 ** round(math.log2(max(1, scale)) / 3)     # gemm: powers of two stay powers of two
  for m in sorted({max(32, k // shrink) for k in (512, 1000, 1024, 2048) + ((4096,) if gpu else ())}):   # 1000: no tile divides it (padded tiles)
    A, B = _rand(rng, m, m), _rand(rng, m, m)
    o = np.empty((m, m), np.float32)
    yield f"gemm {m}", (A, B), gemm_t, lambda A, B: A @ B, (lambda A, B, o=o: np.matmul(A, B, out=o)), 1e-3, 2 * m ** 3
  hw = max(16, 128 // 2 ** round(math.log2(max(1, scale)) / 2))
  X, Wt = _rand(rng, 1, 64, hw, hw), _rand(rng, 64, 64, 3, 3) * 0.1
  yield f"conv3x3 1x64x{hw}x{hw}", (X, Wt), conv_t, conv_np, None, 1e-3, 2 * 64 * 64 * 9 * hw * hw


# ------------------------------------------------------------------ runners
def ours(target: str, build, arrays, beam: int):
  """(launch, result) of the compiled program with its inputs bound, or (None, reason)."""
  ts = [Tensor(x) for x in arrays]
  t = build(*ts)
  g, inputs = t.graph(), t.inputs()
  try:
    c = compile_graph(g, target, keep_stages=False, beam=beam)
    bound = c.executable().bind(inputs)
  except Exception as e:
    return None, f"{type(e).__name__}: {str(e)[:80]}"
  bound.run()
  run = lambda: bound.run()
  run.launches = launches(c)
  return run, bound.outputs()["out0"]


def launches(c) -> list:
  """Each OpenCL kernel's launch (compiler/analysis/gpucheck.py): work-groups, items, local bytes."""
  if c.target != "opencl": return []
  try:
    return [{"kernel": k.name, "groups": k.groups, "group_items": k.group_items, "local_bytes": k.local_bytes,
             "coalesced": all(a.coalesced for a in k.accesses), "local_tiled": getattr(k, "local_tiled", None)} for k in launch_report(c)]
  except Exception as e:
    return [{"error": f"{type(e).__name__}: {str(e)[:80]}"}]


def blas_info() -> dict:
  """NumPy's BLAS as threadpoolctl reads it: library, version, kernel set (corename), threads."""
  try:
    from threadpoolctl import threadpool_info  # noqa: PLC0415 (threadpoolctl: a test extra (tinyspec[test]))
  except ImportError:
    return {"kernels": "unknown (pip install threadpoolctl to see which OpenBLAS kernels run)"}
  for lib in threadpool_info():
    if lib.get("user_api") == "blas":
      return {"library": lib.get("internal_api"), "version": lib.get("version"), "kernels": lib.get("architecture"),
              "threads": lib.get("num_threads")}
  return {"kernels": "unknown (threadpoolctl found no BLAS)"}


def tinygrad_module():
  try:
    from tinygrad import Tensor as TT, Device  # noqa: PLC0415 (tinygrad: an optional dependency (tinyspec[tinygrad]))
    Device[Device.DEFAULT]
  except Exception as e:
    return None, f"tinygrad unavailable ({type(e).__name__}: {str(e)[:60]})"
  return TT, Device.DEFAULT


def theirs(TT, build, arrays):
  ts = [TT(x).realize() for x in arrays]
  f = lambda: build(*ts).realize()
  return f, f().numpy()


def torch_cuda():
  """torch (with CUDA, TF32 off) or (None, why not)."""
  try:
    import torch  # noqa: PLC0415 (torch: not a dependency; timed where it is installed)
    if not torch.cuda.is_available(): return None, "torch has no CUDA device"
  except Exception as e:
    return None, f"torch unavailable ({type(e).__name__})"
  torch.backends.cuda.matmul.allow_tf32 = False
  torch.backends.cudnn.allow_tf32 = False
  return torch, torch.cuda.get_device_name(0)


TORCH_EXPR = {   # the case's expression in torch (by the case name's first word)
  "add": lambda t, a, b: a + b,
  "a*b+c": lambda t, a, b, c: a * b + c,
  "sum": lambda t, a: a.sum(),
  "max": lambda t, a: a.max(),
  "softmax": lambda t, x: t.softmax(x, 1),
  "gemm": lambda t, A, B: A @ B,
  "conv3x3": lambda t, X, W: t.nn.functional.conv2d(X, W, padding=1)[0],
}


def theirs_torch(torch, name, arrays):
  ts = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in arrays]
  expr = TORCH_EXPR[name.split()[0]]
  def f():
    r = expr(torch, *ts)
    torch.cuda.synchronize()
    return r
  return f, f().cpu().numpy()


def copy_bandwidth(torch, n: int = N16M, runs: int = 21) -> dict:
  """GB/s (bytes read + written) of a device-to-device copy of n float32, timed as the
  cases are: torch's copy_ on CUDA, and an OpenCL enqueue_copy on the device our programs
  run on. An elementwise kernel moves its bytes no faster than this."""
  out = {}
  src, dst = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
  def f_torch(): dst.copy_(src); torch.cuda.synchronize()
  fns = {"torch": f_torch}
  try:
    import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
    ctx, q, _ = cl_device()
    a, b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n), cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n)
    def f_cl(): cl.enqueue_copy(q, b, a); q.finish()
    fns["opencl"] = f_cl
  except Exception as e:
    out["opencl_error"] = f"{type(e).__name__}: {str(e)[:80]}"
  for k, t in interleaved(fns, runs).items(): out[k] = 8 * n / t / 1e9
  return out


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


def peak_of(name: str, want: str | None):
  """The device_tables row for the device (by --peak, or a table name in its name)."""
  rows = render_tables().get("device_tables", {})
  if want: return rows.get(want)
  return next((r for k, r in rows.items() if k.lower() in name.lower()), None)


# The host's memory ceiling, measured in the same run and the same way as our kernel: a
# hand-written C loop that only reads (4 vector accumulators) its own copy of the case's
# input (our bound kernel reads its own copy too), in the runtime's chunks on the same
# threads, its runs interleaved with NumPy's as our kernel's are. A reduction that must read
# its whole input cannot beat it, so NumPy's time over it bounds the ratio any such kernel
# can reach here (printed as "best" for sum and max). Why so careful: how much of a 64 MiB
# input a 32 MiB L3 still holds on the next run depends on what ran in between, and moves
# these figures by 1.5x (a probe timed alone, separately, was "beaten" by our sum kernel).
CEILING_C = r"""
#include <stdint.h>
#include <string.h>
typedef float fx __attribute__((vector_size(64)));
float probe_read(const float* restrict a, int64_t lo, int64_t hi) {
  fx s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, x;
  for (int64_t i = lo; i + 64 <= hi; i += 64) {
    memcpy(&x, a + i, 64); s0 += x; memcpy(&x, a + i + 16, 64); s1 += x;
    memcpy(&x, a + i + 32, 64); s2 += x; memcpy(&x, a + i + 48, 64); s3 += x;
  }
  s0 += s1 + s2 + s3;
  return s0[0];
}
"""


def is_read_bound(nbytes: int, flops: int, out_bytes: int) -> bool:
  """A reduction that only reads: few flops per byte and a tiny output (sum, max)."""
  return 4 * flops <= nbytes and out_bytes * 100 <= nbytes


def read_probe(arrays):
  """() -> None: one pass of the C read loop over a private copy of the arrays, in chunks
  taken by the calling thread and the pool's as the C runtime runs a threaded kernel."""
  f = load(CEILING_C).probe_read
  f.argtypes, f.restype = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64], ctypes.c_float
  copy = np.concatenate([np.ascontiguousarray(x, np.float32).ravel() for x in arrays])
  n, T = copy.size, host_threads()
  step = -(-n // (CHUNKS_PER_WORKER * T) // 64) * 64
  chunks = [(lo, min(n, lo + step)) for lo in range(0, n, step)]
  pool = ThreadPoolExecutor(max(1, T - 1))
  def once(_keep=copy):
    todo = iter(chunks)                    # next() on it is atomic under the GIL
    def work():
      for c in todo: f(copy.ctypes.data, *c)
    helpers = [pool.submit(work) for _ in range(T - 1)]
    work()
    for h in helpers: h.result()
  return once


def columns(a, tg, th) -> list:
  cols = ["numpy"] + a.targets + ([f"{t}+beam" for t in a.targets] if a.beam else [])
  return cols + (["tinygrad"] if tg[0] else []) + (["torch"] if th[0] else [])


def run_case(case, cols, a, tg, th) -> dict:
  """Check every column's result, then time each one that agrees against the baseline,
  interleaved; a read-bound reduction also times the read ceiling so (C hosts). The
  baseline's time shown is the median over its rounds; each ratio is within its own."""
  name, arrays, build, np_expr, np_out, tol, flops = case
  ref = np_expr(*arrays)
  nbytes = sum(x.nbytes for x in arrays) + np.asarray(ref).nbytes
  fns, checks, launch = {"numpy": lambda: np_expr(*arrays)}, {}, {}
  probe = a.ceiling and is_read_bound(nbytes, flops, np.asarray(ref).nbytes)
  if np_out is not None: fns["numpy out="] = lambda: np_out(*arrays)
  for col in cols[1:]:
    try:
      if col == "tinygrad": f, res = theirs(tg[0], build, arrays)
      elif col == "torch": f, res = theirs_torch(th[0], name, arrays)
      else:
        f, res = ours(col.split("+")[0], build, arrays, a.beam if col.endswith("+beam") else 0)
        if f is None: checks[col] = res; continue
    except Exception as e:
      checks[col] = f"{type(e).__name__}: {str(e)[:60]}"; continue
    if not close(res, ref, tol): checks[col] = "WRONG RESULT"; continue
    checks[col] = "ok"
    fns[col] = f
    if getattr(f, "launches", None): launch[col] = f.launches
  base = "torch" if a.gpu and "torch" in fns else "numpy"
  base_fns = {k: f for k, f in fns.items() if k in (base, f"{base} out=")}
  others = {k: f for k, f in fns.items() if k not in base_fns}
  if probe: others["read ceiling"] = read_probe(arrays)
  # each column in rounds of its own with the baseline: how much of a 64 MiB input the L3
  # still holds on the next run depends on what ran in between, so every column gets the
  # same company (one other buffer) and its ratio is taken within its rounds
  t, tbase = {}, {}
  for k, f in others.items():
    tp = interleaved({**base_fns, k: f}, a.runs)
    tbase[k] = min(tp[base], tp.get(f"{base} out=", float("inf")))
    t[k] = tp[k]
  if not tbase:
    tp = interleaved(base_fns, a.runs)
    tbase[base] = min(tp[base], tp.get(f"{base} out=", float("inf")))
  t[base] = float(np.median(list(tbase.values())))
  extra = {}
  if probe:
    tc, tn = t.pop("read ceiling"), tbase.pop("read ceiling")
    extra = {"ceiling_ms": tc * 1e3, "ceiling_numpy_ms": tn * 1e3, "ceiling_gbs": nbytes / tc / 1e9, "best_ratio": tn / tc}
  return {**extra, "case": name, "check": checks, "ms": {k: v * 1e3 for k, v in t.items()}, "bytes": int(nbytes), "flops": int(flops),
          "out_bytes": int(np.asarray(ref).nbytes), "baseline": base, "launches": launch,
          "baseline_ms": {k: v * 1e3 for k, v in tbase.items() if k != base},
          "ratio": {k: tbase[k] / v for k, v in t.items() if k != base},
          "gbs": {k: nbytes / v / 1e9 for k, v in t.items()}, "gflops": {k: flops / v / 1e9 for k, v in t.items()}}


def row_text(r, cols) -> str:
  cells = "".join(f"{r['ms'][c]:10.2f}ms" if c in r["ms"] else f"{'n/a':>12s}" for c in cols)
  ratios = "".join(f"{r['ratio'][c]:12.2f}x" if c in r["ratio"] else f"{'':>13s}" for c in cols if c != r["baseline"])
  rate = "".join(f"{r['gbs'][c]:9.1f}GB/s{r['gflops'][c]:9.1f}GF" for c in cols if c in r["ms"] and c not in ("numpy", "tinygrad"))
  notes = [f"{c}: {v}" for c, v in r["check"].items() if v != "ok"]
  best = f"   best {r['best_ratio']:.2f}x (read ceiling {r['ceiling_gbs']:.1f}GB/s)" if "best_ratio" in r else ""
  return f"{r['case']:22s}{cells}   {ratios}   {rate}{best}" + (f"   [{'; '.join(notes)}]" if notes else "")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--cases", help="comma-separated substrings of case names")
  ap.add_argument("--targets", default=None, help="default c,opencl (--gpu: opencl)")
  ap.add_argument("--beam", type=int, default=0, help="also time each target with a BEAM search of this width")
  ap.add_argument("--runs", type=int, default=9)
  ap.add_argument("--no-tinygrad", action="store_true")
  ap.add_argument("--gpu", action="store_true", help="GPU mode: opencl against torch CUDA, GB/s and GFLOPS against the peak")
  ap.add_argument("--peak", help="the spec/render.yaml device_tables row giving the peaks (default: matched by device name)")
  ap.add_argument("--json", help="write every figure as JSON to this path (- for stdout)")
  ap.add_argument("--scale", type=int, default=1, help="divide the element counts by about this (quick runs)")
  ap.add_argument("--keep-openblas-env", action="store_true", help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (by default the "
                                                                     "benchmark runs without them: NumPy with this CPU's own kernels)")
  a = ap.parse_args(argv)
  a.targets = (a.targets or ("opencl" if a.gpu else "c,opencl")).split(",")
  want = a.cases.split(",") if a.cases else None
  tg = (None, "--no-tinygrad") if a.no_tinygrad or a.gpu else tinygrad_module()
  th = torch_cuda() if a.gpu else (None, "no --gpu")
  dev = device("opencl") if "opencl" in a.targets else device("c")
  peak = peak_of(dev.name, a.peak) if a.gpu else None
  out = sys.stderr if a.json == "-" else sys.stdout
  head = {"host": device("c").name, "threads": device("c").threads, "device": dev.name, "heuristics": "BEAM=%d" % a.beam if a.beam else "default",
          "tinygrad": ("DEV=" + tg[1]) if tg[0] else tg[1], "torch": th[1], "peak": peak, "blas": blas_info(),
          "openblas_env": {k: os.environ[k] for k in PINS if k in os.environ},
          "shared_machine_note": "ratios are measured side by side; the machine may be shared"}
  print(f"host: {head['host']}, {head['threads']} threads; device: {dev.name}; {head['heuristics']} heuristics; tinygrad: {head['tinygrad']}; torch: {th[1]}", file=out)
  b = head["blas"]
  print(f"numpy {np.__version__}, BLAS: {b.get('library', '?')} {b.get('version', '')}, kernels {b['kernels']}, {b.get('threads', '?')} threads"
        + (f" (pinned: {head['openblas_env']})" if head["openblas_env"] else ""), file=out)
  if peak: print(f"peak ({dev.name}): {peak.get('peak_gbs', 0):.0f} GB/s, {peak.get('peak_gflops', 0):.0f} GFLOPS fp32", file=out)
  if a.gpu:
    try:
      d = cl_device()[2]
      head["opencl"] = {"device": d.name, "driver": d.driver_version, "platform": d.platform.version, "compute_units": d.max_compute_units}
    except Exception as e:
      head["opencl"] = f"unavailable: {type(e).__name__}: {str(e)[:80]}"
    if th[0]: head["torch_version"] = f"{th[0].__version__} (CUDA {th[0].version.cuda})"
    print(f"opencl: {head['opencl']}; torch: {head.get('torch_version')}", file=out)
  if th[0]:
    head["copy_gbs"] = copy_bandwidth(th[0])
    print("measured device-to-device copy of 64 MiB (read + write): " + ", ".join(
      f"{k} {v:.0f} GB/s" if isinstance(v, float) else f"{k}: {v}" for k, v in head["copy_gbs"].items()), file=out)
  cols = columns(a, tg, th)
  base = "torch" if th[0] else "numpy"
  print(f"{'case':22s}" + "".join(f"{c:>12s}" for c in cols) + "   " + "".join(f"{'x ' + c:>13s}" for c in cols if c != base), file=out)
  a.ceiling = "c" in a.targets and not a.gpu
  if a.ceiling:
    print(f"every column is timed in rounds with the baseline alone (its ratio is within those rounds); best: NumPy's time over "
          f"a C loop's that only reads a copy of the input ({head['threads']} threads), timed so too: the most any kernel that must "
          "read the input could reach against NumPy in this run", file=out)
  rows = []
  for case in cases(np.random.default_rng(0), a.scale, a.gpu):
    if want and not any(w in case[0] for w in want): continue
    r = run_case(case, cols, a, tg, th)
    rows.append(r)
    print(row_text(r, cols), file=out, flush=True)
  if a.json:
    doc = json.dumps({**head, "columns": cols, "cases": rows}, indent=1)
    if a.json == "-": print(doc)
    else: Path(a.json).write_text(doc)
  wrong = [f"{r['case']}: {c}" for r in rows for c, v in r["check"].items() if v == "WRONG RESULT"]
  if wrong: print("WRONG RESULTS: " + "; ".join(wrong), file=out)
  return 1 if wrong else 0


if __name__ == "__main__":
  sys.exit(main())
