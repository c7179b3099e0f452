"""The kernel split: what fuses into one kernel, what is realized, what is not recomputed."""
from __future__ import annotations
import numpy as np
from tinyspec.uop import UOp, toposort
from tinyspec.compiler import compile_graph
from tinyspec.compiler.check import compare_outputs
from tinyspec.compiler.literals import shape_operand as S, const
from tinyspec.refimpl import evaluate

RNG = np.random.default_rng(3)


def buf(slot, shape, dt="float32"):
  return UOp("BUFFER", (S(shape),), {"slot": slot, "dtype": dt, "device": "CPU"})


def ints(shape): return RNG.integers(-5, 6, shape).astype(np.float32)


def count(c, op: str) -> list[int]:
  """How many `op` nodes each kernel of the rangeify stage holds."""
  return [sum(u.op == op for u in toposort(k.sink)) for k in c.schedule.kernels]


def check(roots, inputs, target="c"):
  c = compile_graph(roots, target)
  assert not compare_outputs(c.run(inputs), evaluate(roots, inputs))
  return c


def rangeify_kernels(c):
  """The kernels as rangeify left them (REDUCE still a node), from the stage graph."""
  g = c.stages["rangeify"]
  return [u.src[0] for u in g.uops() if u.op == "CALL"]


def test_elementwise_chain_and_reduce_is_one_kernel():
  a, b, c = buf(0, (8, 16)), buf(1, (8, 16)), buf(2, (8, 16))
  r = UOp("REDUCE", (UOp("MUL", (UOp("ADD", (a, b)), c)),), {"op": "ADD", "axes": [0, 1]})
  comp = check([r], {"buf0": ints((8, 16)), "buf1": ints((8, 16)), "buf2": ints((8, 16))})
  assert len(comp.schedule.kernels) == 1
  assert [k.name for k in comp.sources] == ["r_1_1"]


def test_elementwise_after_reduce_fuses():
  a = buf(0, (4, 6))
  r = UOp("MUL", (UOp("REDUCE", (a,), {"op": "MAX", "axes": [1]}), const(2.0, "float32")))
  comp = check([r], {"buf0": ints((4, 6))})
  assert len(comp.schedule.kernels) == 1


def test_two_reductions_of_one_input_share_a_loop():
  """sum and max of the same a+b: one kernel, one loop, a+b computed once per element."""
  a, b = buf(0, (4, 32)), buf(1, (4, 32))
  x = UOp("ADD", (a, b))
  roots = [UOp("REDUCE", (x,), {"op": "ADD", "axes": [1]}), UOp("REDUCE", (x,), {"op": "MAX", "axes": [1]})]
  comp = check(roots, {"buf0": ints((4, 32)), "buf1": ints((4, 32))})
  assert len(comp.schedule.kernels) == 1
  (k,) = rangeify_kernels(comp)
  assert sum(u.op == "ADD" for u in toposort(k)) == 1                   # the shared a+b, once
  reduces = [u for u in toposort(k) if u.op == "REDUCE"]
  assert len(reduces) == 2 and reduces[0].src[1:] == reduces[1].src[1:]   # over the same RANGE: one loop
  src = comp.sources[0].source
  assert src.count("for (") == 2                                        # the output loop and one reduce loop


def test_shared_reduce_is_computed_once():
  """A reduce used twice (here as out and in a later op) is realized, not recomputed."""
  a = buf(0, (16, 16))
  s = UOp("REDUCE", (UOp("MUL", (a, a)),), {"op": "ADD", "axes": [1]})
  roots = [UOp("ADD", (s, const(1.0, "float32"))), UOp("MUL", (s, s))]
  comp = check(roots, {"buf0": ints((16, 16))})
  per_kernel = [sum(u.op == "REDUCE" for u in toposort(k)) for k in rangeify_kernels(comp)]
  assert sum(per_kernel) == 1, per_kernel


def test_broadcast_reduce_is_realized():
  """x - max(x): the max is realized once instead of recomputed for every element."""
  a = buf(0, (8, 64))
  m = UOp("REDUCE", (a,), {"op": "MAX", "axes": [1]})
  d = UOp("SUB", (a, UOp("EXPAND", (m, S((8, 64))))))
  comp = check([d], {"buf0": ints((8, 64))})
  per_kernel = [sum(u.op == "REDUCE" for u in toposort(k)) for k in rangeify_kernels(comp)]
  assert per_kernel == [1, 0], per_kernel


def test_cheap_shared_values_are_recomputed_and_counted():
  """Elementwise values used by two kernels are recomputed (cheaper than a round trip
  through memory), and the schedule says how many."""
  a, b = buf(0, (4, 4)), buf(1, (4, 4))
  x = UOp("ADD", (a, b))
  roots = [UOp("MUL", (x, x)), UOp("RESHAPE", (x, S((16,))))]
  comp = check(roots, {"buf0": ints((4, 4)), "buf1": ints((4, 4))})
  assert comp.schedule.meta["recomputed"] >= 1


def test_gemm_is_one_kernel():
  A, B = buf(0, (3, 5)), buf(1, (5, 4))
  prod = UOp("MUL", (UOp("RESHAPE", (A, S((3, 5, 1)))), UOp("RESHAPE", (B, S((1, 5, 4))))))
  out = UOp("REDUCE", (prod,), {"op": "ADD", "axes": [1]})
  comp = check([out], {"buf0": ints((3, 5)), "buf1": ints((5, 4))})
  assert len(comp.schedule.kernels) == 1
  assert "r_3_1_4" == comp.sources[0].name
