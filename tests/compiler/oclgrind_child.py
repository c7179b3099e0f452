"""Run in a child process with TINYSPEC_OPENCL_DEVICE=Oclgrind (tests/compiler/test_oclgrind.py): the
GPU tables' programs at small and awkward sizes on the Oclgrind simulator, with its
data-race, bounds, uninitialized-read and barrier checks on (compiler/runtime/opencl.py
turns them on and fails a run it reports: rule run.oclgrind), and planted bugs it must find.

  python tests/compiler/oclgrind_child.py programs TABLE [SUBSTRING...]  -> one JSON line per program
                                                                  (those whose name holds a substring)
  python tests/compiler/oclgrind_child.py plant NAME       -> one JSON line: what the planted run gave

A separate process because the OpenCL ICD loader reads OCL_ICD_VENDORS (which the runtime
points at Oclgrind) once per process, at the first platform query.
"""
from __future__ import annotations
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_kernels import conv_t, gemm_t as gemm, softmax_t as softmax   # noqa: E402  (the programs the GPU run measures)
from gpu_programs import layer_norm, logsumexp                           # noqa: E402
SIZES = (1, 63, 65, 100, 129)


def programs(rng):
  """(name, builder, arrays): every GPU code path the tables' heuristics take, small."""
  f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
  for w in SIZES + (258, 300):
    for name, f in (("softmax", softmax), ("layer_norm", layer_norm), ("logsumexp", logsumexp)):
      yield f"{name} 3x{w}", f, (f32(3, w),)
    yield f"int32 rows - sum 3x{w}", lambda x: x - x.sum(1, keepdim=True), (rng.integers(-99, 99, (3, w)).astype(np.int32),)
  for n in SIZES + (4097, 65537):      # 65537: a grid-stride split reduction and its combine
    yield f"sum {n}", lambda a: a.sum(), (f32(n),)
    yield f"max {n}", lambda a: a.max(), (f32(n),)
  for m, k, n in ((64, 32, 64), (64, 48, 128), (128, 16, 64), (1, 16, 64), (63, 33, 65), (65, 100, 129), (100, 20, 1), (129, 17, 63)):
    yield f"gemm {m}x{k}x{n}", gemm, (f32(m, k), f32(k, n))       # 64-multiples are staged through local memory
  yield "conv3x3 64x16x8x8", conv_t, (f32(1, 16, 8, 8), f32(64, 16, 3, 3))
  yield "conv3x3 16x3x5x5", conv_t, (f32(1, 3, 5, 5), f32(16, 3, 3, 3))


def check(name, build, arrays, dev) -> dict:
  from tinyspec.tensor import Tensor
  from tinyspec.compiler import compile_graph, CompileError
  from tinyspec.compiler.analysis.gpucheck import launch_report
  from tinyspec.refimpl import evaluate
  t = build(*[Tensor(a) for a in arrays])
  g, inputs = t.graph(), t.inputs()
  row = {"program": name}
  try:
    c = compile_graph(g, "opencl", keep_stages=False, device=dev)
    row["local_bytes"] = sum(k.local_bytes for k in launch_report(c, dev))
    got = c.run(inputs)["out0"]
  except CompileError as e:
    return {**row, "ok": False, "error": f"[{e.rule}] {e}"[:1500]}
  want = np.asarray(evaluate(g, inputs)["out0"], np.float64)
  got = np.asarray(got, np.float64).reshape(want.shape)
  ok = np.allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max(initial=0))), equal_nan=True)
  return {**row, "ok": bool(ok), "max_err": float(np.nanmax(np.abs(got - want), initial=0))}


def plant(name: str) -> dict:
  """A staged gemm (64x32 @ 32x64 on the H100 table) with a bug planted in its source:
  `barrier` (the BARRIER after the multiply loop removed: the next step's copy races with
  this step's reads), `tile` (the B tile's float4 copy one element off: neighbouring items'
  stores overlap and the last runs past the tile) or `tile-uninit` (the A tile's first copy
  store one slot off, which leaves a slot unwritten: found with OCLGRIND_UNINITIALIZED=1).
  Oclgrind must report it: {"rule": "run.oclgrind"}."""
  from tinyspec.tensor import Tensor
  from tinyspec.compiler import compile_graph, CompileError
  from tinyspec.compiler.device import table_device
  from tinyspec.compiler.executor import Executable
  rng = np.random.default_rng(0)
  t = gemm(Tensor(rng.standard_normal((64, 32)).astype(np.float32)), Tensor(rng.standard_normal((32, 64)).astype(np.float32)))
  c = compile_graph(t.graph(), "opencl", keep_stages=False, device=table_device("h100"))
  src = c.program_source()
  fence = "barrier(CLK_LOCAL_MEM_FENCE);"
  if name == "barrier":
    at = src.rindex(fence)
    bad = src[:at] + src[at + len(fence):]
  elif name == "tile":            # the B tile's float4 copy one element off: overlapping stores, the last one past the tile
    at = src.index("vstore4(", src.index("__local"))
    end = src.index(");", at)
    bad = src[:at] + src[at:end] + " + 1L" + src[end:]
  elif name == "tile-uninit":     # the A tile's first copy store one slot off: one slot read unwritten
    import re
    m = re.search(r"l0\[(v\d+)\] = ", src)
    bad = src[:m.start()] + f"l0[{m.group(1)} + 1L] = " + src[m.end():]
  else:
    raise SystemExit(f"no plant {name!r}")
  assert bad != src
  try:
    Executable(c, source=bad).run(t.inputs())
    return {"plant": name, "rule": None}
  except CompileError as e:
    return {"plant": name, "rule": e.rule, "message": str(e)[:600]}


def main(argv) -> int:
  from tinyspec.compiler.runtime.opencl import device
  assert "oclgrind" in device()[2].name.lower(), device()[2].name
  if argv[0] == "programs":
    from tinyspec.compiler.device import table_device
    dev = table_device(argv[1])
    for name, build, arrays in programs(np.random.default_rng(3)):
      if argv[2:] and not any(w in name for w in argv[2:]): continue
      print(json.dumps(check(name, build, arrays, dev)), flush=True)
  else:
    print(json.dumps(plant(argv[1])), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
