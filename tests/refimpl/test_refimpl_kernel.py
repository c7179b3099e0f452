"""Kernel-level (after rangeify) and program-level (LINEAR) graphs against plain Python
loops that run the kernel sequentially, iteration by iteration."""
from __future__ import annotations
import math
import numpy as np
import pytest
from tinyspec.refimpl import evaluate, EvalError
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.numeric import NP

F32 = "float32"
rng = np.random.default_rng(1)


def idx(b, v): return b.const(v, "index")


def acc_kernel(M, K, update, init=0.0, dtype=F32, gate=None):
  """out[i] = fold over k of update(acc, x[i, k]), with a REG accumulator (tinygrad's form:
  acc.after(i).store(init); acc.after(init, k) read and stored inside k; acc.after(END) read)."""
  b = Builder()
  x = b.param((M, K), dtype, 0); out = b.param((M,), dtype, 1)
  acc = b.buffer((1,), dtype, 0, addrspace="REG")
  z = idx(b, 0)
  i = b.range(M, 0, "GLOBAL")
  init_st = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.const(init, dtype))
  k = b.range(K, 1, "REDUCE")
  a = b.AFTER(acc, init_st, k)
  xv = b.INDEX(x, i, k)
  new = update(b, b.INDEX(a, z), xv)
  st = b.STORE(b.INDEX(a, z), new, gate(b, i, k)) if gate else b.STORE(b.INDEX(a, z), new)
  e = b.END(st, k)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.INDEX(b.AFTER(acc, e), z)), i))
  return b.graph()


def test_elementwise_kernel():
  b = Builder()
  N = 1000
  x = b.param((N,), F32, 0); y = b.param((N,), F32, 1); out = b.param((N,), F32, 2)
  i = b.range(N, 0)
  v = b.ADD(b.MUL(b.INDEX(x, i), b.INDEX(y, i)), b.SQRT(b.INDEX(x, i)))
  b.SINK(b.END(b.STORE(b.INDEX(out, i), v), i))
  xv, yv = rng.uniform(0, 2, N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
  got = evaluate(b.graph(), {"param0": xv, "param1": yv})
  np.testing.assert_array_equal(got["param2"], xv * yv + np.sqrt(xv))
  assert set(got) == {"param2"}   # only what was stored


def test_sum_kernel_reduce_over_range():
  b = Builder()
  M, K = 7, 300
  x = b.param((M, K), F32, 0); out = b.param((M,), F32, 1)
  i = b.range(M, 0, "GLOBAL"); k = b.range(K, 1, "REDUCE")
  s = b.REDUCE(b.INDEX(x, i, k), k, arg={"op": "ADD"})
  mx = b.REDUCE(b.INDEX(x, i, k), k, arg={"op": "MAX"})
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.ADD(s, mx)), i))
  xv = rng.standard_normal((M, K)).astype(np.float32)
  got = evaluate(b.graph(), {"param0": xv})["param1"]
  np.testing.assert_allclose(got, xv.sum(1) + xv.max(1), rtol=1e-5)


def test_reduce_of_a_loop_invariant_value_repeats_it():
  b = Builder()
  out = b.param((1,), "int32", 0)
  k = b.range(5, 0, "REDUCE")
  s = b.REDUCE(b.const(3, "int32"), k, arg={"op": "ADD"})
  b.SINK(b.STORE(b.INDEX(out, idx(b, 0)), s))
  assert evaluate(b.graph())["param0"].tolist() == [15]


@pytest.mark.parametrize("dtype", [F32, "float16", "bfloat16", "int32"])
def test_accumulator_kernel_is_the_sequential_sum(dtype):
  M, K = 4, 257
  g = acc_kernel(M, K, lambda b, acc, x: b.ADD(acc, x), dtype=dtype, init=0 if dtype == "int32" else 0.0)
  xv = (rng.standard_normal((M, K)) * 100).astype(NP[dtype])
  got = evaluate(g, {"param0": xv})["param1"]
  acc = np.zeros(M, NP[dtype])
  for k in range(K): acc = (acc.astype(np.float32) + xv[:, k].astype(np.float32)).astype(NP[dtype]) if dtype == "bfloat16" else acc + xv[:, k]
  assert got.tobytes() == acc.tobytes()   # bit for bit: the same rounding at every step


