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
from tinyspec.compiler.literals import shape_operand as S, const

from targets import TARGETS, HAVE_CL


def gemm(a, b):
  M, K = a.shape
  N = b.shape[1]
  return (a.reshape(M, K, 1) * b.reshape(1, K, N)).sum(1)


def _c_fast_fma() -> bool:
  """Whether the C compiler, with the runtime's flags, says fma is fast (FP_FAST_FMAF:
  GCC on FMA hardware; Clang never predefines it): only there does the C renderer's fma
  helper call fmaf."""
  import ctypes
  from tinyspec.compiler.runtime.c import load
  f = load("#include <math.h>\nint fast_fma(void) {\n#ifdef FP_FAST_FMAF\n  return 1;\n#else\n  return 0;\n#endif\n}\n").fast_fma
  f.restype = ctypes.c_int
  return bool(f())


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
# (|x| <= 2^31) proves that no product or sum of two overflows, so it is fused outright
AI, BI = (A * 2.0 ** 12).astype(np.int32), (B * 2.0 ** 12).astype(np.int32)


def _bounded_dot():
  return (Tensor(AI).cast("float32") * Tensor(BI).cast("float32")).sum()


@pytest.mark.parametrize("target", TARGETS)
def test_reduce_of_bounded_products_is_fused(target):
  assert TWICE != FUSED
  t = _bounded_dot()
  out = compile_graph(t.graph(), target).run(t.inputs())["out0"]
  fused = _cl_fast_fma() if target == "opencl" else _c_fast_fma()   # fma where it is fast (FP_FAST_FMAF)
  assert float(np.asarray(out).reshape(())) * 2.0 ** -24 == (FUSED if fused else TWICE)


@pytest.mark.parametrize("target", TARGETS)
def test_products_that_may_overflow_are_not_fused(target):
  """float32 operands of any value: a product may overflow where its exact value does not
  (1e30 * 1e10), and -inf + inf is NaN where the fused -inf + 1e40 is -inf. Not fused
  (OpenCL), or fused only in a variant that the launch-time guard refuses for these
  operands (C): the reference's class, NaN, and its value everywhere else."""
  a = np.array([-np.inf, 1e30, 3.0, 1.7e38], np.float32); b = np.array([1.0, 1e10, 2.0, 10.0], np.float32)
  t = (Tensor(a) * Tensor(b)).sum()
  c = compile_graph(t.graph(), target)
  guarded = [ks for ks in c.sources if ks.guard is not None]
  if target == "opencl": assert "fma_float32" not in c.source() and not guarded
  else: assert len(guarded) == 1 and guarded[0].guard.fused in c.source()
  assert np.isnan(c.run(t.inputs())["out0"])


def _two_rows(x: float):
  """A 2x2 @ 2x1 gemm: row 0 is the sum whose fused and twice-rounded values differ,
  row 1 is x * 1: the guard (one for the kernel) fuses both rows or neither."""
  a = np.array([[A[0], A[1]], [x, 0.0]], np.float32)
  b = np.array([[B[0]], [B[1]]], np.float32)
  return gemm(Tensor(a), Tensor(b))


@pytest.mark.skipif(not _c_fast_fma(), reason="the C compiler does not define FP_FAST_FMAF here: its fma helper keeps two roundings")
@pytest.mark.parametrize("x, fused", [(1.0, True), (1e37, True), (-2e38, False), (np.inf, True), (np.nan, True), (3e38, False)])
def test_the_guard_fuses_where_the_data_prove_it(x, fused):
  """C: a float32 gemm gets a fused variant; each launch scans its operands' buffers and
  runs it only where their largest finite magnitudes prove that no product or partial sum
  overflows (row 1 of 1e37: yes; of 2e38, whose sum with row 0's products cannot overflow,
  no: the proof bounds every partial sum by the largest product times the addends of a
  2-long sum); an infinity or a NaN is no magnitude (it meets the same results either way)."""
  t = _two_rows(x)
  c = compile_graph(t.graph(), "c", keep_stages=False)
  assert [ks.guard is not None for ks in c.sources].count(True) == 1
  out = np.asarray(c.run(t.inputs())["out0"]).reshape(-1)
  assert float(out[0]) == (FUSED if fused else TWICE)
  np.testing.assert_array_equal(out[1:], np.float32(x))


