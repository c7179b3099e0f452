"""Minimal graphs of five classes of unsound programs in what the compiler's newest
optimizations added (padded outputs, padded inputs, contraction, arguments that share
memory), each a function returning (graph, inputs): a compiled backend must give the
reference evaluator's result bit for bit (the float data is small integers, so every sum
is exact in any order), touching no memory it does not own. Shared by
tests/compiler/test_compiler_aliasing_padding.py and its AddressSanitizer child.

  1. padded_store  a reduce kernel storing under a gate to part of its output (one row of
                   4x10, a bounds-checked uint8 scatter into 10 elements; also as the body
                   of a tensor CALL): what it does not store keeps its contents
  2. gather_pad    a gemm of x[idx] (idx of any integer dtype): padding is sized by the
                   loops, not by the range of idx's dtype
  3. contract      (a*b).sum() where a product overflows and an operand is infinite: the
                   reference's NaN, not the -inf a fused multiply-add gives
  4. alias         CALL(kernel, b, b) and overlapping views: the kernel reads the
                   arguments as they were at the call, and the last written slot wins
  5. view_store    a STORE through a BUFFER_VIEW of an input: the buffer changes, as the
                   graph's root and for a read after it (also of a view of all of it)
"""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.build import Builder


def padded_row(through_call: bool = False):
  """out[1, n] = sum_k x[n, k] for n < 10, stored under the gate n < 10: rows 0, 2 and 3
  of the 4x10 output are not stored and keep their 7s."""
  b = Builder()
  x = b.param((10, 8), "float32", 1); out = b.param((4, 10), "float32", 0)
  n = b.range(10, 0); k = b.range(8, 1, type="REDUCE")
  red = b.REDUCE(b.INDEX(x, n, k), k, arg={"op": "ADD"})
  kern = b.SINK(b.END(b.STORE(b.INDEX(out, b.const(1, "index"), n), red, b.CMPLT(n, b.const(10, "index"))), n))
  xs, o = np.arange(80, dtype=np.float32).reshape(10, 8), np.full((4, 10), 7, np.float32)
  if not through_call: return b.graph(), {"param1": xs, "param0": o}
  O = b.buffer((4, 10), "float32", 0); X = b.buffer((10, 8), "float32", 1)
  return b.graph([b.SINK(b.CALL(kern, O, X))]), {"buf0": o, "buf1": xs}


def padded_scatter():
  """out[idx[r]] = sum_k x[r, k] where idx[r] < 10 (idx uint8: 200 and 255 are dropped);
  the elements no idx names keep their 7s."""
  b = Builder()
  idx = b.param((6,), "uint8", 1); x = b.param((6, 8), "float32", 2); out = b.param((10,), "float32", 0)
  r = b.range(6, 0); k = b.range(8, 1, type="REDUCE")
  red = b.REDUCE(b.INDEX(x, r, k), k, arg={"op": "ADD"})
  i = b.CAST(b.INDEX(idx, r), arg="index")
  b.SINK(b.END(b.STORE(b.INDEX(out, i), red, b.CMPLT(i, b.const(10, "index"))), r))
  return b.graph(), {"param1": np.array([0, 3, 200, 9, 10, 255], np.uint8), "param2": np.arange(48, dtype=np.float32).reshape(6, 8),
                     "param0": np.full(10, 7, np.float32)}


def gather_gemm(dt: str, M: int = 33, K: int = 64, N: int = 50, rows: int = 40):
  """(x[idx]) @ w, idx of dtype dt with indices past x's rows too (they read zeros)."""
  b = Builder()
  X = b.buffer((rows, K), "float32", 0); I = b.buffer((M,), dt, 1); W = b.buffer((K, N), "float32", 2)
  a = b.add("EXPAND", b.add("RESHAPE", b.INDEX(X, I), b.shape(M, K, 1)), b.shape(M, K, N))
  w = b.add("EXPAND", b.add("RESHAPE", W, b.shape(1, K, N)), b.shape(M, K, N))
  s = b.add("REDUCE", b.MUL(a, w), arg={"op": "ADD", "axes": [1]})
  rng = np.random.default_rng(3)
  return b.graph([s]), {"buf0": rng.integers(-4, 5, (rows, K)).astype(np.float32), "buf1": rng.integers(0, rows + 3, M).astype(dt),
                        "buf2": rng.integers(-4, 5, (K, N)).astype(np.float32)}


def contract(rows: bool = False):
  """sum of a*b: 1e30 * 1e10 overflows to inf and -inf + inf is NaN (a fused 1e40 would
  leave -inf); also as rows of a gemm."""
  from tinyspec.tensor import Tensor
  if not rows:
    t = (Tensor(np.array([-np.inf, 1e30, 3.0, 1.7e38], np.float32)) * Tensor(np.array([1.0, 1e10, 2.0, 10.0], np.float32))).sum()
    return t.graph(), t.inputs()
  rng = np.random.default_rng(1)
  a = rng.integers(-3, 4, (16, 64)).astype(np.float32); w = rng.integers(-3, 4, (64, 16)).astype(np.float32)
  a[3, 5], w[5, :], a[3, 7], w[7, :] = 1e30, 1e10, -np.inf, 1.0
  a[5, 0], w[0, 2], a[5, 1] = np.inf, 1.7e38, -1.7e38
  t = (Tensor(a).reshape(16, 64, 1) * Tensor(w).reshape(1, 64, 16)).sum(1)
  return t.graph(), t.inputs()


def _reverse(b, n: int):
  """A kernel: p0[i] = p1[n - 1 - i]."""
  p0 = b.param((n,), "int32", 0); p1 = b.param((n,), "int32", 1)
  r = b.range(n, 0)
  return b.SINK(b.END(b.STORE(b.INDEX(p0, r), b.INDEX(p1, b.SUB(b.const(n - 1, "index"), r))), r))