@pytest.mark.parametrize("acc_first", [True, False])
def test_accumulator_max_with_nan_and_signed_zero(acc_first):
  # decision max-nan, folded in order: MAX(acc, x) keeps the first zero met and skips a NaN x;
  # MAX(x, acc) takes a NaN x (its first operand) and the later of equal zeros
  g = acc_kernel(3, 3, (lambda b, acc, x: b.MAX(acc, x)) if acc_first else (lambda b, acc, x: b.MAX(x, acc)), init=-math.inf)
  xv = np.array([[-0.0, 0.0, -1.0], [1.0, math.nan, 2.0], [1.0, 2.0, math.nan]], np.float32)
  got = evaluate(g, {"param0": xv})["param1"]
  want = []
  for row in xv.tolist():   # the sequential loop, with Python's max semantics b if a < b else a
    acc = -math.inf
    for x in row: acc = (x if acc < x else acc) if acc_first else (acc if x < acc else x)
    want.append(acc)
  assert got.tobytes() == np.array(want, np.float32).tobytes()


def test_accumulator_with_a_gated_store():
  # only even k contribute
  g = acc_kernel(3, 6, lambda b, acc, x: b.ADD(acc, x), gate=lambda b, i, k: b.CMPEQ(b.MOD(k, idx(b, 2)), idx(b, 0)))
  xv = np.arange(18, dtype=np.float32).reshape(3, 6)
  assert evaluate(g, {"param0": xv})["param1"].tolist() == xv[:, ::2].sum(1).tolist()


def test_mulacc_accumulator_gemm_kernel():
  b = Builder()
  M, K, N = 5, 9, 4
  A = b.param((M, K), F32, 0); B = b.param((K, N), F32, 1); C = b.param((M, N), F32, 2)
  acc = b.buffer((1,), F32, 0, addrspace="REG")
  z = idx(b, 0)
  i = b.range(M, 0, "GLOBAL"); j = b.range(N, 1, "GLOBAL")
  init = b.STORE(b.INDEX(b.AFTER(acc, i, j), z), b.const(0.0, F32))
  k = b.range(K, 2, "REDUCE")
  a = b.AFTER(acc, init, k)
  e = b.END(b.STORE(b.INDEX(a, z), b.MULACC(b.INDEX(A, i, k), b.INDEX(B, k, j), b.INDEX(a, z))), k)
  b.SINK(b.END(b.STORE(b.INDEX(C, i, j), b.INDEX(b.AFTER(acc, e), z)), i, j))
  av, bv = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
  want = np.zeros((M, N), np.float32)
  for kk in range(K): want = want + av[:, kk:kk + 1] * bv[kk:kk + 1, :]
  assert evaluate(b.graph(), {"param0": av, "param1": bv})["param2"].tobytes() == want.tobytes()


def test_two_accumulators_in_one_register_buffer():
  # an upcast accumulator: acc[0] sums even columns, acc[1] odd ones, in one loop
  b = Builder()
  K = 6
  x = b.param((2 * K,), "int32", 0); out = b.param((2,), "int32", 1)
  acc = b.buffer((2,), "int32", 0, addrspace="REG")
  z, o = idx(b, 0), idx(b, 1)
  init = b.GROUP(b.STORE(b.INDEX(acc, z), b.const(0, "int32")), b.STORE(b.INDEX(acc, o), b.const(0, "int32")))
  k = b.range(K, 0, "REDUCE")
  a = b.AFTER(acc, init, k)
  two_k = b.MUL(k, idx(b, 2))
  s0 = b.STORE(b.INDEX(a, z), b.ADD(b.INDEX(a, z), b.INDEX(x, two_k)))
  s1 = b.STORE(b.INDEX(a, o), b.ADD(b.INDEX(x, b.ADD(two_k, o)), b.INDEX(a, o)))
  e = b.END(b.GROUP(s0, s1), k)
  fin = b.AFTER(acc, e)
  b.SINK(b.STORE(b.INDEX(out, z), b.INDEX(fin, z)), b.STORE(b.INDEX(out, o), b.INDEX(fin, o)))
  xv = np.arange(2 * K, dtype=np.int32) ** 2
  assert evaluate(b.graph(), {"param0": xv})["param1"].tolist() == [int(xv[::2].sum()), int(xv[1::2].sum())]