def test_a_kernel_that_writes_what_it_reads_has_no_guard():
  """The scan sees a buffer before the kernel starts: a buffer the kernel also writes (or
  one sharing memory with another argument) cannot bound what it reads; such an update
  keeps its two roundings."""
  from tinyspec.compiler.analysis.contract import update
  from tinyspec.compiler.literals import shape_operand
  p = [UOp("PARAM", (shape_operand((4,)),), {"slot": k, "dtype": "float32"}) for k in range(2)]
  i = const(0, "index")
  m = UOp("MUL", (UOp("INDEX", (p[0], i)), UOp("INDEX", (p[1], i))))
  assert not update([m], "float32", 4, lambda slot: False).scans
  up = update([m], "float32", 4, lambda slot: True)
  assert up.scans == {0, 1} and not up.cannot_overflow()     # statically: float32's range proves nothing
  assert up.cannot_overflow({0: 1e15, 1: 1e15}) and not up.cannot_overflow({0: 1e19, 1: 1e19})


def test_the_overflow_proof_counts_every_addend():
  """int32 operands: a product is at most 2^62, and 2^62 x 2^12 addends is still far below
  float32's range (fused, no guard); float64 operands converted to float32 may hold
  float32's largest values, whose products overflow (fused only in the guarded variant)."""
  from tinyspec.compiler.analysis.contract import finite_bound
  n = 1 << 12
  ints = Tensor(np.ones(n, np.int32)).cast("float32")
  c = compile_graph((ints * ints).sum().graph(), "c", keep_stages=False)
  assert "fma_float32" in c.source() and all(ks.guard is None for ks in c.sources)
  wide = Tensor(np.ones(n, np.float64)).cast("float32")
  c = compile_graph((wide * wide).sum().graph(), "c", keep_stages=False)
  assert [ks.guard is not None for ks in c.sources].count(True) == 1
  assert finite_bound(Tensor(np.ones(2, np.float16)).cast("float32").uop) == pytest.approx(65504, rel=1e-6)


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_gemm_source_uses_fma(target):
  """A gemm of int16 data converted to float32: its products and sums are bounded, so it
  accumulates with fma where the target's fma is fast, with no guard; a float32 gemm does
  so only in a guarded variant (C) or not at all (OpenCL)."""
  x = Tensor(np.ones((64, 64), np.int16)).cast("float32")
  c = compile_graph(gemm(x, x).graph(), target, keep_stages=False)
  src = c.source()
  assert "fma_float32" in src and "FP_FAST_FMAF" in src    # fused where the target's fma is fast
  assert "-ffast-math" not in src and "FP_CONTRACT OFF" in src     # everything else keeps its roundings
  assert all(ks.guard is None for ks in c.sources)
  f = Tensor(np.ones((64, 64), np.float32))
  c = compile_graph(gemm(f, f).graph(), target, keep_stages=False)
  if target == "opencl": assert "fma_float32" not in c.source()
  else: assert [ks.guard is not None for ks in c.sources].count(True) == 1


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
  from tinyspec.compiler.rendertables import render_tables
  C = render_tables()["contract"]
  assert C["reduce"] == ["ADD"] and set(C["dtypes"]) == {"float32", "float64"}
  t = Tensor(np.ones((64, 64), np.float16))
  assert "fma" not in compile_graph(gemm(t, t).graph(), "c", keep_stages=False).source()


def test_beam_candidates_keep_their_fused_variants():
  """BEAM builds every candidate in one translation unit, each kernel renamed apart: the
  fused variants too (one name twice would not link), and the guard names the renamed one."""
  from tinyspec.compiler.render import KernelSource
  x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
  t = gemm(Tensor(x), Tensor(x))
  c = compile_graph(t.graph(), "c", keep_stages=False, beam=2)
  np.testing.assert_allclose(np.asarray(c.run(t.inputs())["out0"]), x @ x, rtol=1e-5, atol=1e-4)
  (ks,) = [k for k in c.sources if k.guard is not None]
  r = KernelSource.renamed(ks, "b7_" + ks.name)
  assert r.guard.fused == f"b7_{ks.name}_fused" and f" {r.guard.fused}(" in r.fused_body and f" {r.name}(" in r.body


