"""A program's values are dropped after their last use as a value, though its LINEAR lists
every node to the end (refimpl/scope.py Scope.release). Adversaries: values whose last reader
comes much later than their first, across STORE / AFTER / END orderings, inside loops that run
at once, stepped or accumulated, and through the index of a STORE's target; each program must
give the definition's bits (refimpl/interpreter.py), and the value is shown to be dropped
early (else the test would not test the early drop)."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.refimpl import evaluate, loops
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.interpreter import interpret
from tinyspec.refimpl.scope import Scope
from tinyspec.validate import validate

F32, I32 = "float32", "int32"
rng = np.random.default_rng(7)


def idx(b, v): return b.const(v, "index")


@pytest.fixture
def early_drops(monkeypatch):
  """The nodes whose value went while a LINEAR still listed them."""
  dropped: set[int] = set()
  release = Scope.release

  def spy(self, j, listing=False):
    had = j in self.values
    release(self, j, listing)
    if had and j not in self.values and self.counts.get(j, 0) > 0: dropped.add(j)
  monkeypatch.setattr(Scope, "release", spy)
  return dropped


def program(b) -> object:
  b.PROGRAM(b.LINEAR(*range(len(b.nodes))), arg={"name": "liveness"})
  g = b.graph()
  res = validate(g)
  assert res.ok, res.diagnostics[:3]
  return g


def counting(monkeypatch, name) -> list:
  """Calls of loops.NAME (how the evaluator ran a carried loop), counted."""
  calls, fn = [], getattr(loops, name)
  monkeypatch.setattr(loops, name, lambda *a: calls.append(1) or fn(*a))
  return calls


def same_as_definition(g, inputs):
  want = interpret(g, dict(inputs))
  got = evaluate(g, dict(inputs))
  assert sorted(got) == sorted(want)
  for k in want:
    assert np.asarray(got[k]).tobytes() == np.asarray(want[k]).tobytes(), k
  return got


def test_a_value_read_again_after_a_store_after_and_end(early_drops):
  """s = x[0] is read by the first loop, then (after its END, an AFTER of the stored buffer
  and another loop's STORE) by the second loop; t (x[1] * 3) only by the first loop."""
  N = 6
  b = Builder()
  x = b.param((N,), F32, 0); out = b.param((N,), F32, 1); out2 = b.param((N,), F32, 2)
  s = b.LOAD(b.INDEX(x, idx(b, 0)))
  t = b.MUL(b.LOAD(b.INDEX(x, idx(b, 1))), b.const(3.0, F32))
  i = b.range(N, 0)
  e1 = b.END(b.STORE(b.INDEX(out, i), b.ADD(b.ADD(b.LOAD(b.INDEX(x, i)), s), t)), i)
  j = b.range(N, 1)
  read = b.LOAD(b.INDEX(b.AFTER(out, e1), j))
  e2 = b.END(b.STORE(b.INDEX(out2, j), b.MUL(read, s)), j)
  b.SINK(e1, e2)
  g = program(b)
  xv = rng.standard_normal(N).astype(np.float32)
  got = same_as_definition(g, {"param0": xv, "param1": np.zeros(N, np.float32), "param2": np.zeros(N, np.float32)})
  first = (xv + xv[0]) + xv[1] * np.float32(3)
  assert np.array_equal(got["param2"], first * xv[0])
  assert t in early_drops and s in early_drops   # t after the first loop, s after the second


def test_a_store_targets_index_outlives_its_value_readers(early_drops):
  """The index p = (i * 2) % N is read as a value (out2[i] = p), then as the index of a STORE
  target after further work: an INDEX's index values live until the STORE through it."""
  N = 8
  b = Builder()
  x = b.param((N,), F32, 0); out = b.param((N,), F32, 1); out2 = b.param((N,), I32, 2)
  i = b.range(N, 0)
  p = b.MOD(b.MUL(i, idx(b, 2)), idx(b, N))
  st1 = b.STORE(b.INDEX(out2, i), b.CAST(p, arg=I32))
  target = b.INDEX(out, p)
  v = b.SQRT(b.ADD(b.LOAD(b.INDEX(x, i)), b.const(1.0, F32)))
  st2 = b.STORE(target, b.MUL(v, v))
  b.SINK(b.END(b.GROUP(st1, st2), i))
  g = program(b)
  xv = rng.uniform(0, 4, N).astype(np.float32)
  got = same_as_definition(g, {"param0": xv, "param1": np.zeros(N, np.float32), "param2": np.zeros(N, np.int32)})
  assert got["param2"].tolist() == [(k * 2) % N for k in range(N)]
  assert early_drops   # v and its sources went before the LINEAR


def test_an_accumulation_reads_a_value_made_before_its_loop(early_drops, monkeypatch):
  """acc += x[i, k] * w with w = x[i, 0] + 1 made before the REDUCE loop and read after it
  (out[i] = acc * w): the update is computed by the accumulation at its STORE."""
  M, K = 3, 7
  b = Builder()
  x = b.param((M, K), F32, 0); out = b.param((M,), F32, 1)
  acc = b.buffer((1,), F32, 0, addrspace="REG")
  z = idx(b, 0)
  i = b.range(M, 0, "GLOBAL")
  w = b.ADD(b.LOAD(b.INDEX(x, i, z)), b.const(1.0, F32))
  init = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.const(0.0, F32))
  k = b.range(K, 1, "REDUCE")
  a = b.INDEX(b.AFTER(acc, init, k), z)
  e = b.END(b.STORE(a, b.ADD(b.LOAD(a), b.MUL(b.LOAD(b.INDEX(x, i, k)), w))), k)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.MUL(b.LOAD(b.INDEX(b.AFTER(acc, e), z)), w)), i))
  g = program(b)
  xv = rng.standard_normal((M, K)).astype(np.float32)
  accumulated = counting(monkeypatch, "reduction_write")
  same_as_definition(g, {"param0": xv, "param1": np.zeros(M, np.float32)})
  assert accumulated and w in early_drops


