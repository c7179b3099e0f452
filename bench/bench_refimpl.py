"""Benchmark of the NumPy reference evaluator (refimpl), with the issues' bars:

  * kernel level, 1M-element elementwise kernel   out[i] = x[i]*2 + 1        < 0.2 s
  * kernel level, 1M-element sum kernel            (REDUCE over a RANGE, and the
                                                    tinygrad form: a REG accumulator,
                                                    over one loop or two)              < 0.2 s
  * tensor level, 512x512x512 gemm written as seed 001's composition
    (A.reshape(M,K,1) * B.reshape(1,K,N)).sum(1) as a raw graph  < 2 s, within the budget
  * when tinygrad is installed: the kernel forms tinygrad emits for what its test_ops.py
    tests (reductions over prime row lengths with REG accumulators, argmax, wrapping integer
    products, upcast accumulators, mean/var, cumsum, gather, matmul, conv2d, softmax, an
    elementwise op) at >= 1000x tinygrad's PYTHON emulator (DEV=PYTHON). In one child process
    on the PYTHON device, each form is realized once (tinyspec's importer captures its
    lowered programs and their inputs), the emulator timed inside its PythonProgram.__call__
    only (scheduling and compiling not counted), and each imported program evaluated by
    refimpl on the same inputs (a full evaluate(), validation included; median of --repeat),
    side by side: the ratio is emulator time / refimpl time, summed over the form's kernels,
    both in CPU time (time.process_time: both run on one core, and the machine may be shared).
    refimpl's results are checked against tinygrad's (integers equal, floats within 1e-3).

Times are medians of --repeat warm runs, each a full evaluate() (validation included).
Run: .venv/bin/python bench/bench_refimpl.py [--repeat 5] [--forms sum,argmax,...] [--scale S] [--no-tinygrad]
--scale S divides every form's element count by about S (a quick run; the ratios shrink
with the size, since the emulator's time grows with it and refimpl's mostly does not).
"""
from __future__ import annotations
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from tinyspec.refimpl import evaluate                      # noqa: E402
from tinyspec.refimpl.engine import run                    # noqa: E402
from tinyspec.refimpl.build import Builder                 # noqa: E402
from tinyspec.refimpl.budget import default_budget         # noqa: E402
from tinyspec.interop.script import import_script          # noqa: E402

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


def accumulator_kernel(n, op="ADD", start=0.0):
  """tinygrad's form of a fold: acc.after().store(start); acc.after(init, k).store(OP(acc, x[k])).end(k);
  acc.after(end). The sum kernel is OP=ADD from 0."""
  b = Builder()
  x = b.param((n,), F32, 0); out = b.param((1,), F32, 1)
  acc = b.buffer((1,), F32, 0, addrspace="REG")
  z = b.const(0, "index")
  init = b.STORE(b.INDEX(acc, z), b.const(start, F32))
  k = b.range(n, 0, "REDUCE")
  a = b.AFTER(acc, init, k)
  e = b.END(b.STORE(b.INDEX(a, z), b.add(op, b.INDEX(a, z), b.INDEX(x, k))), k)
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


def timed(fn, repeat, clock=time.perf_counter):
  fn()   # warm: tables loaded, caches filled
  ts = []
  for _ in range(repeat):
    t = clock(); fn(); ts.append(clock() - t)
  return statistics.median(ts)


# name -> (the inputs, the tensors realized); sizes for an emulator time of seconds each
FORMS = {   # name -> (what it is, the inputs, the tensors realized); sizes for an emulator time of seconds
  "elementwise": ("x*2+1 over 512x1024", "x = floats(512, 1024)", "x * 2 + 1"),
  "sum": ("sum of rows of 4099 (prime)", "x = floats(128, 4099)", "x.sum(1)"),
  "max": ("max of rows of 4099", "x = floats(128, 4099)", "x.max(1)"),
  "argmax": ("argmax of rows of 4099", "x = floats(32, 4099)", "x.argmax(1)"),
  "prod": ("int32 product of rows of 4099 (wraps)", "k = ints(128, 4099)", "k.prod(1)"),
  "sum0": ("sum over axis 0 of 512x1024 (upcast)", "x = floats(512, 1024)", "x.sum(0)"),
  "var": ("var of rows of 2053 (mean, var)", "x = floats(64, 2053)", "x.var(1)"),
  "cumsum": ("cumsum of rows of 256", "x = floats(4, 256)", "x.cumsum(1)"),
  "gather": ("gather 2048x129 by 2048x64", "x, i = floats(2048, 129), ints(2048, 64, lo=0, hi=129)", "x.gather(1, i)"),
  "matmul": ("matmul 67x65 @ 65x63", "a, b = floats(67, 65), floats(65, 63)", "a @ b"),
  "conv2d": ("conv2d 4->8 ch 3x3 on 80x80", "x, w = floats(1, 4, 80, 80), floats(8, 4, 3, 3)", "x.conv2d(w, padding=1)"),
  "softmax": ("softmax of rows of 1031", "x = floats(128, 1031)", "x.softmax(1)"),
}

FORM_SCRIPT = """
import numpy as np
from tinygrad import Tensor
rng = np.random.default_rng(0)
def floats(*s): return Tensor(rng.standard_normal(s).astype(np.float32)).realize()
def ints(*s, lo=-3, hi=4): return Tensor(rng.integers(lo, hi, s, dtype=np.int32)).realize()
{inputs}
Tensor.realize({expr})
"""