@pytest.mark.parametrize("x, fused", [(1.0, True), (-2e38, False), (np.nan, True)])
def test_gpu_kernels_are_guarded_on_the_device(x, fused, monkeypatch):
  """OpenCL for a GPU table (whose fma is hardware): the float32 gemm gets the guarded
  variant; its scan runs on the device the program runs on (here PoCL or Oclgrind), the
  guard decides as on C, and the result is the reference's either way (this device keeps
  two roundings in both variants: FP_FAST_FMAF is a GPU's)."""
  if not HAVE_CL: pytest.skip("no OpenCL device")
  from tinyspec.compiler.device import table_device
  from tinyspec.compiler.analysis.contract import Guard
  decided = []
  holds = Guard.holds
  monkeypatch.setattr(Guard, "holds", lambda self, largest: decided.append(holds(self, largest)) or decided[-1])
  t = _two_rows(x)
  c = compile_graph(t.graph(), "opencl", keep_stages=False, device=table_device("h100"))
  assert [ks.guard is not None for ks in c.sources].count(True) == 1
  out = np.asarray(c.run(t.inputs())["out0"]).reshape(-1)
  assert decided == [fused]
  assert float(out[0]) in (FUSED, TWICE) and (fused or float(out[0]) == TWICE)
  np.testing.assert_array_equal(out[1:], np.float32(x))
  cpu = compile_graph(t.graph(), "opencl", keep_stages=False)       # a CPU device: no guard (its fma is software)
  assert all(ks.guard is None for ks in cpu.sources)


INTEGER_SOURCES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]


def _integer_rows(src: str) -> np.ndarray:
  """Two rows of src: its extremes (int64's round when converted to float32), 0 and a
  multiple of 2^(bits-4): with weights of short mantissas every product and sum is exact."""
  from tinyspec.dtypes import DTYPES
  D = DTYPES[src]
  if D.cls == "bool": return np.array([[True, False, True, True], [False, True, False, True]])
  step = 1 << max(0, D.bits - 4)
  return np.array([[int(D.min), int(D.max), 0, 3 * step], [int(D.max), 2 * step, int(D.min), 0]], dtype=np.dtype(src))


@pytest.mark.parametrize("table", [None, "h100"])
@pytest.mark.parametrize("target", TARGETS)
def test_products_of_integer_sources_match_the_reference(target, table, monkeypatch):
  """(x.float() * w).sum(-1) with x read from an integer or bool buffer (tinygrad's
  `(img_uint8.float() * w).sum(-1)`), on C and on OpenCL with a GPU's table (whose float32
  gemms get the guard): the guard scans float buffers only, an integer read keeps its
  interval as its bound (issue 32: the scan asked an integer dtype for its exponent)."""
  from tinyspec.refimpl import evaluate
  from tinyspec.compiler import device as D
  if table is not None:
    if target != "opencl": pytest.skip("a device table is an OpenCL device")
    monkeypatch.setenv("TINYSPEC_OPENCL_DEVICE", f"table:{table}")
  D.device.cache_clear()
  try:
    w = Tensor(np.array([1.0, -2.0, 0.5, 4.0], np.float32)).reshape(1, 4)
    for src in INTEGER_SOURCES:
      x = Tensor(_integer_rows(src)).cast("float32")
      for t in ((x * w).sum(-1), (x * x).sum(-1), gemm(x, x.reshape(4, 2))):
        want = evaluate(t.graph(), t.inputs())["out0"]
        got = compile_graph(t.graph(), target, keep_stages=False).run(t.inputs())["out0"]
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=src)
  finally:
    D.device.cache_clear()


def test_an_integer_read_is_bounded_by_its_interval_not_scanned():
  from tinyspec.compiler.analysis.contract import magnitude
  from tinyspec.compiler.literals import shape_operand
  for src, top in (("uint8", 255), ("int64", 2 ** 63), ("uint64", 2 ** 64 - 1)):
    p = UOp("PARAM", (shape_operand((4,)),), {"slot": 0, "dtype": src})
    read = UOp("INDEX", (p, const(0, "index")))
    m = magnitude(UOp("CAST", (read,), "float32"), lambda slot: True)
    assert m.scans == () and top <= m.cap <= top * (1 + 2.0 ** -23), src    # a wide integer rounds up when converted
    assert magnitude(UOp("CAST", (UOp("INDEX", (UOp("PARAM", p.src, {"slot": 0, "dtype": "float64"}), read.src[1])),), "float32"),
                     lambda slot: True).scans == ((0, 1 + 2.0 ** -23),)
