"""Accumulators carried through several loops (`AFTER(acc, init, r0, r1, ...)`, the expand
form of REDUCE over several RANGEs) against a plain Python loop that runs the kernel
sequentially in the order of decision kernel-loops (RANGEs by id, lower id outer)."""
from __future__ import annotations
import itertools
import math
import numpy as np
import pytest
from tinyspec.refimpl import evaluate
from tinyspec.refimpl.build import Builder

F32 = "float32"
rng = np.random.default_rng(7)


def idx(b, v): return b.const(v, "index")


def multi_acc_kernel(M, sizes, update, init, dtype=F32, gate=None, ids=None, one_end=False):
  """out[i] = fold over the loops r_0..r_n (nested in id order) of update(acc, x[i, r_0, ..]),
  with one REG accumulator: acc.after(i).store(init); acc.after(init, *rs) read and stored
  inside every r; acc.after(END) read after them. The loops are closed by one END each
  (innermost first), or by one END over all of them (the compiler's expand form)."""
  b = Builder()
  x = b.param((M,) + tuple(sizes), dtype, 0); out = b.param((M,), dtype, 1)
  acc = b.buffer((1,), dtype, 0, addrspace="REG")
  z = idx(b, 0)
  i = b.range(M, 0, "GLOBAL")
  init_st = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.const(init, dtype))
  ids = ids or list(range(1, len(sizes) + 1))
  rs = [b.range(n, k, "REDUCE") for n, k in zip(sizes, ids)]
  a = b.AFTER(acc, init_st, *rs)
  new = update(b, b.INDEX(a, z), b.INDEX(x, i, *rs))
  st = b.STORE(b.INDEX(a, z), new, gate(b, *rs)) if gate else b.STORE(b.INDEX(a, z), new)
  e = st
  if one_end: e = b.END(st, *rs)
  else:
    for r in sorted(rs, key=lambda r: -b.nodes[r].arg["id"]): e = b.END(e, r)   # innermost (highest id) closed first
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.INDEX(b.AFTER(acc, e), z)), i))
  return b.graph()


def sequential(xv, init, step, ids=None, gate=None):
  """The kernel run as written: for each i, nested loops in id order, one step at a time."""
  M, sizes = xv.shape[0], xv.shape[1:]
  ids = ids or list(range(1, len(sizes) + 1))
  order = sorted(range(len(sizes)), key=lambda d: ids[d])   # loop nesting: lowest id outermost
  out = np.empty(M, xv.dtype)
  for i in range(M):
    acc = np.asarray(init, xv.dtype)
    for it in itertools.product(*(range(sizes[d]) for d in order)):
      pos = [0] * len(sizes)
      for d, t in zip(order, it): pos[d] = t
      if gate is None or gate(*pos): acc = np.asarray(step(acc, xv[(i, *pos)]), xv.dtype)
    out[i] = acc
  return out


def test_sum_of_ones_over_two_ranges():
  g = multi_acc_kernel(1, (2, 3), lambda b, acc, x: b.ADD(acc, x), 0.0)
  assert evaluate(g, {"param0": np.ones((1, 2, 3), np.float32)})["param1"].tolist() == [6.0]


@pytest.mark.parametrize("one_end", [False, True])
@pytest.mark.parametrize("sizes", [(2, 3), (4, 1, 5), (3, 0), (0, 2), (1, 1), (1, 7)])
@pytest.mark.parametrize("op", ["ADD", "MUL", "MAX"])
def test_reduce_op_over_several_ranges(op, sizes, one_end):
  init = {"ADD": 0.0, "MUL": 1.0, "MAX": -math.inf}[op]
  g = multi_acc_kernel(3, sizes, lambda b, acc, x: b.add(op, acc, x), init, one_end=one_end)
  xv = rng.uniform(0.5, 1.5, (3,) + sizes).astype(np.float32)
  step = {"ADD": lambda a, x: a + x, "MUL": lambda a, x: a * x, "MAX": lambda a, x: np.maximum(a, x)}[op]
  want = sequential(xv, init, step)
  assert evaluate(g, {"param0": xv})["param1"].tobytes() == want.tobytes()   # bit for bit: same order of rounding