def test_carried_non_associative_dependency():
  g = acc_kernel(3, 7, lambda b, acc, x: b.ADD(b.MUL(acc, b.const(2.0, F32)), x), init=1.0)
  xv = rng.standard_normal((3, 7)).astype(np.float32)
  want = np.ones(3, np.float32)
  for k in range(7): want = want * np.float32(2) + xv[:, k]
  assert evaluate(g, {"param0": xv})["param1"].tobytes() == want.tobytes()


def test_carried_prefix_sum_in_place():
  b = Builder()
  N = 10
  x = b.param((N,), "int64", 0)
  r = b.range(N - 1, 0)
  i = b.ADD(r, idx(b, 1))
  ax = b.AFTER(x, r)
  b.SINK(b.END(b.STORE(b.INDEX(ax, i), b.ADD(b.INDEX(ax, i), b.INDEX(ax, r))), r))
  xv = rng.integers(-5, 5, N)
  assert evaluate(b.graph(), {"param0": xv})["param0"].tolist() == np.cumsum(xv).tolist()


def test_gated_loads_and_stores_may_point_out_of_bounds():
  b = Builder()
  N = 8
  x = b.param((N,), F32, 0); out = b.param((N,), F32, 1)
  i = b.range(N + 2, 0)   # two iterations past the end: their store is gated off
  nxt = b.ADD(i, idx(b, 1))
  v = b.LOAD(b.INDEX(x, nxt), b.const(-1.0, F32), b.CMPLT(nxt, idx(b, N)))
  b.SINK(b.END(b.STORE(b.INDEX(out, i), v, b.CMPLT(i, idx(b, N))), i))
  xv = np.arange(N, dtype=np.float32)
  assert evaluate(b.graph(), {"param0": xv})["param1"].tolist() == list(range(1, N)) + [-1.0]


def ungated_shifted_read():
  """out[i] = x[i + 1] for i < 4 from a 4-element x, under a gate that does not cover i + 1 == 4."""
  b = Builder()
  x = b.param((4,), F32, 0); out = b.param((4,), F32, 1)
  i = b.range(4, 0)
  gate = b.CMPLT(i, idx(b, 4))   # true everywhere: does not cover i + 1 == 4
  v = b.LOAD(b.INDEX(x, b.ADD(i, idx(b, 1))), b.const(-1.0, F32), gate)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), v), i))
  return b.graph()


def test_ungated_out_of_bounds_read_is_zero():
  # decision index-oob holds in kernels too: the element is invalid and reads as zero
  got = evaluate(ungated_shifted_read(), {"param0": np.arange(1, 5, dtype=np.float32)})
  assert got["param1"].tolist() == [2.0, 3.0, 4.0, 0.0]


def test_strict_bounds_refuses_the_ungated_access():
  with pytest.raises(EvalError) as e:
    evaluate(ungated_shifted_read(), {"param0": np.zeros(4, np.float32)}, strict_bounds=True)
  assert e.value.rule == "eval.oob" and e.value.op == "INDEX" and "(4,)" in str(e.value)


def two_index_gather():
  """out[i, j] = a[idx[i], j] with a (5, 3) and i < 4, j < 3: a row read through a data index."""
  b = Builder()
  a = b.param((5, 3), F32, 1); ix = b.param((4,), "int32", 2); out = b.param((4, 3), F32, 0)
  i, j = b.range(4, 0), b.range(3, 1)
  v = b.INDEX(a, b.CAST(b.INDEX(ix, i), arg="index"), j)
  b.SINK(b.END(b.STORE(b.INDEX(out, i, j), v), i, j))
  return b.graph()


def test_two_index_read_out_of_range_rows_are_zero():
  av = np.arange(15, dtype=np.float32).reshape(5, 3)
  ixv = np.array([4, 9, 0, -7], np.int32)
  got = evaluate(two_index_gather(), {"param1": av, "param2": ixv})["param0"]
  assert got.tolist() == [av[4].tolist(), [0.0] * 3, av[0].tolist(), [0.0] * 3]
  # strict_bounds names the first offending index (the message used to crash while being formatted)
  with pytest.raises(EvalError) as e:
    evaluate(two_index_gather(), {"param1": av, "param2": ixv}, strict_bounds=True)
  assert e.value.rule == "eval.oob" and "index (9, 0) into shape (5, 3)" in str(e.value)