def alias(form: str = "same"):
  """same: CALL(reverse, B, B) reverses B (not a palindrome); views: CALL(reverse, B[0:4],
  B[2:6]); writers: a kernel storing p0[i] = i and p1[i] = p1[i + 3] + 10 (i < 3), both
  bound to B: p1's contents are written back last."""
  b = Builder()
  B = b.buffer((6,), "int32", 0)
  inputs = {"buf0": np.arange(6, dtype=np.int32) * 7}
  if form == "same": return b.graph([b.SINK(b.CALL(_reverse(b, 6), B, B))]), inputs
  if form == "views":
    k = _reverse(b, 4)
    v0 = b.BUFFER_VIEW(B, arg={"size": 4, "dtype": "int32", "offset": 0})
    v1 = b.BUFFER_VIEW(B, arg={"size": 4, "dtype": "int32", "offset": 8})
    return b.graph([b.SINK(b.CALL(k, v0, v1))]), inputs
  p0 = b.param((6,), "int32", 0); p1 = b.param((6,), "int32", 1)
  r, r2 = b.range(6, 0), b.range(3, 1)
  s0 = b.END(b.STORE(b.INDEX(p0, r), b.CAST(r, arg="int32")), r)
  s1 = b.END(b.STORE(b.INDEX(p1, r2), b.ADD(b.INDEX(p1, b.ADD(r2, b.const(3, "index"))), b.const(10, "int32"))), r2)
  return b.graph([b.SINK(b.CALL(b.SINK(s0, s1), B, B))]), inputs


def view_store(form: str = "root"):
  """root: STORE(B[2:6], x + x) is the root (B is the output); read: B read after it;
  overlap: STORE(B[2:6], B[1:5] + 100), the read overlapping what is written; whole: a
  view of all of B stored, then B read (two kernels of one shape: they may not merge)."""
  b = Builder()
  B = b.buffer((8,), "int32", 0)
  V = b.BUFFER_VIEW(B, arg={"size": 8, "dtype": "int32", "offset": 0} if form == "whole" else {"size": 4, "dtype": "int32", "offset": 8})
  inputs = {"buf0": np.arange(8, dtype=np.int32)}
  if form == "overlap":
    R = b.BUFFER_VIEW(B, arg={"size": 4, "dtype": "int32", "offset": 4})
    hundred = b.add("EXPAND", b.add("RESHAPE", b.const(100, "int32"), b.shape(1)), b.shape(4))
    return b.graph([b.STORE(V, b.ADD(R, hundred))]), inputs
  n = 8 if form == "whole" else 4
  X = b.buffer((n,), "int32", 1)
  inputs["buf1"] = np.arange(n, dtype=np.int32) - 3
  st = b.STORE(V, b.ADD(X, X))
  if form == "root": return b.graph([st]), inputs
  after = b.AFTER(B, st)
  return b.graph([b.ADD(after, after)]), inputs


CASES = {
  "padded-row": padded_row, "padded-row-call": lambda: padded_row(True), "padded-scatter": padded_scatter,
  **{f"gather-pad-{dt}": (lambda dt=dt: gather_gemm(dt)) for dt in ("uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")},
  "contract": contract, "contract-rows": lambda: contract(True),
  "alias-same": alias, "alias-views": lambda: alias("views"), "alias-writers": lambda: alias("writers"),
  "view-store-root": view_store, "view-store-read": lambda: view_store("read"), "view-store-overlap": lambda: view_store("overlap"),
  "view-store-whole": lambda: view_store("whole"),
}


def _int_rows(n: int):
  from tinyspec.tensor import Tensor
  x = Tensor((np.arange(6 * n).reshape(6, n) % 17 - 8).astype(np.int32))
  t = x - x.sum(1, keepdim=True)
  return t.graph(), t.inputs()


def _softmax_rows(n: int):
  from tinyspec.tensor import Tensor
  x = Tensor(np.random.default_rng(n).standard_normal((4, n)).astype(np.float32) * 4)
  e = (x - x.max(1, keepdim=True)).exp()
  t = e / e.sum(1, keepdim=True)
  return t.graph(), t.inputs()


def _gemm13():
  from tinyspec.tensor import Tensor
  rng = np.random.default_rng(13)
  a, w = Tensor(rng.integers(-4, 5, (13, 64)).astype(np.float32)), Tensor(rng.integers(-4, 5, (64, 64)).astype(np.float32))
  t = (a.reshape(13, 64, 1) * w.reshape(1, 64, 64)).sum(1)
  return t.graph(), t.inputs()


# the GPU tables' own (name -> (make, ulps allowed)): work-groups of 2^k + 1 items whose tree
# combine must not race, and a gemm whose 13 rows find no register tile
GPU_CASES = {"rows-int-129": (lambda: _int_rows(129), 0), "rows-int-258": (lambda: _int_rows(258), 0),
             "softmax-258": (lambda: _softmax_rows(258), 64), "gemm-13x64x64": (_gemm13, 0)}


def agree(name: str, target: str) -> str | None:
  """None when the compiled run of case `name` gives the reference's outputs bit for bit
  (NaNs alike), else what differs."""
  from tinyspec.refimpl import evaluate
  from tinyspec.compiler import compile_graph
  from tinyspec.compiler.check import compare_outputs
  g, inputs = CASES[name]()
  want = evaluate(g, inputs)
  got = compile_graph(g, target, keep_stages=False).run(inputs)
  bad = compare_outputs(got, want)
  return f"{bad}" if bad else None