def scaled(inputs: str, scale: float) -> str:
  """The form's inputs with their first dimension divided by about `scale` (at least 1)."""
  return re.sub(r"\((\d+),", lambda m: f"({max(1, round(int(m.group(1)) / scale))},", inputs) if scale != 1 else inputs


def run_form(name: str, label: str, inputs: str, expr: str, repeat: int, scale: float) -> dict:
  """In a process on tinygrad's PYTHON device: realize the form under tinyspec's importer,
  timing the emulator; evaluate every imported program of it with refimpl."""
  from tinygrad.runtime import ops_python  # noqa: PLC0415 (tinygrad: optional, only in the child on its PYTHON device)
  spent = [0.0]
  orig = ops_python.PythonProgram.__call__
  def timed_call(self, *a, **k):
    t = time.process_time(); r = orig(self, *a, **k); spent[0] += time.process_time() - t; return r
  ops_python.PythonProgram.__call__ = timed_call
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "form.py")
    with open(path, "w") as f: f.write(FORM_SCRIPT.format(inputs=scaled(inputs, scale), expr=expr))
    res = import_script(path, check=False)
  ops_python.PythonProgram.__call__ = orig
  if res.error: return {"form": label, "error": res.error}
  last = max(int(g.name.split(".")[0][1:]) for g in res.graphs)
  programs = [g for g in res.graphs if g.level == "program" and g.name.startswith(f"r{last}.")]
  ours, wrong = 0.0, []
  for g in programs:
    out = evaluate(g.graph, dict(g.inputs))
    for k, got in out.items():
      want, got = g.expected.get(k), np.asarray(got)
      if want is None: continue
      same = np.array_equal(got, want) if want.dtype.kind in "iub" else np.allclose(got, want, rtol=1e-3, atol=1e-5, equal_nan=True)
      if not same: wrong.append(f"{g.name} {k}")
    ours += timed(lambda: evaluate(g.graph, dict(g.inputs)), repeat, clock=time.process_time)
  elements = sum(int(np.prod(a.shape)) for g in programs for a in g.inputs.values())
  return {"form": label, "kernels": len(programs), "elements": elements, "emulator": spent[0], "ours": ours, "wrong": wrong}


def tinygrad_forms(names, repeat: int, scale: float) -> list | None:
  """run_form for each form, in one child process on the PYTHON device (JSON lines back)."""
  try:
    import tinygrad  # noqa: F401, PLC0415 (is the optional tinygrad installed?)
  except ImportError:
    return None
  env = dict(os.environ, DEV="PYTHON")
  cmd = [sys.executable, __file__, "--child-forms", ",".join(names), "--repeat", str(repeat), "--scale", str(scale)]
  p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
  if p.returncode != 0:
    print("tinygrad PYTHON emulator run failed:", (p.stderr.strip().splitlines() or [p.returncode])[-1])
    return None
  return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def print_forms(results: list) -> list:
  """The side-by-side table; returns the forms under the bar (or wrong)."""
  bad = []
  print(f"tinygrad's kernel forms: its PYTHON emulator (kernel execution only) vs refimpl on the imported programs (bar >= {FORM_BAR}x)")
  print(f"  {'form':<40} {'kernels':>7} {'elements':>9} {'emulator':>10} {'refimpl':>10} {'ratio':>9}")
  for r in results:
    if "error" in r:
      print(f"  {r['form']:<40} error: {r['error']}"); bad.append(r["form"]); continue
    ratio = r["emulator"] / r["ours"] if r["ours"] else float("inf")
    ok = ratio >= FORM_BAR and not r["wrong"]
    if not ok: bad.append(r["form"])
    note = "ok" if ok else ("WRONG " + ", ".join(r["wrong"]) if r["wrong"] else "UNDER")
    print(f"  {r['form']:<40} {r['kernels']:>7} {r['elements']:>9} {r['emulator']:>9.2f}s {r['ours'] * 1e3:>8.2f}ms {ratio:>8.0f}x  {note}")
  return bad


FORM_BAR = 1000


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=5)
  ap.add_argument("--forms", default="", help="only the tinygrad forms whose names contain one of these (comma-separated)")
  ap.add_argument("--scale", type=float, default=1.0, help="divide the forms' sizes by about this")
  ap.add_argument("--no-tinygrad", action="store_true")
  ap.add_argument("--child-forms", default=None, help=argparse.SUPPRESS)
  a = ap.parse_args()
  if a.child_forms is not None:   # the PYTHON-device child of tinygrad_forms
    for name in a.child_forms.split(","): print(json.dumps(run_form(name, *FORMS[name], a.repeat, a.scale)), flush=True)
    return 0
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

  g_acc = accumulator_kernel(N1M)
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

  bad_forms = []
  if not a.no_tinygrad:
    names = [n for n in FORMS if not a.forms or n in a.forms.split(",")]
    results = tinygrad_forms(names, a.repeat, a.scale)
    if results is None: print("tinygrad not available: no emulator ratios")
    else: bad_forms = print_forms(results)
  bad = [r for r in rows if r[3] != "ok"]
  return 1 if bad or bad_forms else 0


if __name__ == "__main__":
  sys.exit(main())