def test_ungated_out_of_bounds_store_writes_nothing():
  b = Builder()
  out = b.param((4,), "int32", 0)
  i = b.range(6, 0)
  b.SINK(b.END(b.STORE(b.INDEX(out, b.SUB(i, idx(b, 1))), b.CAST(i, arg="int32")), i))   # out[i - 1] = i for i < 6
  assert evaluate(b.graph(), {"param0": np.full(4, -5, np.int32)})["param0"].tolist() == [1, 2, 3, 4]
  with pytest.raises(EvalError, match="out-of-bounds write") as e:
    evaluate(b.graph(), {"param0": np.zeros(4, np.int32)}, strict_bounds=True)
  assert "(-1,)" in str(e.value)


def test_if_block_in_a_kernel_graph():
  # nodes that depend on the IF run only where its gate holds; ENDIF ends the block
  b = Builder()
  N = 6
  out = b.param((N,), "int32", 0)
  i = b.range(N, 0)
  f = b.IF(b.CMPLT(i, idx(b, 3)))
  st = b.STORE(b.INDEX(b.AFTER(out, f), i), b.CAST(i, arg="int32"))
  b.SINK(b.END(b.GROUP(st, b.ENDIF(f)), i))
  assert evaluate(b.graph(), {"param0": np.full(N, -1, np.int32)})["param0"].tolist() == [0, 1, 2, -1, -1, -1]


def test_linear_program_with_loop_and_if_block():
  b = Builder()
  N = 5
  out = b.param((N,), "int32", 0)
  i = b.range(N, 0)
  cond = b.CMPNE(b.MOD(i, idx(b, 2)), idx(b, 0))
  f = b.IF(cond)
  st = b.STORE(b.INDEX(out, i), b.const(7, "int32"))   # inside the block by position only
  endif = b.ENDIF(f)
  end = b.END(b.GROUP(st, endif), i)
  order = list(range(len(b.nodes)))
  b.LINEAR(*order)
  assert evaluate(b.graph(), {"param0": np.zeros(N, np.int32)})["param0"].tolist() == [0, 7, 0, 7, 0]
  _ = end


def test_special_thread_indices():
  b = Builder()
  G, L = 4, 8
  out = b.param((G * L,), "int32", 0)
  g = b.add("SPECIAL", idx(b, G), arg={"name": "gidx0"}); l = b.add("SPECIAL", idx(b, L), arg={"name": "lidx0"})
  gi = b.ADD(b.MUL(g, idx(b, L)), l)
  b.SINK(b.STORE(b.INDEX(out, gi), b.CAST(b.MUL(g, l), arg="int32")))
  want = (np.arange(G)[:, None] * np.arange(L)[None, :]).reshape(-1)
  assert evaluate(b.graph())["param0"].tolist() == want.tolist()


def test_local_buffer_and_barrier_tree_reduction():
  # each workgroup sums its L values through LOCAL memory: a barrier, then thread 0 reads them all
  b = Builder()
  G, L = 3, 4
  x = b.param((G * L,), F32, 0); out = b.param((G,), F32, 1)
  loc = b.buffer((L,), F32, 0, addrspace="LOCAL")
  g = b.add("SPECIAL", idx(b, G), arg={"name": "gidx0"}); l = b.add("SPECIAL", idx(b, L), arg={"name": "lidx0"})
  s1 = b.STORE(b.INDEX(loc, l), b.INDEX(x, b.ADD(b.MUL(g, idx(b, L)), l)))
  after = b.AFTER(loc, b.BARRIER(s1))
  k = b.range(L, 0, "REDUCE")
  total = b.REDUCE(b.INDEX(after, k), k, arg={"op": "ADD"})
  b.SINK(b.STORE(b.INDEX(out, g), total, b.CMPEQ(l, idx(b, 0))))
  xv = rng.standard_normal(G * L).astype(np.float32)
  np.testing.assert_allclose(evaluate(b.graph(), {"param0": xv})["param1"], xv.reshape(G, L).sum(1), rtol=1e-6)


