"""tinyspec/errorbound_accumulate.py: the bound of a REG accumulation in a form the reference
evaluates as one vectorized accumulation. Adversaries: results a portable backend may give
and the exact sum (math.fsum) on rows that cancel lie within the bound, a bound planted too
small is caught by the same check, the bound is never below the step-by-step rule's, and the
shadow's loop is not stepped (the program-level graphs of tinygrad's test_std took minutes)."""
from __future__ import annotations
import math
import numpy as np
import pytest
from tinyspec import errorbound, errorbound_accumulate
from tinyspec.errorbound import within
from tinyspec.refimpl import loops
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.errorbound import evaluate_with_bounds

F32 = "float32"
rng = np.random.default_rng(31)


def idx(b, v): return b.const(v, "index")


def accumulate_kernel(M, K, dt=F32, unrolled=False, product=False):
  """out[i] = sum over k of x[i, k] (of x[i, k] * y[i, k] with product) through a REG
  accumulator set to CAST(0) as tinygrad emits it; unrolled: two terms per iteration."""
  b = Builder()
  x = b.param((M, K), dt, 0, name="x"); out = b.param((M,), dt, 1, name="out")
  y = b.param((M, K), dt, 2, name="y") if product else None
  acc = b.buffer((1,), dt, 0, addrspace="REG")
  z = idx(b, 0)
  i = b.range(M, 0, "GLOBAL")
  init = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.CAST(b.const(0, dt), arg=dt))
  k = b.range(K // 2 if unrolled else K, 1, "REDUCE")
  a = b.AFTER(acc, init, k)
  def term(col): return b.MUL(b.INDEX(x, i, col), b.INDEX(y, i, col)) if product else b.INDEX(x, i, col)
  if unrolled: step = b.ADD(b.ADD(b.LOAD(b.INDEX(a, z)), term(b.MUL(k, idx(b, 2)))), term(b.ADD(b.MUL(k, idx(b, 2)), idx(b, 1))))
  else: step = b.ADD(b.LOAD(b.INDEX(a, z)), term(k))
  e = b.END(b.STORE(b.INDEX(a, z), step), k)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.LOAD(b.INDEX(b.AFTER(acc, e), z))), i))
  return b.graph()


def cancelling(M, K):
  """Large terms that cancel (row sums near zero), and a row of small terms."""
  x = rng.standard_normal((M, K)) * 1e3
  x[:, K // 2:] = -x[:, :K // 2] + rng.standard_normal((M, K - K // 2)) * 1e-3
  x[0] = rng.standard_normal(K) * 1e-3
  return x.astype(np.float32)


def alternatives(terms):
  """Results a portable backend may give: reversed order, pairwise, float64 rounded once; and
  the exact sum of the terms (float64 of math.fsum: exact to its last bit)."""
  rev = np.zeros(terms.shape[0], np.float32)
  for k in reversed(range(terms.shape[1])): rev = (rev + terms[:, k]).astype(np.float32)
  exact = np.array([math.fsum(map(float, row)) for row in terms.astype(np.float64)])
  return [rev, terms.sum(axis=1, dtype=np.float32), terms.astype(np.float64).sum(axis=1).astype(np.float32), exact]


@pytest.fixture
def no_stepping(monkeypatch):
  def refuse(scope, ctx): raise AssertionError(f"END {ctx.i}'s loop is stepped")
  monkeypatch.setattr(loops, "run_stepped", refuse)


@pytest.fixture(autouse=True)
def closed_form(monkeypatch):
  """The loops here are cheap enough to step (tests/core/test_graphbound_stepping.py tests
  that choice): no stepping budget, so the closed form is what is tested."""
  monkeypatch.setattr(errorbound_accumulate, "STEP_BUDGET", 0)


@pytest.mark.parametrize("unrolled", [False, True])
def test_other_orders_and_the_exact_sum_are_within_and_the_loop_is_vectorized(no_stepping, unrolled):
  M, K = 5, 512
  x = cancelling(M, K)
  ins = {"x": x, "out": np.zeros(M, np.float32)}
  got, bounds = evaluate_with_bounds(accumulate_kernel(M, K, unrolled=unrolled), ins)
  b = bounds["out"]
  assert np.isfinite(b).all() and (b > 0).all()
  for alt in alternatives(x): assert within(alt, got["out"], b).all()
  assert b[0] < 1e-4 * b[1:].min()   # the bound follows the terms' magnitude


def test_a_bound_planted_too_small_is_caught(monkeypatch):
  """The same check fails when the summation's rounding is left out of the bound."""
  M, K = 5, 512
  x = cancelling(M, K)
  ins = {"x": x, "out": np.zeros(M, np.float32)}
  monkeypatch.setattr(errorbound_accumulate, "rounding", lambda *a: [])   # the summation's rounding left out
  got, bounds = evaluate_with_bounds(accumulate_kernel(M, K), ins)
  assert not all(within(alt, got["out"], bounds["out"]).all() for alt in alternatives(x))


def test_products_fused_or_not_are_within_and_never_below_the_step_by_step_rule(monkeypatch):
  """acc + x*y: a backend may fuse each product into the add (one rounding); the bound holds
  that result, the exact sum, and is at least the step-by-step rule's at every output."""
  M, K = 4, 512
  x, y = cancelling(M, K), rng.standard_normal((M, K)).astype(np.float32)
  ins = {"x": x, "y": y, "out": np.zeros(M, np.float32)}
  g = accumulate_kernel(M, K, product=True)
  got, bounds = evaluate_with_bounds(g, ins)
  fused = np.zeros(M, np.float32)
  for k in range(K): fused = (fused.astype(np.float64) + x[:, k].astype(np.float64) * y[:, k]).astype(np.float32)
  exact = np.array([math.fsum(float(p) for p in row) for row in x.astype(np.float64) * y])
  assert (fused != got["out"]).any(), "the fused result must differ somewhere"
  for alt in (fused, exact): assert within(alt, got["out"], bounds["out"]).all()
  monkeypatch.setattr(errorbound, "find_accumulations", lambda s: {})
  stepwise, old = evaluate_with_bounds(g, ins)
  assert np.array_equal(stepwise["out"], got["out"]) and (bounds["out"] >= old["out"]).all()


def test_an_overflowing_or_nan_term_makes_the_bound_inf(no_stepping):
  M, K = 3, 256
  x = rng.standard_normal((M, K)).astype(np.float32)
  x[1, 3], x[2, 5] = 3e38, np.nan
  _, bounds = evaluate_with_bounds(accumulate_kernel(M, K), {"x": x, "out": np.zeros(M, np.float32)})
  assert np.isfinite(bounds["out"][0]) and np.isinf(bounds["out"][1:]).all()


def int_count_kernel(M, K, inexact: bool):
  """out[i] = sum over k of int(x[i, k] < 0.5) (of int(sin(x) < 0.5) when inexact) in a REG."""
  b = Builder()
  x = b.param((M, K), F32, 0, name="x"); out = b.param((M,), "int32", 1, name="out")
  acc = b.buffer((1,), "int32", 0, addrspace="REG")
  z = idx(b, 0)
  i = b.range(M, 0, "GLOBAL")
  init = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.const(0, "int32"))
  k = b.range(K, 1, "REDUCE")
  a = b.AFTER(acc, init, k)
  v = b.INDEX(x, i, k)
  flag = b.CAST(b.CMPLT(b.SIN(v) if inexact else v, b.const(0.5, F32)), arg="int32")
  e = b.END(b.STORE(b.INDEX(a, z), b.ADD(b.LOAD(b.INDEX(a, z)), flag)), k)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.LOAD(b.INDEX(b.AFTER(acc, e), z))), i))
  return b.graph()


