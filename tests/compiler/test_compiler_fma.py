"""Contraction (render.yaml `contract`): a float REDUCE(ADD) over products accumulates
with fused multiply-adds (one rounding) -- within REDUCE's tolerance -- where the
operands' intervals prove that no product and no partial sum can overflow (so no result
changes class: NaN, infinite, finite), while a MULACC, a MUL then ADD outside a
reduction, and a user kernel's own accumulator keep their two roundings
(tests/compiler/test_compiler_support.py test_mulacc_is_not_fused)."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.props import shape_operand as S, const

from targets import TARGETS, HAVE_CL


def gemm(a, b):
  M, K = a.shape
  N = b.shape[1]
  return (a.reshape(M, K, 1) * b.reshape(1, K, N)).sum(1)


def _host_has_fma() -> bool:
  try:
    with open("/proc/cpuinfo") as f:
      return any(line.startswith("flags") and " fma " in line + " " for line in f)
  except OSError:
    return False


def _cl_fast_fma() -> bool:
  """Whether the selected OpenCL device defines FP_FAST_FMAF (fma as fast as a*b+c):
  only there does the renderer fuse (PoCL on a CPU has a software fma)."""
  import pyopencl as cl
  from tinyspec.compiler.runtime.opencl import device
  ctx, q, _ = device()
  prg = cl.Program(ctx, "__kernel void k(__global int* o) {\n#ifdef FP_FAST_FMAF\n o[0] = 1;\n#else\n o[0] = 0;\n#endif\n}").build()
  o = np.zeros(1, np.int32)
  buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 4)
  prg.k(q, (1,), None, buf)
  cl.enqueue_copy(q, o, buf)
  return bool(o[0])


E = 2.0 ** -12
# sum of a[k] * b[k]: -(1 + 2^-11) * 1 + (1 + 2^-12)^2 = 2^-24 exactly, where the second
# product, rounded on its own (1 + 2^-11 + 2^-24 is a tie), gives 0
A = np.array([-(1 + 2 * E), 1 + E], np.float32)
B = np.array([1.0, 1 + E], np.float32)
FUSED, TWICE = 2.0 ** -24, float(np.float32(np.float32(A[0] * B[0]) + np.float32(A[1] * B[1])))
# the same sum scaled by 2^24, of int32 operands converted to float32: their interval
# (|x| <= 2^31) proves that no product or sum of two overflows, so it may be fused
AI, BI = (A * 2.0 ** 12).astype(np.int32), (B * 2.0 ** 12).astype(np.int32)


def _bounded_dot():
  return (Tensor(AI).cast("float32") * Tensor(BI).cast("float32")).sum()


@pytest.mark.parametrize("target", TARGETS)
def test_reduce_of_bounded_products_is_fused(target):
  assert TWICE != FUSED
  t = _bounded_dot()
  out = compile_graph(t.graph(), target).run(t.inputs())["out0"]
  fused = _cl_fast_fma() if target == "opencl" else _host_has_fma()   # fma where it is fast (FP_FAST_FMAF)
  assert float(np.asarray(out).reshape(())) * 2.0 ** -24 == (FUSED if fused else TWICE)


@pytest.mark.parametrize("target", TARGETS)
def test_products_that_may_overflow_are_not_fused(target):
  """float32 operands of any value: a product may overflow where its exact value does not
  (1e30 * 1e10), and -inf + inf is NaN where the fused -inf + 1e40 is -inf. Not fused:
  the reference's class, NaN, and its value everywhere else."""
  a = np.array([-np.inf, 1e30, 3.0, 1.7e38], np.float32); b = np.array([1.0, 1e10, 2.0, 10.0], np.float32)
  t = (Tensor(a) * Tensor(b)).sum()
  c = compile_graph(t.graph(), target)
  assert "fma_float32" not in c.source()
  assert np.isnan(c.run(t.inputs())["out0"])
  assert "fma_float32" not in compile_graph((Tensor(A) * Tensor(B)).sum().graph(), target).source()