def test_local_store_without_barrier_is_only_seen_by_its_own_thread():
  b = Builder()
  L = 4
  out = b.param((L,), "int32", 0)
  loc = b.buffer((L,), "int32", 0, addrspace="LOCAL")
  l = b.add("SPECIAL", idx(b, L), arg={"name": "lidx0"})
  s1 = b.STORE(b.INDEX(loc, l), b.ADD(b.CAST(l, arg="int32"), b.const(10, "int32")))
  rd = b.INDEX(b.AFTER(loc, s1), b.MOD(b.ADD(l, idx(b, 1)), idx(b, L)))   # a neighbour's slot: not ordered, still zero
  mine = b.INDEX(b.AFTER(loc, s1), l)
  b.SINK(b.STORE(b.INDEX(out, l), b.ADD(rd, mine)))
  assert evaluate(b.graph())["param0"].tolist() == [10, 11, 12, 13]


def test_symbolic_size_param():
  b = Builder()
  x = b.param((16,), "int32", 0); out = b.param((16,), "int32", 1)
  n = b.param((), "index", 2, name="n", bounds=(0, 16))
  i = b.range(bound=n, id=0)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.MUL(b.INDEX(x, i), b.const(2, "int32"))), i))
  xv = np.arange(16, dtype=np.int32)
  for nv in (5, 16):
    got = evaluate(b.graph(), {"param0": xv, "n": nv})["param1"]
    assert got.tolist() == [2 * v for v in range(nv)] + [0] * (16 - nv)
  assert evaluate(b.graph(), {"param0": xv, "n": 0})["param1"].tolist() == [0] * 16   # an empty loop writes nothing
  with pytest.raises(EvalError, match="outside its bounds"):
    evaluate(b.graph(), {"param0": xv, "n": 17})
  with pytest.raises(EvalError, match="needs a value"):
    evaluate(b.graph(), {"param0": xv})


def test_triangular_loop_with_a_varying_bound():
  # out[i] = sum_{k < i+1} x[k]: the inner bound depends on the outer loop
  b = Builder()
  N = 6
  x = b.param((N,), "int32", 0); out = b.param((N,), "int32", 1)
  i = b.range(N, 0)
  k = b.range(bound=b.ADD(i, idx(b, 1)), id=1)
  s = b.REDUCE(b.INDEX(x, k), k, arg={"op": "ADD"})
  b.SINK(b.END(b.STORE(b.INDEX(out, i), s), i))
  xv = np.arange(1, N + 1, dtype=np.int32)
  assert evaluate(b.graph(), {"param0": xv})["param1"].tolist() == np.cumsum(xv).tolist()


def test_atomicadd_accumulates_duplicates():
  b = Builder()
  out = b.param((3,), "int32", 0)
  i = b.range(10, 0)
  b.SINK(b.END(b.ATOMICADD(b.INDEX(out, b.MOD(i, idx(b, 3))), b.CAST(i, arg="int32")), i))
  assert evaluate(b.graph())["param0"].tolist() == [0 + 3 + 6 + 9, 1 + 4 + 7, 2 + 5 + 8]


def test_wmma_tile():
  b = Builder()
  a = b.param((2, 3), "float16", 0); w = b.param((3, 2), "float16", 1); c = b.param((2, 2), F32, 2)
  out = b.param((2, 2), F32, 3)
  b.SINK(b.STORE(out, b.WMMA(a, w, c, arg={})))
  av, wv, cv = (rng.standard_normal(s).astype(t) for s, t in (((2, 3), np.float16), ((3, 2), np.float16), ((2, 2), np.float32)))
  got = evaluate(b.graph(), {"param0": av, "param1": wv, "param2": cv}, level="kernel")["param3"]
  np.testing.assert_allclose(got, cv + av.astype(np.float32) @ wv.astype(np.float32), rtol=1e-6)


def test_trace_of_an_accumulator_holds_every_iteration():
  g = acc_kernel(2, 4, lambda b, acc, x: b.ADD(acc, x))
  xv = np.arange(8, dtype=np.float32).reshape(2, 4)
  res = evaluate(g, {"param0": xv}, trace=True)
  upd = next(i for i, n in enumerate(g.nodes) if n.op == "ADD")
  seq = res.values[upd]   # (i, k) axes: the accumulator after each iteration
  assert seq.reshape(2, 4).tolist() == np.cumsum(xv, 1).tolist()
  assert res.loop_axes[upd] == tuple(i for i, n in enumerate(g.nodes) if n.op == "RANGE")


