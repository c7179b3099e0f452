"""Which rule bounds a float REG accumulation (tinyspec/errorbound_accumulate.py STEP_BUDGET):
the step-by-step rule where stepping its loop pays (a lone loop nest, the graph's stepping
within the budget), the closed form elsewhere. Adversaries: a lone short exact sum keeps
bound 0, so a reassociated order is caught (the closed form would pass it); the budget's
edge is where the rule changes; a nest of register accumulations (the form of tinygrad's
winograd backward programs, issue 31: their bound stepped the nest for a minute and then
failed) is not stepped, gives the reference's own values and still catches a wrong one."""
from __future__ import annotations
import numpy as np
import pytest
from test_graphbound_accumulate import accumulate_kernel, idx, F32
from tinyspec import errorbound, errorbound_accumulate
from tinyspec.errorbound import within
from tinyspec.refimpl import evaluate, loops
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.errorbound import evaluate_with_bounds

rng = np.random.default_rng(7)


@pytest.fixture
def stepped_loops(monkeypatch) -> list:
  """The ENDs whose loops the reference steps."""
  seen, real = [], loops.run_stepped
  def spy(scope, ctx): seen.append(ctx.i); return real(scope, ctx)
  monkeypatch.setattr(loops, "run_stepped", spy)
  return seen


def _accumulations(g) -> list:
  """The float accumulations errorbound finds in g, priced."""
  found = []
  real = errorbound.find_accumulations
  def spy(b):
    out = real(b); found.extend(a for a in out.values() if a is not None); return out
  errorbound.find_accumulations = spy
  try: errorbound.shadow(g)
  finally: errorbound.find_accumulations = real
  return found


def test_a_lone_short_exact_sum_is_stepped_and_its_order_is_required(stepped_loops, monkeypatch):
  M, K = 3, 16
  x = rng.standard_normal((M, K)).astype(np.float32)
  ins = {"x": x, "out": np.zeros(M, np.float32)}
  g = accumulate_kernel(M, K)
  got, bounds = evaluate_with_bounds(g, ins)
  assert stepped_loops, "a lone short loop is stepped"
  assert (bounds["out"] == 0).all()   # exact terms, one rounding order: nothing else is allowed
  rev = np.zeros(M, np.float32)
  for k in reversed(range(K)): rev = (rev + x[:, k]).astype(np.float32)
  assert (rev != got["out"]).any(), "the reversed order must differ somewhere"
  assert not within(rev, got["out"], bounds["out"]).all()
  monkeypatch.setattr(errorbound_accumulate, "STEP_BUDGET", 0)   # the closed form: sound, looser
  _, loose = evaluate_with_bounds(g, ins)
  assert (loose["out"] > 0).all() and within(rev, got["out"], loose["out"]).all()


def test_the_rule_changes_at_the_budgets_edge(monkeypatch):
  M, K = 2, 32
  g = accumulate_kernel(M, K)
  acc, = _accumulations(g)
  assert acc.stepping_cost >= K and not acc.nested
  monkeypatch.setattr(errorbound_accumulate, "STEP_BUDGET", acc.stepping_cost)
  assert _accumulations(g)[0].stepped
  monkeypatch.setattr(errorbound_accumulate, "STEP_BUDGET", acc.stepping_cost - 1)
  assert not _accumulations(g)[0].stepped


def nested_kernel(M, R1, R2):
  """out[i] = sum over r1 of (sum over r2 of x[i, r1, r2]): an outer REG accumulator over r1
  adds an inner one, set to 0 in each r1 iteration and accumulated over r2 (tinygrad's
  winograd programs nest their registers so), inside a LOOP over i."""
  b = Builder()
  x = b.param((M, R1, R2), F32, 0, name="x"); out = b.param((M,), F32, 1, name="out")
  outer = b.buffer((1,), F32, 0, addrspace="REG"); inner = b.buffer((1,), F32, 1, addrspace="REG")
  z, zero = idx(b, 0), b.CAST(b.const(0, F32), arg=F32)
  i = b.range(M, 0, "LOOP")
  init_outer = b.STORE(b.INDEX(b.AFTER(outer, i), z), zero)
  r1 = b.range(R1, 1, "REDUCE")
  a_outer = b.AFTER(outer, init_outer, r1)
  init_inner = b.STORE(b.INDEX(b.AFTER(inner, r1), z), zero)
  r2 = b.range(R2, 2, "REDUCE")
  a_inner = b.AFTER(inner, init_inner, r2)
  end_inner = b.END(b.STORE(b.INDEX(a_inner, z), b.ADD(b.LOAD(b.INDEX(a_inner, z)), b.INDEX(x, i, r1, r2))), r2)
  row = b.LOAD(b.INDEX(b.AFTER(inner, end_inner), z))
  end_outer = b.END(b.STORE(b.INDEX(a_outer, z), b.ADD(b.LOAD(b.INDEX(a_outer, z)), row)), r1)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.LOAD(b.INDEX(b.AFTER(outer, end_outer), z))), i))
  return b.graph()


def test_a_nest_of_register_accumulations_is_not_stepped_and_keeps_the_references_values(stepped_loops):
  M, R1, R2 = 3, 3, 4
  x = rng.standard_normal((M, R1, R2)).astype(np.float32)
  ins = {"x": x, "out": np.zeros(M, np.float32)}
  g = nested_kernel(M, R1, R2)
  assert all(a.nested and not a.stepped for a in _accumulations(g))
  got, bounds = evaluate_with_bounds(g, ins)
  assert not stepped_loops
  want = np.zeros(M, np.float32)   # the program's own order, in float32
  for m in range(M):
    for r in range(R1):
      row = np.float32(0)
      for k in range(R2): row = np.float32(row + x[m, r, k])
      want[m] = np.float32(want[m] + row)
  assert np.array_equal(got["out"], want) and np.array_equal(got["out"], evaluate(g, ins)["out"])
  b = bounds["out"]
  assert np.isfinite(b).all() and within(want, got["out"], b).all()
  wrong = want.copy()
  wrong[1] += 1e3 * b[1] + 1e-3   # a planted wrong result is caught
  assert not within(wrong, got["out"], b)[1]