def test_an_integer_count_is_exact_unless_a_term_is_inexact(no_stepping):
  M, K = 3, 32
  x = rng.standard_normal((M, K)).astype(np.float32)
  x[2] = 10.0   # sin(10) is far from 0.5: its comparison cannot flip
  got, bounds = evaluate_with_bounds(int_count_kernel(M, K, False), {"x": x, "out": np.zeros(M, np.int32)})
  assert (got["out"] == (x < 0.5).sum(axis=1)).all() and (bounds["out"] == 0).all()
  x[0, 0] = np.float32(np.arcsin(0.5))   # sin(x) within a rounding of 0.5: the count is anything
  _, bounds = evaluate_with_bounds(int_count_kernel(M, K, True), {"x": x, "out": np.zeros(M, np.int32)})
  assert np.isinf(bounds["out"][0]) and bounds["out"][2] == 0


def test_a_programs_bound_needs_its_live_values_only():
  """issue 31 S6: a program's LINEAR lists every node, and the evaluator kept every value for
  it; the shadow graph's ~10 float64 values per op then ran tinygrad's attention program past
  the memory budget. A long elementwise chain over a loop of 2^16 points: its values together
  are ~20x the budget, what is live at once fits."""
  from tinyspec.errorbound import shadow
  from tinyspec.refimpl.engine import run
  N, depth, budget = 1 << 16, 24, 8 << 20
  b = Builder()
  x = b.param((N,), F32, 0, name="x"); out = b.param((N,), F32, 1, name="out")
  i = b.range(N, 0, "LOOP")
  v = b.LOAD(b.INDEX(x, i))
  for k in range(depth): v = b.MUL(b.ADD(v, b.const(0.5 + k, F32)), b.const(0.25, F32))
  b.SINK(b.END(b.STORE(b.INDEX(out, i), v), i))
  b.PROGRAM(b.LINEAR(*range(len(b.nodes))))
  g = b.graph()
  ins = {"x": rng.standard_normal(N).astype(np.float32), "out": np.zeros(N, np.float32)}
  sg, _ = shadow(g)
  values = sum(1 for n in sg.nodes if n.op not in ("CONST", "VCONST", "STORE", "END", "SINK", "LINEAR", "PARAM", "INDEX", "RANGE"))
  assert values * N * 8 > 20 * budget   # kept all at once: far over the budget
  _, m = run(sg, dict(ins), budget=budget)
  assert m.budget.peak < budget
  got, bounds = evaluate_with_bounds(g, ins, budget=budget)
  want = ins["x"]
  for k in range(depth): want = ((want + np.float32(0.5 + k)) * np.float32(0.25)).astype(np.float32)
  assert np.array_equal(got["out"], want) and np.isfinite(bounds["out"]).all() and (bounds["out"] > 0).all()