def linearized(b):
  """Wrap every node of b in a LINEAR (list order = graph order) and return the graph."""
  b.LINEAR(*range(len(b.nodes)))
  return b.graph()


def test_tinygrad_accumulator_form_in_a_linear():
  # a ()-shaped REG accumulator: STORE(AFTER(acc, i), 0); STORE(acc, ADD(AFTER(acc, init, k), x)); read AFTER(acc, END)
  b = Builder()
  M, K = 5, 7
  x = b.param((M, K), F32, 1); out = b.param((M, 1), F32, 0)
  acc = b.add("BUFFER", b.shape(), arg={"slot": 0, "dtype": F32, "device": "REG", "addrspace": "REG"})
  i = b.range(M, 0, "GLOBAL")
  init = b.STORE(b.AFTER(acc, i), b.const(0.0, F32))
  k = b.range(K, 1, "REDUCE")
  upd = b.STORE(acc, b.ADD(b.AFTER(acc, init, k), b.INDEX(x, i, k)))
  e = b.END(upd, k)
  st = b.STORE(b.INDEX(out, i, idx(b, 0)), b.AFTER(acc, e))
  b.SINK(b.END(st, i))
  g = linearized(b)
  xv = rng.standard_normal((M, K)).astype(np.float32)
  want = np.zeros(M, np.float32)
  for kk in range(K): want = want + xv[:, kk]
  assert evaluate(g, {"param1": xv})["param0"].reshape(-1).tobytes() == want.tobytes()


def test_gated_load_in_a_linear():
  b = Builder()
  N = 6
  x = b.param((N,), "int32", 0); out = b.param((N,), "int32", 1)
  i = b.range(N, 0)
  j = b.SUB(i, idx(b, 2))
  v = b.LOAD(b.INDEX(x, j), b.const(-1, "int32"), b.CMPLE(idx(b, 2), i))   # x[i-2] where i >= 2
  b.SINK(b.END(b.STORE(b.INDEX(out, i), v), i))
  g = linearized(b)
  assert evaluate(g, {"param0": np.arange(N, dtype=np.int32)})["param1"].tolist() == [-1, -1, 0, 1, 2, 3]


def outer_reset_accumulator(M, K, through_after, scalar, cast_range=False):
  """tinygrad's lowered accumulator inside an outer loop o: the REG acc is zeroed in every
  iteration of o, then updated in loop k by a STORE through the carried AFTER(acc, init, k)
  (or through acc itself), and read after END k: out[o] = sum_k x[o*K + k]. Loop ids make
  k outer by id (tinygrad's numbering), o outer by position; `cast_range` lists CAST(k)
  in the AFTER, as the tinygrad importer writes an int-typed RANGE."""
  b = Builder()
  x = b.param((M * K,), F32, 1); out = b.param((M,), F32, 0)
  acc = b.add("BUFFER", b.shape() if scalar else b.shape(1), arg={"slot": 0, "dtype": F32, "device": "CPU", "addrspace": "REG"})
  at = (lambda a: a) if scalar else (lambda a: b.INDEX(a, idx(b, 0)))
  o = b.range(M, 1, "LOOP")
  init = b.STORE(at(b.AFTER(acc, o)), b.const(0.0, F32))
  k = b.range(K, 0, "REDUCE")
  carried = at(b.AFTER(acc, init, b.CAST(k, arg="int32") if cast_range else k))
  new = b.ADD(carried, b.INDEX(x, b.ADD(b.MUL(o, idx(b, K)), k)))
  e = b.END(b.STORE(carried if through_after else at(acc), new), k)
  b.SINK(b.END(b.STORE(b.INDEX(out, o), at(b.AFTER(acc, e))), o))
  return b


@pytest.mark.parametrize("through_after", [True, False])
@pytest.mark.parametrize("scalar", [True, False])
@pytest.mark.parametrize("cast_range", [False, True])
def test_accumulator_reset_in_an_outer_loop_in_a_linear_and_its_kernel_twin(through_after, scalar, cast_range):
  # regression: the LINEAR listing the loop body's own STORE was refused ("two unordered
  # histories"), and an AFTER listing CAST(k) did not carry loop k
  M, K = 4, 5
  xv = rng.standard_normal(M * K).astype(np.float32)
  want = np.zeros(M, np.float32)
  for kk in range(K): want = want + xv[kk::K]   # the sequential loop, k innermost
  kernel = outer_reset_accumulator(M, K, through_after, scalar, cast_range).graph(level="kernel")
  program = linearized(outer_reset_accumulator(M, K, through_after, scalar, cast_range))
  got_kernel = evaluate(kernel, {"param1": xv})["param0"]
  got_program = evaluate(program, {"param1": xv}, level="program")["param0"]
  assert got_kernel.tobytes() == want.tobytes()
  assert got_program.tobytes() == want.tobytes()


