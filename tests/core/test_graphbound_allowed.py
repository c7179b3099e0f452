"""The whole-graph error bound applies the tables' allowed `any` results
(tinyspec/errorbound_where.py): an element an entry covers (a float cast to an integer dtype
that cannot hold its truncation, decision cast-float-int; a division by zero, decision
idiv-mod) may be any value, and so may everything computed from it; every other element
keeps its bound. Adversaries: a planted wrong result on a constrained element is caught, and
a backend's operand within its bound that falls under the entry is covered too."""
from __future__ import annotations
import numpy as np
from tinyspec.errorbound import shadow, within
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.errorbound import evaluate_with_bounds

F32, U32 = "float32", "uint32"


def cast_kernel(N, back_to_float=False, shift=None):
  """out[i] = uint32(x[i] (+ shift)); back_to_float: float32(that) + 0.5 (the unconstrained
  elements propagate)."""
  b = Builder()
  x = b.param((N,), F32, 0, name="x")
  out = b.param((N,), F32 if back_to_float else U32, 1, name="out")
  i = b.range(N, 0, "LOOP")
  v = b.LOAD(b.INDEX(x, i))
  if shift is not None: v = b.ADD(b.EXP2(v), b.const(shift, F32))   # an inexact operand (EXP2: a few ulps)
  c = b.CAST(v, arg=U32)
  if back_to_float: c = b.ADD(b.CAST(c, arg=F32), b.const(0.5, F32))
  b.SINK(b.END(b.STORE(b.INDEX(out, i), c), i))
  return b.graph()


X = np.array([-2.25, -1.5, -0.75, 0.0, 3.9, 1e10, np.nan, 7.0], np.float32)
OUT_OF_RANGE = np.array([1, 1, 0, 0, 0, 1, 1, 0], bool)   # trunc below 0 or above 2^32 - 1, or NaN


def test_an_out_of_range_cast_may_give_any_value_and_an_in_range_one_may_not():
  got, bounds = evaluate_with_bounds(cast_kernel(len(X)), {"x": X, "out": np.zeros(len(X), np.uint32)})
  b = bounds["out"]
  assert (np.isinf(b) == OUT_OF_RANGE).all() and (b[~OUT_OF_RANGE] == 0).all()
  backend = got["out"].copy()
  backend[OUT_OF_RANGE] = np.uint32(4294967295)   # tinygrad's CPU: -2.25 -> 4294967295, the reference 4294967294
  assert within(backend, got["out"], b).all()
  wrong = backend.copy()
  wrong[4] += 1   # 3.9 -> 3 is the only allowed result
  assert not within(wrong, got["out"], b)[4] and within(wrong, got["out"], b)[np.arange(len(X)) != 4].all()


def test_what_is_computed_from_an_unconstrained_element_is_unconstrained_too():
  got, bounds = evaluate_with_bounds(cast_kernel(len(X), back_to_float=True), {"x": X, "out": np.zeros(len(X), np.float32)})
  b = bounds["out"]
  assert (np.isinf(b) == OUT_OF_RANGE).all() and np.isfinite(b[~OUT_OF_RANGE]).all()
  wrong = got["out"].copy()
  wrong[OUT_OF_RANGE] = 123.0
  assert within(wrong, got["out"], b).all()
  wrong[7] = 8.5   # float32(uint32(7.0)) + 0.5 is 7.5
  assert not within(wrong, got["out"], b)[7]


def test_an_inexact_operand_near_the_edge_is_covered():
  """EXP2(x) - 2 with x just above 0: the reference's operand is -1 + a few ulps (its
  truncation -0 fits uint32), a backend's EXP2 within its ulps may give one below -1."""
  x = np.array([2.0 ** -22, 3.0], np.float32)
  got, bounds = evaluate_with_bounds(cast_kernel(2, shift=-2.0), {"x": x, "out": np.zeros(2, np.uint32)})
  assert got["out"][0] == 0 and np.isinf(bounds["out"][0])
  assert got["out"][1] == 6 and bounds["out"][1] < 2   # far from the edge: constrained (truncated within one of 6)


def test_an_integer_division_by_zero_may_give_any_value():
  b = Builder()
  a = b.param((4,), "int32", 0, name="a"); d = b.param((4,), "int32", 1, name="d"); out = b.param((4,), "int32", 2, name="out")
  i = b.range(4, 0, "LOOP")
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.IDIV(b.LOAD(b.INDEX(a, i)), b.LOAD(b.INDEX(d, i)))), i))
  ins = {"a": np.array([7, 7, -8, 9], np.int32), "d": np.array([2, 0, 3, 0], np.int32), "out": np.zeros(4, np.int32)}
  got, bounds = evaluate_with_bounds(b.graph(), ins)
  assert list(np.isinf(bounds["out"])) == [False, True, False, True] and (bounds["out"][[0, 2]] == 0).all()


def shift_kernel(N, by_constant: bool):
  """out[2 i] = a[i] << s (s = 3, or s[i] read from a buffer), the index 2 i computed with a
  shift by a constant (index arithmetic, as tinygrad lowers it); then back[i] = out[2 i],
  read through the same index after the loop."""
  b = Builder()
  a = b.param((N,), "int32", 0, name="a"); out = b.param((2 * N,), "int32", 1, name="out")
  back = b.param((N,), "int32", 2, name="back")
  s = None if by_constant else b.param((N,), "int32", 3, name="s")
  def doubled(r): return b.SHL(b.CAST(r, arg="int32"), b.const(1, "int32"))   # a shift by a constant is never out of range
  i = b.range(N, 0, "LOOP")
  by = b.const(3, "int32") if s is None else b.LOAD(b.INDEX(s, i))
  end = b.END(b.STORE(b.INDEX(out, doubled(i)), b.SHL(b.LOAD(b.INDEX(a, i)), by)), i)
  j = b.range(N, 1, "LOOP")
  b.SINK(end, b.END(b.STORE(b.INDEX(back, j), b.LOAD(b.INDEX(b.AFTER(out, end), doubled(j)))), j))
  return b.graph()


def test_a_shift_is_unconstrained_only_where_its_amount_is_out_of_range():
  ins = {"a": np.array([1, 2, 3, 4], np.int32), "out": np.zeros(8, np.int32), "back": np.zeros(4, np.int32)}
  got, bounds = evaluate_with_bounds(shift_kernel(4, by_constant=True), dict(ins))
  assert list(got["back"]) == [8, 16, 24, 32]
  assert (bounds["out"] == 0).all() and (bounds["back"] == 0).all()
  sg, _ = shadow(shift_kernel(4, by_constant=True))   # the constant shifts' conditions fold away: no node may be unbounded
  assert not any(n.op == "CONST" and n.arg.get("value") == "inf" for n in sg.nodes)
  ins["s"] = np.array([1, 40, -1, 31], np.int32)
  _, bounds = evaluate_with_bounds(shift_kernel(4, by_constant=False), ins)
  assert list(np.isinf(bounds["out"][::2])) == [False, True, True, False] and (bounds["out"][1::2] == 0).all()
  assert list(np.isinf(bounds["back"])) == [False, True, True, False]