def test_a_stepped_loop_reads_a_value_made_before_it(early_drops, monkeypatch):
  """acc = acc * 2 + x[k] * c (no accumulation form: the loop is stepped) with c = x[0] - 1
  made before the loop and read after it."""
  K = 5
  b = Builder()
  x = b.param((K,), F32, 0); out = b.param((2,), F32, 1)
  acc = b.buffer((1,), F32, 0, addrspace="REG")
  z = idx(b, 0)
  c = b.SUB(b.LOAD(b.INDEX(x, z)), b.const(1.0, F32))
  init = b.STORE(b.INDEX(acc, z), b.const(1.0, F32))
  k = b.range(K, 0, "REDUCE")
  a = b.INDEX(b.AFTER(acc, init, k), z)
  new = b.ADD(b.MUL(b.LOAD(a), b.const(2.0, F32)), b.MUL(b.LOAD(b.INDEX(x, k)), c))
  e = b.END(b.STORE(a, new), k)
  st1 = b.STORE(b.INDEX(out, z), b.LOAD(b.INDEX(b.AFTER(acc, e), z)))
  st2 = b.STORE(b.INDEX(out, idx(b, 1)), b.MUL(c, c))
  b.SINK(st1, st2)
  g = program(b)
  xv = rng.standard_normal(K).astype(np.float32)
  stepped = counting(monkeypatch, "run_stepped")
  got = same_as_definition(g, {"param0": xv, "param1": np.zeros(2, np.float32)})
  want = np.float32(1)
  for v in xv: want = want * np.float32(2) + v * (xv[0] - np.float32(1))
  assert got["param1"][0] == want
  assert stepped and c in early_drops


def test_a_gate_read_by_an_if_and_a_far_later_store(early_drops):
  """The gate g = i < 3 opens an IF block and gates a STORE after the block closed."""
  N = 6
  b = Builder()
  out = b.param((N,), I32, 0); out2 = b.param((N,), I32, 1)
  i = b.range(N, 0)
  gate = b.CMPLT(i, idx(b, 3))
  f = b.IF(gate)
  st1 = b.STORE(b.INDEX(out, i), b.const(7, I32))   # inside the block by its position
  endif = b.ENDIF(f)
  st2 = b.STORE(b.INDEX(out2, i), b.CAST(i, arg=I32), gate)
  b.SINK(b.END(b.GROUP(st1, endif, st2), i))
  g = program(b)
  got = same_as_definition(g, {"param0": np.zeros(N, np.int32), "param1": np.full(N, -1, np.int32)})
  assert got["param0"].tolist() == [7, 7, 7, 0, 0, 0] and got["param1"].tolist() == [0, 1, 2, -1, -1, -1]
  assert gate in early_drops