def special_accumulator(G, K, read, after_special: bool, linear: bool):
  """tinygrad's REG accumulator inside SPECIAL threads (its PYTHON and GPU devices): the
  REG buffer is stored 0 by a STORE that does not depend on the thread (or through
  AFTER(reg, gidx0), our compiler's form), summed over RANGE k from in[g*K + k] through
  `read` (an INDEX value, or a LOAD, which makes the loop sequential), then out[g] = acc."""
  b = Builder()
  inp = b.param((G * K,), F32, 0); out = b.param((G,), F32, 1)
  g = b.SPECIAL(idx(b, G), arg={"name": "gidx0"})
  reg = b.buffer((1,), F32, 0, addrspace="REG")
  z = idx(b, 0)
  init = b.STORE(b.INDEX(b.AFTER(reg, g) if after_special else reg, z), b.const(0.0, F32))
  k = b.range(K, 0, "REDUCE")
  acc = b.INDEX(b.AFTER(reg, init, k), z)
  cur = b.LOAD(acc) if read == "load" else acc
  x = b.INDEX(inp, b.ADD(b.MUL(g, idx(b, K)), k))
  end = b.END(b.STORE(acc, b.ADD(cur, x)), k)
  b.SINK(b.STORE(b.INDEX(out, g), b.INDEX(b.AFTER(reg, end), z)))
  return linearized(b) if linear else b.graph()


@pytest.mark.parametrize("read", ["index", "load"])
@pytest.mark.parametrize("after_special", [False, True])
@pytest.mark.parametrize("linear", [False, True])
def test_reg_accumulator_is_private_to_each_thread(read, after_special, linear):
  # regression (issue 14): without AFTER(reg, gidx0) the sequential evaluation shared one
  # REG among the threads and gave [12, 15] for in = 1..6 (decision kernel-loops: REG per thread)
  g = special_accumulator(2, 3, read, after_special, linear)
  got = evaluate(g, {"param0": np.arange(1, 7, dtype=np.float32)}, level="program" if linear else "auto")["param1"]
  assert got.tolist() == [6.0, 15.0]


def test_local_buffer_is_private_to_each_workgroup():
  # a LOCAL buffer written by every lidx of a group, read after the BARRIER, summed in a REG
  # accumulator: each workgroup (gidx) sees its own LOCAL contents
  G, L = 3, 4
  b = Builder()
  out = b.param((G,), F32, 0); inp = b.param((G * L,), F32, 1)
  reg = b.buffer((1,), F32, 0, addrspace="REG"); lb = b.buffer((L,), F32, 1, addrspace="LOCAL")
  g = b.SPECIAL(idx(b, G), arg={"name": "gidx0"}); l = b.SPECIAL(idx(b, L), arg={"name": "lidx0"})
  bar = b.BARRIER(b.STORE(b.INDEX(lb, l), b.LOAD(b.INDEX(inp, b.ADD(b.MUL(g, idx(b, L)), l)))))
  z = idx(b, 0)
  init = b.STORE(b.INDEX(reg, z), b.const(0.0, F32))
  k = b.range(L, 0, "REDUCE")
  acc = b.INDEX(b.AFTER(reg, init, k), z)
  end = b.END(b.STORE(acc, b.ADD(b.LOAD(acc), b.LOAD(b.INDEX(b.AFTER(lb, bar), k)))), k)
  b.SINK(b.STORE(b.INDEX(out, g), b.INDEX(b.AFTER(reg, end), z), b.CMPEQ(l, z)))
  x = rng.standard_normal(G * L).astype(np.float32)
  want = np.zeros(G, np.float32)
  for kk in range(L): want = want + x.reshape(G, L)[:, kk]
  got = evaluate(b.graph(), {"param1": x})["param0"]
  assert got.tobytes() == want.tobytes()
