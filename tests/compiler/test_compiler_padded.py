"""Padded tiles (compiler/passes/layout.py pad_outputs, render.yaml heuristics.cpu.pad_outputs): a
reduce kernel whose tile the sizes do not divide stores ungated into a padded buffer,
reads its inputs from zero-padded copies, and a copy kernel writes the output's part.
The results are the reference's on awkward sizes and on values that poison the padding
(inf and NaN rows: a padded column computes inf * 0 = NaN and must never reach the
output); every stage validates and evaluates; a gate that is not exactly the bound is
never dropped."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.check import compare_outputs, check_stages
from tinyspec.compiler.device import Device
from tinyspec.compiler.passes.layout import _padded_shape
from tinyspec.compiler.literals import shape_operand as S, const
from tinyspec.refimpl import evaluate

from targets import TARGETS

RNG = np.random.default_rng(11)
AVX512 = Device("c", "test avx512", "cpu", 2, 0, 0, False, 64)


def gemm(a, b):
  M, K = a.shape
  N = b.shape[1]
  return (a.reshape(M, K, 1) * b.reshape(1, K, N)).sum(1)


def ints(*shape):
  return RNG.integers(-3, 4, shape).astype(np.float32)     # sums exact in any order


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M, K, N", [(1001, 33, 1000), (70, 100, 90), (131, 67, 97), (9, 300, 250), (257, 5, 33), (64, 64, 65)])
def test_awkward_gemms_are_exact(target, M, K, N):
  a, b = ints(M, K), ints(K, N)
  t = gemm(Tensor(a), Tensor(b))
  got = compile_graph(t.graph(), target, keep_stages=False).run(t.inputs())["out0"]
  assert np.array_equal(got, a @ b)


def test_a_padded_gemm_is_vector_code_without_gates():
  """On a 64-byte-vector host: A's rows padded to whole, evenly shared tiles (1001 -> 1024:
  8 slices of 16 tiles of 8 rows), B packed into 32-column tiles, the last with zero
  columns, the product stored into a (1024, 1024) buffer with whole vector stores, then
  copied out. The copies read nothing under a condition either: the zeros of the padding
  are written by kernels of their own (`_edge`)."""
  t = gemm(Tensor(ints(1001, 128)), Tensor(ints(128, 1000)))
  c = compile_graph(t.graph(), "c", keep_stages=False, device=AVX512)
  names = [k.name for k in c.schedule.kernels]
  main = next(k for k in c.schedule.kernels if not any(s in k.name for s in ("pack", "pad")))
  assert sorted(names[:4]) == sorted(f"{main.name}_{s}" for s in ("pack0", "pack0_edge", "pad0", "pad0_edge"))
  assert names[4:] == [main.name, f"{main.name}_unpad0"]
  src = main.program.body
  assert "vstore_floatx16" in src and "vload_floatx16" in src and " ? " not in src and "if (" not in src
  for k in c.schedule.kernels:
    assert " ? " not in k.program.body and "if (" not in k.program.body, k.name
  assert main.program.thread == 8
  sizes = {p[2] for p in main.program.params}
  assert {1024 * 1024, 1024 * 128, 32 * 128 * 32} <= sizes


@pytest.mark.parametrize("target", TARGETS)
def test_poisoned_rows_do_not_leak_through_the_padding(target):
  """inf and NaN in A: the padded columns of those rows are NaN (inf * 0) in the padded
  buffer; the output is the reference's, NaN and inf where it says, nothing else."""
  a, b = ints(37, 29), ints(29, 45)
  a[3, 5], a[17, :] = np.inf, np.nan
  a[36, 0] = -np.inf
  t = gemm(Tensor(a), Tensor(b))
  g, inputs = t.graph(), t.inputs()
  got = compile_graph(g, target, keep_stages=False).run(inputs)
  assert not compare_outputs(got, evaluate(g, inputs))


def test_every_stage_of_a_padded_gemm_validates_and_evaluates():
  t = gemm(Tensor(ints(70, 100)), Tensor(ints(100, 90)))
  c = check_stages(t.graph(), t.inputs(), target="c")
  assert any(k.name.endswith("_unpad0") for k in c.schedule.kernels)


# -- the exactness of the gate (the only thing that lets the store drop it)
def _store(shape, index, gate):
  p = UOp("PARAM", (S(shape),), {"slot": 0, "dtype": "float32"})
  return UOp("STORE", (UOp("INDEX", (p, *index)), const(1.0, "float32"), gate))


def _range(n, i):
  return UOp("RANGE", (const(n, "index"),), {"id": i, "type": "LOOP"})


def test_a_gate_that_is_the_bound_pads_and_any_other_does_not():
  r = _range(16, 0)
  lt = lambda x, c: UOp("CMPLT", (x, const(c, "index")))
  assert _padded_shape(_store((10,), [r], lt(r, 10))) == (16,)
  assert _padded_shape(_store((10,), [r], lt(r, 9))) is None             # stricter than the bound: a real mask
  other = _range(4, 1)
  assert _padded_shape(_store((10,), [r], UOp("AND", (lt(r, 10), lt(other, 3))))) is None   # a second condition
  shifted = UOp("ADD", (r, const(-1, "index")))
  assert _padded_shape(_store((10,), [shifted], lt(shifted, 10))) is None  # an index that can be negative
  t, j = _range(2, 2), _range(8, 3)
  split = UOp("ADD", (UOp("MUL", (t, const(8, "index"))), j))
  assert _padded_shape(_store((8,), [split], lt(t, 1))) == (16,)         # t < 1 is exactly t*8 + j < 8
  assert _padded_shape(_store((10,), [split], lt(t, 1))) is None         # ... but not t*8 + j < 10
  assert _padded_shape(_store((16, 10), [_range(20, 4), r], lt(r, 10))) is None   # another index out of bounds


@pytest.mark.parametrize("target", TARGETS)
def test_a_user_gate_is_kept_when_its_kernel_is_padded(target):
  """A kernel that stores a row sum under its own condition (r < 37, not the bound 40):
  padded to whole tiles of 16 rows, its store is gated by both; that gate is not the
  bound, so the store keeps it and the rows it skips keep what the output held."""
  out = UOp("PARAM", (S((40,)),), {"slot": 0, "dtype": "float32"})
  x = UOp("PARAM", (S((40, 33)),), {"slot": 1, "dtype": "float32"})
  r, k = _range(40, 0), UOp("RANGE", (const(33, "index"),), {"id": 1, "type": "REDUCE"})
  total = UOp("REDUCE", (UOp("INDEX", (x, r, k)), k), {"op": "ADD"})
  st = UOp("STORE", (UOp("INDEX", (out, r)), total, UOp("CMPLT", (r, const(37, "index")))))
  sink = UOp("SINK", (UOp("END", (st, r)),))
  inputs = {"param0": np.full(40, 7.0, np.float32), "param1": ints(40, 33)}
  c = compile_graph(sink, target, [["PADTO", 0, 16], ["SPLIT", 0, [16, "UPCAST"]]], keep_stages=False)
  assert not any("unpad" in kk.name for kk in c.schedule.kernels)
  got = c.run(inputs)["param0"]
  assert np.array_equal(got[37:], [7.0, 7.0, 7.0]) and np.array_equal(got[:37], inputs["param1"][:37].sum(1))
