"""evaluate() keeps what it derives from a graph alone (validation, plans) across calls
(refimpl/prepared.py), keyed by the graph's content. The adversaries: a different graph with
the same node count and ids, a graph changed in place, values that == merges (-0.0 and 0.0),
inputs that no longer fit the cached views, an invalid graph, the bound; and planted bugs
in the key (an arg ignored, the graph's identity) that these checks catch."""
from __future__ import annotations
import sys
from pathlib import Path
import numpy as np
import pytest
from tinyspec.frozen import freeze
from tinyspec.graph import Node
from tinyspec.refimpl import evaluate, EvalError
from tinyspec.refimpl import prepared
from tinyspec.refimpl.build import Builder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_refimpl import accumulator_kernel  # noqa: E402  (the benchmark's fold, checked here for cache soundness)

F32 = "float32"


@pytest.fixture(autouse=True)
def empty_cache():
  prepared.clear()
  yield
  prepared.clear()


def affine(n, mul_op="MUL", scale=2.0, shift=1.0):
  """out[i] = OP(x[i], scale) + shift, a kernel of one loop (the same nodes whatever the constants)."""
  b = Builder()
  x = b.param((n,), F32, 0); out = b.param((n,), F32, 1)
  i = b.range(n, 0, "GLOBAL")
  c_scale, c_shift = (b.CONST(arg={"value": c, "dtype": F32}) for c in (scale, shift))
  v = b.ADD(b.add(mul_op, b.INDEX(x, i), c_scale), c_shift)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), v), i))
  return b.graph()


def accumulation(n, op):
  """acc = OP(acc, x[k]) from 1 over k in a REG accumulator (a carried loop: the plan folds it)."""
  return accumulator_kernel(n, op, start=1.0)


X = np.array([0.5, 1.5, 2.0, 3.0], np.float32)


def fresh_after_changes():
  """The checks the planted bugs must fail: every graph below gets its own result."""
  g_mul, g_add = affine(4, "MUL"), affine(4, "ADD")
  assert len(g_mul.nodes) == len(g_add.nodes)
  assert np.array_equal(evaluate(g_mul, {"param0": X})["param1"], X * 2 + 1)
  assert np.array_equal(evaluate(g_add, {"param0": X})["param1"], X + 2 + 1), "another op at the same node id"
  g_sum, g_prod = accumulation(4, "ADD"), accumulation(4, "MUL")
  assert evaluate(g_sum, {"param0": X})["param1"][0] == np.float32(1 + X.sum())
  assert evaluate(g_prod, {"param0": X})["param1"][0] == np.float32(X.prod()), "a carried loop planned as another op's"
  g_neg = affine(4, "MUL", scale=-0.0, shift=-0.0)
  pos = evaluate(affine(4, "MUL", scale=0.0, shift=-0.0), {"param0": X})["param1"]
  neg = evaluate(g_neg, {"param0": X})["param1"]
  assert not np.signbit(pos).any() and np.signbit(neg).all(), "0.0 and -0.0 are different constants"


def fresh_after_change_in_place():
  g = affine(4)
  assert np.array_equal(evaluate(g, {"param0": X})["param1"], X * 2 + 1)
  k = next(i for i, n in enumerate(g.nodes) if n.op == "CONST" and n.arg["value"] == 2.0)
  g.nodes[k].arg = freeze({"value": 3.0, "dtype": F32})   # the same Graph and Node objects, changed
  assert np.array_equal(evaluate(g, {"param0": X})["param1"], X * 3 + 1)
  g.nodes[k] = Node("CONST", (), {"value": 4.0, "dtype": F32})
  assert np.array_equal(evaluate(g, {"param0": X})["param1"], X * 4 + 1)


def test_a_different_graph_of_the_same_size_gets_its_own_plan():
  fresh_after_changes()


def test_a_graph_changed_in_place_is_prepared_again():
  fresh_after_change_in_place()


def test_the_inputs_values_are_evaluated_at_every_call():
  g = affine(4)
  for x in (X, X + 10, -X):
    assert np.array_equal(evaluate(g, {"param0": x})["param1"], x * 2 + 1)
  assert len(prepared._cache) == 1, "one graph, one entry"