def test_float_sum_over_two_ranges_rounds_in_iteration_order():
  # big and small terms: any other association order gives different bits
  g = multi_acc_kernel(2, (5, 6), lambda b, acc, x: b.ADD(acc, x), 0.0)
  xv = (rng.standard_normal((2, 5, 6)) * 10.0 ** rng.integers(-4, 5, (2, 5, 6))).astype(np.float32)
  want = sequential(xv, 0.0, lambda a, x: a + x)
  assert evaluate(g, {"param0": xv})["param1"].tobytes() == want.tobytes()


def test_loop_nesting_follows_range_ids_not_source_order():
  # the AFTER lists r(id 2) before r(id 1): id 1 is still the outer loop
  g = multi_acc_kernel(2, (3, 4), lambda b, acc, x: b.ADD(b.MUL(acc, b.const(0.5, F32)), x), 0.0, ids=[2, 1])
  xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
  want = sequential(xv, 0.0, lambda a, x: a * np.float32(0.5) + x, ids=[2, 1])
  assert evaluate(g, {"param0": xv})["param1"].tobytes() == want.tobytes()


@pytest.mark.parametrize("one_end", [False, True])
@pytest.mark.parametrize("sizes", [(2, 3), (3, 2, 2), (0, 3), (1, 1), (3, 1)])
def test_non_associative_update_over_several_ranges(sizes, one_end):
  g = multi_acc_kernel(2, sizes, lambda b, acc, x: b.ADD(b.MUL(acc, b.const(2.0, F32)), x), 1.0, one_end=one_end)
  xv = rng.standard_normal((2,) + sizes).astype(np.float32)
  want = sequential(xv, 1.0, lambda a, x: a * np.float32(2) + x)
  assert evaluate(g, {"param0": xv})["param1"].tobytes() == want.tobytes()


def test_gated_accumulation_over_two_ranges():
  # only points with r0 != r1 contribute; the gated-off ones keep the accumulator as it is
  gate = lambda b, r0, r1: b.CMPNE(r0, r1)
  g = multi_acc_kernel(2, (3, 4), lambda b, acc, x: b.MAX(acc, x), -math.inf, gate=gate)
  xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
  want = sequential(xv, -math.inf, np.maximum, gate=lambda r0, r1: r0 != r1)
  assert evaluate(g, {"param0": xv})["param1"].tobytes() == want.tobytes()


def test_register_scalar_accumulator_in_the_compiler_form():
  # acc is a ()-shaped REG BUFFER stored and read without INDEX; END closes both loops at once
  b = Builder()
  x = b.param((2, 3), "int32", 1); out = b.param((), "int32", 0)
  acc = b.buffer((), "int32", 0, addrspace="REG")
  r0, r1 = b.range(2, 0, "REDUCE"), b.range(3, 1, "REDUCE")
  init = b.STORE(acc, b.const(0, "int32"))
  upd = b.STORE(acc, b.ADD(b.AFTER(acc, init, r0, r1), b.INDEX(x, r0, r1)))
  b.SINK(b.STORE(out, b.AFTER(acc, b.END(upd, r0, r1))))
  xv = np.arange(6, dtype=np.int32).reshape(2, 3) ** 2
  assert evaluate(b.graph(), {"param1": xv})["param0"].tolist() == int(xv.sum())


@pytest.mark.parametrize("form", ["sum", "affine"])
def test_trace_of_a_two_range_accumulator_holds_every_point(form):
  # the read inside the loops sees the value before each point, in iteration order
  update = (lambda b, acc, x: b.ADD(acc, x)) if form == "sum" else (lambda b, acc, x: b.ADD(b.MUL(acc, b.const(1.0, F32)), x))
  g = multi_acc_kernel(1, (2, 3), update, 0.0)
  xv = np.arange(1, 7, dtype=np.float32).reshape(1, 2, 3)
  res = evaluate(g, {"param0": xv}, trace=True)
  reads = [i for i, n in enumerate(g.nodes) if n.op == "INDEX" and g.nodes[n.src[0]].op == "AFTER" and len(g.nodes[n.src[0]].src) == 4]
  assert len(reads) >= 1
  want = np.concatenate([[0.0], np.cumsum(xv.reshape(-1))[:-1]]).reshape(2, 3)
  got = res.values[reads[0]]
  assert got.reshape(-1).size == 6 and got.reshape(2, 3).tolist() == want.tolist()
  assert res.outputs["param1"].tolist() == [21.0]


