"""The GPU programs at awkward sizes, compiled for the OpenCL device that opens
(TINYSPEC_OPENCL_DEVICE; on a GPU machine: NVIDIA) with the default heuristics, run there
and compared with the reference evaluator. It complements tests/compiler/test_compiler_gpu_static.py
(which compiles for a table's GPU): here the heuristics see the real device.

    python bench/gpu_programs.py [--json PATH] [--only SUBSTRING]

Each program: row reductions fused a work-group per row (softmax, layer norm, logsumexp,
rows minus their sum) at widths whose tree combine has 2^k+1 items, long reductions (sum,
max) of odd lengths, gemms that are staged through local memory and ones that fall back
(prime and non-multiple sizes), a 3x3 convolution. Exit 1 when any result is outside its
tolerance or a compile fails; every row is printed (and written with --json).
"""
from __future__ import annotations
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kernels import conv_t, gemm_t, softmax_t   # noqa: E402
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.refimpl import evaluate
from tinyspec.compiler.device import device


def layer_norm(x):
  n = 1.0 / x.shape[1]
  d = x - x.sum(1, keepdim=True) * n
  return d / ((d * d).sum(1, keepdim=True) * n + 1e-5).sqrt()


def logsumexp(x):
  m = x.max(1, keepdim=True)
  return (x - m).exp().sum(1, keepdim=True).log() + m


def centered(x):
  return x - x.sum(1, keepdim=True)


def programs(rng):
  """(name, builder, arrays, rtol)"""
  f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
  for w in (3, 129, 258, 1000, 1024, 4097):
    yield f"softmax 64x{w}", softmax_t, (f32(64, w),), 1e-5
  for w in (129, 1000):
    yield f"layer_norm 64x{w}", layer_norm, (f32(64, w),), 1e-4
    yield f"logsumexp 64x{w}", logsumexp, (f32(64, w),), 1e-5
  yield "int32 rows - sum 64x129", centered, (rng.integers(-1000, 1000, (64, 129)).astype(np.int32),), 0
  yield "int32 rows - sum 33x258", centered, (rng.integers(-1000, 1000, (33, 258)).astype(np.int32),), 0
  for n in (65537, 1 << 20, (1 << 24) + 7):
    yield f"sum {n}", lambda a: a.sum(), (f32(n),), 1e-4
    yield f"max {n}", lambda a: a.max(), (f32(n),), 0
  for m, k, n in ((13, 64, 64), (64, 64, 64), (127, 129, 131), (256, 256, 256), (1000, 1000, 1000), (1024, 1024, 1024), (17, 2048, 64)):
    yield f"gemm {m}x{k}x{n}", gemm_t, (f32(m, k), f32(k, n)), 1e-4
  for c, hw in ((64, 32), (16, 31), (64, 128)):
    yield f"conv3x3 1x{c}x{hw}x{hw}", conv_t, (f32(1, c, hw, hw), f32(c, c, 3, 3) * 0.1), 1e-4


def check(name, build, arrays, rtol) -> dict:
  t = build(*[Tensor(a) for a in arrays])
  g, inputs = t.graph(), t.inputs()
  row = {"program": name}
  t0 = time.perf_counter()
  try:
    c = compile_graph(g, "opencl", keep_stages=False)
    got = c.executable().run(inputs)
  except Exception as e:
    return {**row, "ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
  row["seconds"] = round(time.perf_counter() - t0, 3)
  want = evaluate(g, inputs)
  got = np.asarray(got["out0"] if isinstance(got, dict) else got, np.float64)
  want = np.asarray(want["out0"] if isinstance(want, dict) else want, np.float64).reshape(got.shape)
  err = float(np.max(np.abs(got - want))) if got.size else 0.0
  scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
  row.update(max_abs_err=err, ok=bool(np.isfinite(got).all() == np.isfinite(want).all() and err <= rtol * scale),
             kernels=[{"name": k.name, "global": k.global_size, "local": k.local_size} for k in c.sources])
  return row


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--json")
  ap.add_argument("--only")
  a = ap.parse_args(argv)
  dev = device("opencl")
  print(f"device: {dev.name} ({dev.kind}, {dev.threads} compute units, warp {dev.warp}, vector {dev.vector_bytes} bytes)")
  rows = []
  for name, build, arrays, rtol in programs(np.random.default_rng(7)):
    if a.only and a.only not in name: continue
    r = check(name, build, arrays, rtol)
    rows.append(r)
    print(f"{'ok  ' if r['ok'] else 'FAIL'} {name:28s} " + (r.get("error") or f"max err {r['max_abs_err']:.3g}, {r['seconds']}s, "
          + "; ".join(f"{k['name']} {k['global']}/{k['local']}" for k in r["kernels"])), flush=True)
  if a.json: Path(a.json).write_text(json.dumps({"device": dev.name, "programs": rows}, indent=1, default=str))
  bad = [r["program"] for r in rows if not r["ok"]]
  print(f"{len(rows) - len(bad)} of {len(rows)} agree" + (f"; FAILED: {', '.join(bad)}" if bad else ""))
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