def test_the_second_call_does_not_validate_again(monkeypatch):
  calls = []
  real = prepared.validate
  monkeypatch.setattr(prepared, "validate", lambda *a, **k: calls.append(1) or real(*a, **k))
  g = affine(4)
  for _ in range(3): evaluate(g, {"param0": X})
  evaluate(affine(4), {"param0": X})   # another object of the same content: a hit
  assert len(calls) == 1


def test_inputs_that_do_not_fit_the_cached_graph_are_refused_as_before():
  g = affine(4)
  evaluate(g, {"param0": X})
  with pytest.raises(EvalError) as e:
    evaluate(g, {"param0": np.zeros(5, np.float32)})
  assert e.value.rule == "eval.input" and "has shape (5,), the graph needs (4,)" in str(e.value)
  with pytest.raises(EvalError) as e:
    evaluate(g, {"param0": X.astype(np.float64)})
  assert e.value.rule == "eval.input" and "has dtype float64" in str(e.value)
  with pytest.raises(EvalError) as e:
    evaluate(g, {"param0": X, "param7": X})
  assert e.value.rule == "eval.input" and "param7" in str(e.value)
  assert np.array_equal(evaluate(g, {"param0": X})["param1"], X * 2 + 1), "the entry is still good"


def test_an_invalid_graph_is_refused_at_every_call_and_never_kept():
  g = affine(4)
  k = next(i for i, n in enumerate(g.nodes) if n.op == "ADD")
  g.nodes[k] = Node("ADD", (g.nodes[k].src[0],), None)   # one source short
  for _ in range(2):
    with pytest.raises(EvalError) as e: evaluate(g, {"param0": X})
    assert e.value.diagnostics, str(e.value)
  assert not prepared._cache


def test_a_graph_with_a_python_object_in_an_arg_is_not_kept():
  g = affine(4)
  g.nodes[-1].tag = object()   # no content key: prepared afresh, evaluated all the same
  assert np.array_equal(evaluate(g, {"param0": X})["param1"], X * 2 + 1)
  assert not prepared._cache


def test_the_cache_is_bounded(monkeypatch):
  monkeypatch.setattr(prepared, "CACHE_SIZE", 2)
  for s in (1.0, 2.0, 3.0, 4.0):
    assert np.array_equal(evaluate(affine(4, scale=s), {"param0": X})["param1"], X * np.float32(s) + 1)
  assert len(prepared._cache) == 2
  monkeypatch.setattr(prepared, "CACHE_SIZE", 0)
  prepared.clear()
  evaluate(affine(4), {"param0": X})
  assert not prepared._cache
  monkeypatch.setattr(prepared, "CACHE_SIZE", 64)
  n = len(affine(4).nodes)
  monkeypatch.setattr(prepared, "CACHE_NODES", 2 * n)   # room for two of these graphs, by their nodes
  for s in (1.0, 2.0, 3.0):
    assert np.array_equal(evaluate(affine(4, scale=s), {"param0": X})["param1"], X * np.float32(s) + 1)
  assert len(prepared._cache) == 2
  monkeypatch.setattr(prepared, "CACHE_NODES", n - 1)   # a graph bigger than the whole bound is not kept
  prepared.clear()
  evaluate(affine(4), {"param0": X})
  assert not prepared._cache


def test_tracing_and_plain_runs_of_one_graph_share_the_entry_not_the_plan():
  g = accumulation(4, "ADD")
  plain = evaluate(g, {"param0": X})["param1"]
  traced = evaluate(g, {"param0": X}, trace=True)
  assert np.array_equal(traced["param1"], plain) and traced.values
  assert len(prepared._cache) == 1
  (entry,) = (e for _, e in prepared._cache.values())
  assert {k[-1] for k in entry.plans} == {False, True}


# ------------------------------------------------------------------ planted bugs
def test_planted_key_that_ignores_args_is_caught(monkeypatch):
  real = prepared.graph_key
  def no_args(g, level):
    nodes, roots, glevel, lv = real(g, level)
    return (tuple(n[:2] + n[3:] for n in nodes), roots, glevel, lv)   # op, src, dtype, shape...: the arg left out
  monkeypatch.setattr(prepared, "graph_key", no_args)
  with pytest.raises(AssertionError, match="0.0 and -0.0"):
    fresh_after_changes()