def test_nested_sequential_loops_with_a_store_between_them():
  # per outer iteration: an inner carried loop (acc = 2*acc + x), then out[r0] = acc; acc
  # carries into the next outer iteration (it is only initialized once)
  b = Builder()
  x = b.param((3, 4), F32, 0); out = b.param((3,), F32, 1)
  acc = b.buffer((1,), F32, 0, addrspace="REG")
  z = idx(b, 0)
  init = b.STORE(b.INDEX(acc, z), b.const(1.0, F32))
  r0 = b.range(3, 0, "REDUCE"); r1 = b.range(4, 1, "REDUCE")
  a = b.AFTER(acc, init, r0, r1)
  upd = b.STORE(b.INDEX(a, z), b.ADD(b.MUL(b.INDEX(a, z), b.const(2.0, F32)), b.INDEX(x, r0, r1)))
  e1 = b.END(upd, r1)
  st = b.STORE(b.INDEX(out, r0), b.INDEX(b.AFTER(acc, e1), z))
  b.SINK(b.END(b.GROUP(st, e1), r0))
  xv = rng.standard_normal((3, 4)).astype(np.float32)
  acc_v, want = np.float32(1.0), np.zeros(3, np.float32)
  for t0 in range(3):
    for t1 in range(4): acc_v = acc_v * np.float32(2) + xv[t0, t1]
    want[t0] = acc_v
  assert evaluate(b.graph(), {"param0": xv})["param1"].tobytes() == want.tobytes()


def test_carried_loop_inside_an_empty_outer_loop():
  # found by tests/refimpl/test_refimpl_props.py: a zero-size outer loop made the register's state
  # empty, and flattening it crashed (reshape(-1) of an empty array is ambiguous)
  b = Builder()
  out = b.param((0,), F32, 0); x = b.param((5,), F32, 1)
  acc = b.buffer((1,), F32, 0, addrspace="REG")
  z = idx(b, 0)
  i = b.range(0, 0, "LOOP")
  init = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.const(0.0, F32))
  r = b.range(3, 1, "REDUCE")
  a = b.AFTER(acc, init, r)
  upd = b.STORE(b.INDEX(a, z), b.ADD(b.MUL(b.INDEX(a, z), b.const(2.0, F32)), b.INDEX(x, r)))
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.INDEX(b.AFTER(acc, b.END(upd, r)), z)), i))
  assert evaluate(b.graph(), {"param1": np.ones(5, np.float32)})["param0"].shape == (0,)


@pytest.mark.parametrize("form", ["affine", "sum"])
def test_carried_loop_with_a_bound_that_varies(form):
  # triangular: out[i] = fold over k < i + 1 of acc*c + x[i, k]; the non-associative form
  # runs sequentially and used to be refused for its varying bound
  b = Builder()
  M = 4
  x = b.param((M, M), F32, 0); out = b.param((M,), F32, 1)
  acc = b.buffer((1,), F32, 0, addrspace="REG")
  z = idx(b, 0)
  i = b.range(M, 0, "LOOP")
  init = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.const(1.0, F32))
  k = b.range(id=1, type="REDUCE", bound=b.ADD(i, idx(b, 1)))
  a = b.AFTER(acc, init, k)
  c = 0.5 if form == "affine" else 1.0
  cur = b.INDEX(a, z)
  new = b.ADD(b.MUL(cur, b.const(c, F32)), b.INDEX(x, i, k)) if form == "affine" else b.ADD(cur, b.INDEX(x, i, k))
  e = b.END(b.STORE(b.INDEX(a, z), new), k)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.INDEX(b.AFTER(acc, e), z)), i))
  xv = rng.standard_normal((M, M)).astype(np.float32)
  want = np.ones(M, np.float32)
  for ii in range(M):
    for kk in range(ii + 1): want[ii] = want[ii] * np.float32(c) + xv[ii, kk] if form == "affine" else want[ii] + xv[ii, kk]
  assert evaluate(b.graph(), {"param0": xv})["param1"].tobytes() == want.tobytes()
