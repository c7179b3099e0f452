"""The default OptOps (compiler/passes/heuristics.py) per device kind, and what they make:
register-tiled gemm with vector accumulators and a packed input, long reductions split
over the cores, vectorized float MAX on integer keys -- every one still equal to the
reference evaluator. Devices are given explicitly so that the choices do not depend on
the machine the tests run on."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.passes import callify, rangeify
from tinyspec.compiler.check import compare_outputs
from tinyspec.compiler.device import Device
from tinyspec.compiler.passes.heuristics import default_opts
from tinyspec.compiler.passes.optimize import initial_types
from tinyspec.refimpl import evaluate

from targets import TARGETS, HAVE_CL, CL_UNAVAILABLE
CPU4 = Device("c", "test cpu", "cpu", 4, 0, 0, False, 32)
GPU = Device("opencl", "test gpu", "gpu", 1, 32768, 256, False, 16)
RNG = np.random.default_rng(5)


def ints(*shape):
  return RNG.integers(-3, 4, shape).astype(np.float32)     # sums exact in any order


def kernels(t):
  return rangeify.rangeify(callify.callify(t.graph().root_uops())).kernels


def opts_of(t, dev, target="c"):
  return [default_opts(initial_types(k.sink), target, dev) for k in kernels(t)]


def gemm(a, b):
  M, K = a.shape
  N = b.shape[1]
  return (a.reshape(M, K, 1) * b.reshape(1, K, N)).sum(1)


def test_small_kernels_keep_their_loops():
  assert opts_of(Tensor(ints(8, 8)) + 1, CPU4) == [[]]


def test_elementwise_threads_on_cpu_and_workgroups_on_gpu():
  t = Tensor(ints(256, 256)) * 2
  (cpu,), (gpu,) = opts_of(t, CPU4), opts_of(t, GPU, "opencl")
  assert cpu == [["SPLIT", 1, [8, "UPCAST"]], ["SPLIT", 0, [16, "THREAD", True]]]   # vector lanes, then 4 chunks per core
  assert gpu == [["SPLIT", 1, [4, "UPCAST"]], ["SPLIT", 1, [64, "LOCAL"]]]   # float4, then workgroups


def test_gemm_is_register_tiled():
  """Both output axes UPCAST (the contiguous one by vector lanes x copies), the reduce
  unrolled, a panel of column tiles (LOCAL: a loop on C) ahead of the rows, THREAD."""
  (o,) = opts_of(gemm(Tensor(ints(256, 128)), Tensor(ints(128, 256))), CPU4)
  kinds = [x[2][1] for x in o if x[0] == "SPLIT"]
  assert kinds.count("UPCAST") == 3 and "UNROLL" in kinds and "THREAD" in kinds and ["SWAP", 0, 1] in o
  assert ["SPLIT", 1, [8, "UPCAST"]] in o           # 8 float32 lanes fill a 32-byte vector


def test_tile_rows_fit_the_accumulator_budget():
  """render.yaml tile_accumulators: 16 vector accumulators on a 64-byte-vector host (8 rows
  x 2 vectors of 16 lanes), 8 on a 32-byte one (2 rows x 4 vectors of 8 lanes)."""
  t = gemm(Tensor(ints(256, 128)), Tensor(ints(128, 256)))
  (wide,), (avx,) = opts_of(t, Device("c", "test avx512", "cpu", 4, 0, 0, False, 64)), opts_of(t, CPU4)
  assert ["SPLIT", 0, [8, "UPCAST"]] in wide and ["SPLIT", 1, [16, "UPCAST"]] in wide
  assert ["SPLIT", 0, [2, "UPCAST"]] in avx


def test_opencl_cpu_devices_take_their_own_tile():
  """render.yaml heuristics.cpu.by_target.opencl: PoCL's gemm tile is 8 rows x 2 vectors
  of 8 lanes (16 accumulators; measured twice as fast there as C's 2 x 4), and a
  work-group is 16 row tiles (LOCAL: PoCL runs them one after another on one core, so
  they share a column panel of B in cache), while C on the same 32-byte-vector host keeps
  2 rows x 4 vectors and no work-groups."""
  t = gemm(Tensor(ints(256, 128)), Tensor(ints(128, 256)))
  pocl = Device("opencl", "test pocl", "cpu", 4, 0, 0, False, 32)
  (cl,), (c,) = opts_of(t, pocl, "opencl"), opts_of(t, CPU4)
  assert ["SPLIT", 0, [8, "UPCAST"]] in cl and ["SPLIT", 1, [8, "UPCAST"]] in cl and ["SPLIT", 1, [2, "UPCAST"]] in cl
  assert ["SPLIT", 0, [16, "LOCAL"]] in cl and not any(o[0] == "SPLIT" and o[2][1] == "LOCAL" and o[1] == 0 for o in c)
  got = compile_graph(t.graph(), "opencl", keep_stages=False, device=pocl).run(t.inputs())["out0"] if HAVE_CL else None
  assert got is None or np.array_equal(got, t.inputs()["buf0"] @ t.inputs()["buf1"])
  assert ["SPLIT", 0, [2, "UPCAST"]] in c and ["SPLIT", 1, [4, "UPCAST"]] in c


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_sizes_the_tile_does_not_divide_are_padded(target):
  """90 columns: the tile of 32 is padded to 96 (PADTO: the last tile's columns masked),
  rows 70 take the tile's largest divisor; the result is exact."""
  a, b = Tensor(ints(70, 100)), Tensor(ints(100, 90))
  t = gemm(a, b)
  (o,) = opts_of(t, CPU4)
  assert o[0] == ["PADTO", 1, 32] and sum(x[0] == "SPLIT" and x[2][1] == "UPCAST" for x in o) == 3
  got = compile_graph(t.graph(), target, keep_stages=False).run(t.inputs())["out0"]
  assert np.array_equal(got, a.numpy() @ b.numpy())


def test_long_reduce_with_few_outputs_is_grouped():
  t = Tensor(ints(1 << 19)).sum()
  (cpu,), (gpu,) = opts_of(t, CPU4), opts_of(t, GPU, "opencl")
  assert cpu[0] == ["SPLIT", 0, [16, "GROUP_REDUCE", True]] and cpu[1][2][1] == "UNROLL"
  assert gpu[0] == ["SPLIT", 0, [256, "GROUP_REDUCE", False]]


@pytest.mark.parametrize("target", TARGETS)
def test_default_gemm_matches_and_is_vectorized_and_packed(target):
  a, b = Tensor(ints(96, 256)), Tensor(ints(256, 256))
  t = gemm(a, b)
  c = compile_graph(t.graph(), target, keep_stages=False)
  names = [k.name for k in c.schedule.kernels]
  if target == "c":
    assert any("pack" in n for n in names)           # B (256x256) copied into tile order first
    assert "vload_floatx" in c.source()               # vector loads (8 lanes with AVX, 4 with SSE)
  got = c.run(t.inputs())["out0"]
  assert np.array_equal(got, a.numpy() @ b.numpy())


def test_grouped_sum_matches_on_any_thread_count():
  x = ints(1 << 18)
  t = Tensor(x).sum()
  c = compile_graph(t.graph(), "c", opts_of(t, CPU4)[0], keep_stages=False)
  assert c.sources[0].thread == 16 and c.sources[0].tail
  ex = c.executable()
  for threads in (1, 2, 4):
    assert ex.run(t.inputs(), threads=threads)["out0"] == x.sum()


SPECIAL = np.array([0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("opts", [[], [["SPLIT", 1, [4, "UNROLL"]]], [["SPLIT", 1, [2, "GROUP_REDUCE", True]], ["SPLIT", 2, [2, "UNROLL"]]]])
def test_float_max_on_integer_keys_skips_nan_and_prefers_positive_zero(target, opts):
  """Rows mixing NaN (both signs), +-0, +-inf, denormals: a MAX reduction is decision
  reduce-max's, bit for bit (NaN skipped, -inf when every element is NaN; +0 over -0),
  however the reduction is split."""
  rows = [SPECIAL[[0, 1, 2, 3]], SPECIAL[[1, 1, 1, 1]], SPECIAL[[1, 0, 1, 1]], SPECIAL[[5, 5, 9, 5]], SPECIAL[[7, 2, 3, 4]],
          SPECIAL[[6, 5, 5, 5]], SPECIAL[[11, 10, 9, 8]], SPECIAL[[5, 4, 3, 2]], SPECIAL[[6, 7, 6, 7]]]
  x = np.stack(rows)
  t = Tensor(x).max(1)
  g, inputs = t.graph(), t.inputs()
  got = compile_graph(g, target, opts, keep_stages=False).run(inputs)
  want = evaluate(g, inputs)
  assert not compare_outputs(got, want)
  assert not np.signbit(got["out0"][2]) and got["out0"][4] == np.inf and got["out0"][5] == -np.inf and got["out0"][8] == -np.inf


@pytest.mark.parametrize("prog", ["gemm", "grouped sum"])
def test_every_stage_of_an_optimized_program_validates_and_evaluates(prog):
  """The stages of programs the heuristics transform most (packing kernel, vector
  accumulators, LOCAL partials and BARRIER) are graphs the validator accepts and the
  reference evaluator runs to the same outputs, the LINEAR programs included."""
  from tinyspec.compiler.check import check_stages
  t = gemm(Tensor(ints(32, 256)), Tensor(ints(256, 256))) if prog == "gemm" else Tensor(ints(1 << 18)).sum()
  c = check_stages(t.graph(), t.inputs(), target="c", opts=opts_of(t, CPU4)[-1])    # the test CPU's choices, on any host
  ops = {u.op for g in c.stages.values() for u in g.uops()}
  assert ("VCONST" in ops and len(c.schedule.kernels) == 2) if prog == "gemm" else ("BARRIER" in ops)


@pytest.mark.parametrize("target, kind, device_bytes, want", [
  ("opencl", "cpu", 64, 32),    # PoCL on an AVX-512 host prefers float16, which its LLVM cannot build: float8
  ("opencl", "cpu", 32, 32),    # PoCL on AVX2: float8, as it prefers
  ("opencl", "gpu", 4, 4),      # a GPU preferring scalars keeps them
  ("opencl", "gpu", 64, 16),    # GPUs: float4 at most
  ("c", "cpu", 64, 64),         # C with -march=native on AVX-512: the full register
])
def test_vector_width_is_the_device_preference_capped_by_the_table(target, kind, device_bytes, want):
  from tinyspec.compiler.device import vector_bytes
  assert vector_bytes(target, kind, device_bytes) == want


@pytest.mark.skipif(not HAVE_CL, reason=f"OpenCL unavailable: {CL_UNAVAILABLE}")
def test_the_opened_opencl_device_builds_its_widest_vectors():
  """What the heuristics may emit on this device (its widest float vectors, returned from a
  helper function as the tiled kernels do) builds and runs."""
  import pyopencl as cl
  from tinyspec.compiler.device import device
  from tinyspec.compiler.runtime.opencl import device as cl_device
  n = device("opencl").vector_bytes // 4
  ctx, queue, _ = cl_device()
  src = f"""float{n} twice(float{n} v) {{ return v + v; }}
  __kernel void k(__global const float* a, __global float* b) {{ vstore{n}(twice(vload{n}(0, a)), 0, b); }}"""
  x = np.arange(n, dtype=np.float32)
  mf = cl.mem_flags
  ga, gb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x), cl.Buffer(ctx, mf.WRITE_ONLY, x.nbytes)
  cl.Program(ctx, src).build().k(queue, (1,), None, ga, gb)
  out = np.empty_like(x); cl.enqueue_copy(queue, out, gb); queue.finish()
  assert np.array_equal(out, 2 * x)