def test_planted_key_that_ignores_ops_is_caught(monkeypatch):
  real = prepared.graph_key
  def no_ops(g, level):
    nodes, roots, glevel, lv = real(g, level)
    return (tuple(n[1:] for n in nodes), roots, glevel, lv)
  monkeypatch.setattr(prepared, "graph_key", no_ops)
  with pytest.raises(AssertionError, match="another op"):
    fresh_after_changes()


def test_planted_key_of_the_graphs_identity_is_caught(monkeypatch):
  monkeypatch.setattr(prepared, "graph_key", lambda g, level: (id(g), level))
  with pytest.raises(AssertionError):
    fresh_after_change_in_place()


def test_planted_key_that_merges_equal_floats_is_caught(monkeypatch):
  def merged(g, level):   # args as plain tuples, compared with ==: -0.0 == 0.0 (and hash alike)
    return (tuple((n.op, tuple(n.src), tuple(sorted(n.arg.items())) if n.arg else n.arg) for n in g.nodes), level)
  monkeypatch.setattr(prepared, "graph_key", merged)
  with pytest.raises(AssertionError, match="0.0 and -0.0"):
    fresh_after_changes()


def test_the_memory_figure_is_reused_for_a_second_at_most(monkeypatch):
  """Budget(None) reads the available memory at most once per RECENT_S; the environment's
  TINYSPEC_EVAL_BUDGET is read at every call."""
  import time
  from tinyspec.refimpl import budget
  monkeypatch.delenv("TINYSPEC_EVAL_BUDGET", raising=False)
  monkeypatch.setattr(budget, "_recent", [None, 0.0])
  reads = []
  monkeypatch.setattr(budget._limits, "memory_available", lambda: reads.append(1) or (4 << 30) + 4 * len(reads))
  first = budget.Budget().limit
  assert budget.Budget().limit == first == (1 << 30) + 1 and len(reads) == 1
  monkeypatch.setattr(budget, "RECENT_S", 0.0)
  time.sleep(0.002)
  assert budget.Budget().limit == first + 1 and len(reads) == 2, "an old figure is read again"
  monkeypatch.setenv("TINYSPEC_EVAL_BUDGET", "1M")
  assert budget.Budget().limit == 1 << 20


def test_the_garbage_collector_runs_again_after_an_evaluation_even_a_refused_one():
  import gc
  assert gc.isenabled()
  evaluate(affine(4), {"param0": X})
  assert gc.isenabled()
  with pytest.raises(EvalError): evaluate(affine(4), {"param0": X.astype(np.float64)})
  assert gc.isenabled()


def test_a_constant_computed_once_is_the_callers_own_copy_and_stays_as_it_was():
  """Values the graph alone fixes are kept in the plan after the first call (read-only):
  what a caller gets is a copy, and changing it changes no later evaluation."""
  b = Builder()
  c = b.ADD(b.const(2.5, F32), b.const(1.0, F32))
  b.MUL(c, b.const(2.0, F32))
  g = b.graph()
  first = evaluate(g)["out0"]
  assert first.flags.writeable and first == np.float32(7.0)
  first[...] = 99.0
  assert evaluate(g)["out0"] == np.float32(7.0)
  (entry,) = (e for _, e in prepared._cache.values())
  (plan,) = entry.plans.values()
  assert plan.const_values and all(not v.flags.writeable for v in plan.const_values.values())


def test_planted_output_that_is_the_kept_constant_is_caught(monkeypatch):
  """The same check with outputs handed out as they are (no copy of a kept array): caught."""
  from tinyspec.refimpl import engine
  monkeypatch.setattr(engine.Machine, "strip", lambda self, scope, x: np.asarray(x).reshape(np.shape(x)[scope.R:]))
  with pytest.raises(AssertionError):
    test_a_constant_computed_once_is_the_callers_own_copy_and_stays_as_it_was()


def test_a_stored_output_is_the_callers_own_and_no_later_evaluation_sees_changes_to_it():
  g = affine(4)
  first = evaluate(g, {"param0": X})["param1"]
  assert first.flags.writeable
  first[...] = -1.0
  again = evaluate(g, {"param0": X})["param1"]
  assert np.array_equal(again, X * 2 + 1) and not np.shares_memory(first, again)
  x = X.copy()
  evaluate(g, {"param0": x})["param1"][...] = 5.0
  assert np.array_equal(x, X), "an input is never handed out as an output"