def test_the_overflow_proof_counts_every_trip():
  """int32 operands: a product is at most 2^62, and 2^62 x 2^12 trips is still far below
  float32's range (fused); float64 operands converted to float32 may hold float32's largest
  values, whose products overflow (not fused)."""
  from tinyspec.compiler.analysis.contract import finite_bound
  n = 1 << 12
  ints = Tensor(np.ones(n, np.int32)).cast("float32")
  assert "fma_float32" in compile_graph((ints * ints).sum().graph(), "c", keep_stages=False).source()
  wide = Tensor(np.ones(n, np.float64)).cast("float32")
  assert "fma_float32" not in compile_graph((wide * wide).sum().graph(), "c", keep_stages=False).source()
  assert finite_bound(Tensor(np.ones(2, np.float16)).cast("float32").uop) == pytest.approx(65504, rel=1e-6)


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_gemm_source_uses_fma(target):
  """A gemm of int16 data converted to float32: its products and sums are bounded, so it
  accumulates with fma where the target's fma is fast; a float32 gemm does not."""
  x = Tensor(np.ones((64, 64), np.int16)).cast("float32")
  src = compile_graph(gemm(x, x).graph(), target, keep_stages=False).source()
  assert "fma_float32" in src and "FP_FAST_FMAF" in src    # fused where the target's fma is fast
  assert "-ffast-math" not in src and "FP_CONTRACT OFF" in src     # everything else keeps its roundings
  f = Tensor(np.ones((64, 64), np.float32))
  assert "fma_float32" not in compile_graph(gemm(f, f).graph(), target, keep_stages=False).source()


def test_sum_and_elementwise_products_are_not_fused():
  x = Tensor(np.ones(64, np.float32))
  for t in (x.sum(), x * x + x, (x * x).max()):
    assert "fma" not in compile_graph(t.graph(), "c", keep_stages=False).source()


def _user_dot():
  """A hand-written dot product with its own REG accumulator (acc + a*b): its rounding
  is what the user wrote."""
  out = UOp("PARAM", (S((1,)),), {"slot": 0, "dtype": "float32"})
  a = UOp("PARAM", (S((2,)),), {"slot": 1, "dtype": "float32"})
  b = UOp("PARAM", (S((2,)),), {"slot": 2, "dtype": "float32"})
  acc = UOp("BUFFER", (S(()),), {"slot": 0, "dtype": "float32", "device": "REG", "addrspace": "REG"})
  r = UOp("RANGE", (const(2, "index"),), {"id": 0, "type": "REDUCE"})
  init = UOp("STORE", (acc, const(0.0, "float32")))
  cur = UOp("AFTER", (acc, init, r))
  loop = UOp("END", (UOp("STORE", (acc, UOp("ADD", (cur, UOp("MUL", (UOp("INDEX", (a, r)), UOp("INDEX", (b, r)))))))), r))
  st = UOp("STORE", (UOp("INDEX", (out, const(0, "index"))), UOp("AFTER", (acc, loop))))
  return UOp("SINK", (st,))


@pytest.mark.parametrize("target", TARGETS)
def test_user_accumulator_keeps_two_roundings(target):
  c = compile_graph(_user_dot(), target)
  assert "fma" not in c.source()
  out = c.run({"param0": np.zeros(1, np.float32), "param1": A, "param2": B})
  assert float(np.asarray(out["param0"]).reshape(())) == TWICE


def test_contract_table_lists_only_reassociating_reduces():
  """The allowance is data: ADD reduces (which REDUCE's tolerance lets reorder), float32 and
  float64 (narrow floats round every op to their dtype: decision float-arith)."""
  from tinyspec.compiler.tables import render_tables
  C = render_tables()["contract"]
  assert C["reduce"] == ["ADD"] and set(C["dtypes"]) == {"float32", "float64"}
  t = Tensor(np.ones((64, 64), np.float16))
  assert "fma" not in compile_graph(gemm(t, t).graph(), "c", keep_stages=False).source()
