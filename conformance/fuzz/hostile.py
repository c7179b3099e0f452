"""Graphs a hostile user would write, for the sanitizer fuzzer (conformance/fuzz/sanitize.py).

Each family is a Hypothesis strategy of `Example`s (a graph, its inputs, and OptOps to
try), dense in what breaks compilers: edge values (MIN, MAX, -1, 0, 1, powers of two;
NaN, +-inf, subnormals for floats: conformance/corpus/values.py), narrow integer dtypes,
nested ops whose rewrites must respect wrapping, data-dependent indices, sizes at and
beyond their bounds, axis types and OptOps that ask for parallelism:

  chain    a gather or scatter through an integer chain of data (IDIV, MOD, ADD, MUL,
           shifts, MAX, casts; an op often repeated with a new constant: the simplifier's
           nested rules fire there) in a narrow dtype (tensor level)
  gated    a kernel reading or storing through x*k + c under a gate that bounds x
           (x >= c, x < c), buffers as long as the dtype's range so the bound proves
           the access (kernel level)
  sizes    a symbolic size bounding a loop and offsetting an index, given a value at,
           inside or beyond its bounds, directly, through a CALL whose outer PARAM is
           wider, or as a CONST argument
  axes     a loop typed THREAD, GLOBAL, LOCAL, UPCAST or LOOP (or a SPECIAL) whose
           stores may collide (out[r % m], out[0]) and read what they write
  padded   a reduce kernel storing under a gate to all or part of its output (one row,
           every other row, past an offset, a scatter through an index of a narrow
           dtype), its output axes padded (PADTO): a padded copy may store only what the
           kernel stores; also as the body of a tensor CALL
  gather   a gemm of x[idx], idx of any integer dtype and edge values (out of range,
           negative), sizes the tile pads: padding is sized by the loops, not by idx
  contract (a*b).sum over rows whose products overflow when rounded (2^64 * 2^64 in
           float32), meet -2^127 or an infinity, or are NaN, among small exact ones, and
           rows of bounded operands (narrow integers converted) or of operands read
           from integer or bool buffers of any width (int64's extremes round when
           converted; the guard scans only float buffers): a fused multiply-add
           may not change which results are NaN or infinite; in float data the hazards
           lie anywhere in the buffers (a launch-time scan must see every element), or
           the data are scaled to where the guard of the fused kernel decides narrowly
  alias    a CALL passing one buffer, or overlapping views of it, to several slots of a
           kernel that reads and writes them; a STORE through a view of a buffer, read
           after it or reading the buffer itself
  drawn    any graph of conformance/fuzz/graphs.py (tensor or kernel level)
Every family also draws OptOps (SPLIT into any AxisType, PADTO, SWAP) that the fuzzer's
child applies where they are legal.
"""
from __future__ import annotations
import math
from dataclasses import dataclass, field
import numpy as np
from hypothesis import strategies as st
from tinyspec.dispatch import Registry, input_name
from tinyspec.dtypes import DTYPES
from tinyspec.graph import Graph
from tinyspec.refimpl.build import Builder
from tinyspec.conformance.corpus import values as V
from tinyspec.tensor import Tensor
from tinyspec.backends import get_backend, capabilities_of
from tinyspec.conformance.fuzz.driver import backend_strategy

NARROW = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "index"]
SIGNED_NARROW = ["int8", "int16"]
INTEGER_SOURCES = [n for n, d in DTYPES.items() if (d.is_int or d.cls == "bool") and n != "index"]   # (index: no buffers of it)
FAMILY = Registry("hostile family", ops=False)   # name -> a function giving the strategy of its examples
# every family, in the order that seeds each one's search (sanitize.fuzz_sanitized: a family's seed is its place here)
FAMILIES = ("chain", "gated", "sizes", "axes", "padded", "gather", "contract", "alias", "drawn")


@dataclass
class Example:
  family: str
  graph: Graph
  inputs: dict = field(default_factory=dict)
  opts: list = field(default_factory=list)     # OptOps to apply where legal (each kernel: the longest legal prefix)
  drawn: object = None                         # the strategies.Drawn of the `drawn` family (its per-node check)

  def describe(self) -> str:
    return f"{self.family} graph" + (f", OptOps {self.opts}" if self.opts else "")


# ------------------------------------------------------------------ values
def named(b: Builder, i: int) -> str:
  """The input name of node i (a BUFFER or PARAM the builder made): what its array is passed as."""
  n = b.nodes[i]
  return input_name(n.op, n.arg)


def edge_array(draw, dt: str, n: int) -> np.ndarray:
  """n values of dt: its edge values first (shuffled), then random ones."""
  d = DTYPES[dt]
  edges = list(V.edge_values(dt))
  if d.cls not in ("bool", "float"):
    edges += [v for k in range(0, d.bits - 1, 3) for v in (1 << k, -(1 << k)) if d.min <= v <= d.max]
  vals = draw(st.permutations(edges))[:n]
  if len(vals) < n:
    more = st.integers(int(d.min), int(d.max)) if d.is_int else st.sampled_from(edges)
    vals = list(vals) + draw(st.lists(more, min_size=n - len(vals), max_size=n - len(vals)))
  return V.as_array(vals, dt)


def constant(draw, dt: str, large: bool = False) -> int:
  """An edge or small constant of dt; `large`: a positive one whose square overflows dt (an
  op repeated with two of them folds into a constant the dtype cannot hold)."""
  d = DTYPES[dt]
  pool = [v for v in (0, 1, -1, 2, 3, 7, 10, 16, 100, 127, 128, 255, 1000, 10000, d.max, d.min, d.bits, d.bits - 1) if d.min <= v <= d.max]
  big = [v for v in pool if v > 0 and v * v > d.max]
  if large and big: return draw(st.one_of(st.sampled_from(big), st.integers(int(d.max ** 0.5) + 1, int(d.max))))
  return draw(st.one_of(st.sampled_from(pool), st.integers(int(max(d.min, -300)), int(min(d.max, 300)))))


def optops(draw) -> list:
  """A few OptOps over small axis numbers; the child keeps each kernel's legal prefix."""
  kinds = ["THREAD", "GLOBAL", "LOCAL", "UPCAST", "UNROLL", "GROUP_REDUCE", "LOOP"]
  one = st.one_of(
    st.tuples(st.just("SPLIT"), st.integers(0, 2), st.tuples(st.sampled_from([2, 3, 4, 8]), st.sampled_from(kinds))),
    st.tuples(st.just("PADTO"), st.integers(0, 2), st.sampled_from([4, 8, 16])),
    st.tuples(st.just("SWAP"), st.integers(0, 2), st.integers(0, 2)))
  return [list(o) for o in draw(st.lists(one, max_size=3))]


# ------------------------------------------------------------------ families
CHAIN_OPS = ["IDIV", "IDIV", "MOD", "ADD", "MUL", "SUB", "SHL", "SHR", "MAX", "NEG", "AND", "CAST"]
NESTED = ["IDIV", "IDIV", "MUL", "ADD", "SHL", "SHR", "MOD"]     # ops whose pairs the simplifier folds


@FAMILY.register("chain")
@st.composite
def chain(draw) -> Example:
  dt = draw(st.sampled_from(NARROW[:6] + ["int8", "int8", "int16"]))
  n = draw(st.integers(8, 48))
  b = Builder()
  x = b.buffer((n,), dt, 0)
  inputs = {named(b, x): edge_array(draw, dt, n)}
  v, cur = x, dt
  # half the chains open with an op applied twice (the simplifier's nested rules fold the pair)
  last = draw(st.sampled_from(NESTED)) if draw(st.booleans()) else None
  if last is not None: v = b.add(last, v, b.const(constant(draw, cur, large=True), cur))
  for step in range(draw(st.integers(1, 4))):
    repeated = last is not None and (step == 0 or draw(st.booleans()))
    op = last if repeated else draw(st.sampled_from(CHAIN_OPS))
    last = op
    if op == "NEG": v = b.NEG(v); continue
    if op == "CAST":
      cur = draw(st.sampled_from(NARROW)); v = b.CAST(v, arg=cur); continue
    c = constant(draw, cur, large=repeated)
    v = b.add(op, v, b.const(c, cur))
  m = draw(st.integers(1, 12))
  i = b.ADD(v, b.const(draw(st.sampled_from([0, 1, 2, -1])) if DTYPES[cur].cls != "uint" else 1, cur))
  if draw(st.booleans()):
    src = b.buffer((m,), "float32", 1)
    inputs[named(b, src)] = np.arange(1, m + 1, dtype=np.float32)
    g = b.graph([b.INDEX(src, i)])
  else:
    dst = b.buffer((m,), "int32", 1)
    inputs[named(b, dst)] = np.full(m, -7, np.int32)
    g = b.graph([b.SINK(b.STORE(b.INDEX(dst, i), b.CAST(x, arg="int32")))])
  return Example("chain", g, inputs, optops(draw))


@FAMILY.register("gated")
@st.composite
def gated(draw) -> Example:
  dt = draw(st.sampled_from(SIGNED_NARROW * 3 + ["uint8", "int32"]))
  d = DTYPES[dt]
  n = draw(st.integers(16, 64))
  size = int(min(d.max, 40000)) + 1 + draw(st.integers(0, 8))
  b = Builder()
  x = b.param((n,), dt, 0)
  r = b.range(n, 0)
  xv = b.INDEX(x, r)
  clauses = []
  for _ in range(draw(st.integers(1, 2))):
    lt = b.CMPLT(xv, b.const(constant(draw, dt), dt))
    clauses.append(b.CMPNE(lt, b.const(True, "bool")) if draw(st.integers(0, 9)) < 7 else lt)   # mostly x >= c
  gate = clauses[0] if len(clauses) == 1 else b.AND(clauses[0], clauses[1])
  k = draw(st.sampled_from([1, 1, 1, 2, -1]))
  j = xv if k == 1 else b.MUL(xv, b.const(k if d.min <= k else 1, dt))
  j = b.ADD(j, b.const(draw(st.sampled_from([1, 2, 3, 0, -1])) if d.cls != "uint" else 1, dt))
  inputs = {named(b, x): edge_array(draw, dt, n)}
  if draw(st.booleans()):
    src = b.param((size,), "float32", 1); out = b.param((n,), "float32", 2)
    v = b.LOAD(b.INDEX(src, j), b.const(-1.0, "float32"), gate)
    b.SINK(b.END(b.STORE(b.INDEX(out, r), v), r))
    inputs[named(b, src)] = np.arange(size, dtype=np.float32) + 0.5
  else:
    dst = b.param((size,), "float32", 1)
    b.SINK(b.END(b.STORE(b.INDEX(dst, j), b.const(7.0, "float32"), gate), r))
    inputs[named(b, dst)] = np.zeros(size, np.float32)
  return Example("gated", b.graph(), inputs, optops(draw))


@FAMILY.register("sizes")
@st.composite
def sizes(draw) -> Example:
  """out[i] = x[i + off] * 2 for i < n; n a symbolic size in [lo, hi]."""
  lo = draw(st.sampled_from([0, 1, 1, 2]))
  hi = lo + draw(st.integers(0, 6))
  n_buf = hi + draw(st.integers(0, 3))
  if n_buf == 0: n_buf = 1
  value = draw(st.one_of(st.sampled_from([lo, hi, (lo + hi) // 2]), st.sampled_from([lo - 1, hi + 1, 10 ** 8, -1, 2 ** 31, hi * 1000 + 7])))
  how = draw(st.sampled_from(["kernel", "call", "const"]))
  # through a CALL the factor may be a ()-shaped buffer PARAM given a CONST: read through memory, not by value
  by_buffer = how != "kernel" and draw(st.booleans())
  b = Builder()
  kx = b.param((n_buf,), "int32", 0); ko = b.param((n_buf,), "int32", 1)
  kn = b.param((), "index", 2, bounds=(lo, hi))
  factor = b.param((), "int32", 3) if by_buffer else b.const(2, "int32")
  i = b.range(bound=kn, id=0)
  idx = i if draw(st.booleans()) else b.ADD(i, b.SUB(b.const(n_buf, "index"), kn))   # reads the tail: x[i + (N - n)]
  k = b.SINK(b.END(b.STORE(b.INDEX(ko, i), b.MUL(b.INDEX(kx, idx), factor)), i))
  xs = np.arange(1, n_buf + 1, dtype=np.int32)
  if how == "kernel": return Example("sizes", b.graph(), {named(b, kx): xs, named(b, kn): value}, optops(draw))
  X = b.buffer((n_buf,), "int32", 0); O = b.buffer((n_buf,), "int32", 1)
  extra = (b.const(2, "int32"),) if by_buffer else ()
  if how == "const":
    arg = b.const(value, "index")
    return Example("sizes", b.graph([b.SINK(b.CALL(k, X, O, arg, *extra))]), {named(b, X): xs}, optops(draw))
  n = b.param((), "index", 0, name="n", bounds=(min(lo, 0), 10 ** 9))
  return Example("sizes", b.graph([b.SINK(b.CALL(k, X, O, n, *extra))]), {named(b, X): xs, named(b, n): value}, optops(draw))


@FAMILY.register("axes")
@st.composite
def axes(draw) -> Example:
  """Stores whose iterations may collide, under a parallel axis type (or work items)."""
  n = draw(st.sampled_from([4, 8, 16, 64, 256]))
  m = draw(st.sampled_from([1, 2, 3, n]))
  b = Builder()
  x = b.param((n,), "int32", 0); out = b.param((n,), "int32", 1)
  special = draw(st.integers(0, 5)) == 0
  r = b.add("SPECIAL", b.const(n, "index"), arg={"name": "gidx0"}) if special else \
      b.range(n, 0, type=draw(st.sampled_from(["THREAD", "THREAD", "THREAD", "GLOBAL", "LOCAL", "UPCAST", "LOOP"])))
  def place(kind):
    if kind == "r": return r
    if kind == "mod": return b.MOD(r, b.const(m, "index"))
    if kind == "rev": return b.SUB(b.const(n - 1, "index"), r)
    return b.AND(r, b.const(0, "index"))   # element 0, not folded
  dst = place(draw(st.sampled_from(["r", "mod", "zero", "rev"])))
  val = b.INDEX(x, r)
  if draw(st.booleans()): val = b.ADD(val, b.INDEX(out, place(draw(st.sampled_from(["r", "mod", "zero", "rev"])))))
  st1 = b.STORE(b.INDEX(out, dst), val)
  body = st1 if special else b.END(st1, r)
  inputs = {named(b, x): np.arange(n, dtype=np.int32) * 3 + 1, named(b, out): np.arange(n, dtype=np.int32) * -5}
  return Example("axes", b.graph([b.SINK(body)]), inputs, optops(draw))


def padding_opts(draw, axes: int) -> list:
  """PADTO on some of the first `axes` axes (to multiples the sizes rarely divide), then
  the usual OptOps."""
  pads = [["PADTO", a, draw(st.sampled_from([4, 8, 16]))] for a in range(axes) if draw(st.integers(0, 3))]
  return draw(st.permutations(pads)) + optops(draw)


@FAMILY.register("padded")
@st.composite
def padded(draw) -> Example:
  """out[row(r), c] = sum_k x[r, c, k] under a gate that bounds the row; the rows a form
  does not reach keep out's earlier contents (-7)."""
  R, C, K = draw(st.integers(2, 9)), draw(st.integers(2, 13)), draw(st.integers(1, 6))
  form = draw(st.sampled_from(["all", "row", "even", "offset", "scatter"]))
  b = Builder()
  out = b.param((R, C), "float32", 0); x = b.param((R, C, K), "float32", 1)
  r, c, k = b.range(R, 0), b.range(C, 1), b.range(K, 2, type="REDUCE")
  red = b.REDUCE(b.INDEX(x, r, c, k), k, arg={"op": "ADD"})
  inputs = {named(b, out): np.full((R, C), -7, np.float32), named(b, x): np.arange(R * C * K, dtype=np.float32).reshape(R, C, K) % 13 - 6}
  if form == "all": row = r
  elif form == "row": row = b.const(draw(st.integers(0, R - 1)), "index")
  elif form == "even": row = b.MUL(r, b.const(2, "index"))
  elif form == "offset": row = b.ADD(r, b.const(draw(st.integers(1, 2)), "index"))
  else:
    dt = draw(st.sampled_from(NARROW))
    idx = b.param((R,), dt, 2)
    inputs[named(b, idx)] = edge_array(draw, dt, R)
    row = b.CAST(b.INDEX(idx, r), arg="index")
  gate = b.CMPLT(row, b.const(R, "index"))
  if form == "scatter": gate = b.AND(b.CMPNE(b.CMPLT(row, b.const(0, "index")), b.const(True, "bool")), gate)
  kern = b.SINK(b.END(b.STORE(b.INDEX(out, row, c), red, gate), r, c))
  if draw(st.integers(0, 3)) == 0 and form != "scatter":   # the kernel as the body of a tensor CALL
    O, X = b.buffer((R, C), "float32", 0), b.buffer((R, C, K), "float32", 1)
    return Example("padded", b.graph([b.SINK(b.CALL(kern, O, X))]), {named(b, O): inputs[named(b, out)], named(b, X): inputs[named(b, x)]},
                   padding_opts(draw, 2))
  return Example("padded", b.graph(), inputs, padding_opts(draw, 2))


@FAMILY.register("gather")
@st.composite
def gather(draw) -> Example:
  """(x[idx]) @ w: idx of any integer dtype, edge values (past x's rows or negative: zeros)."""
  M, K, N, rows = draw(st.integers(2, 13)), draw(st.integers(1, 9)), draw(st.integers(2, 13)), draw(st.integers(1, 8))
  dt = draw(st.sampled_from(NARROW + ["uint64", "uint32", "uint32", "uint16"]))    # (unsigned ones reach far past x's rows)
  b = Builder()
  X, I, W = b.buffer((rows, K), "float32", 0), b.buffer((M,), dt, 1), b.buffer((K, N), "float32", 2)
  a = b.add("EXPAND", b.add("RESHAPE", b.INDEX(X, I), b.shape(M, K, 1)), b.shape(M, K, N))
  w = b.add("EXPAND", b.add("RESHAPE", W, b.shape(1, K, N)), b.shape(M, K, N))
  s = b.add("REDUCE", b.MUL(a, w), arg={"op": "ADD", "axes": [1]})
  idx = np.where(np.arange(M) % 2 == 0, np.arange(M) % rows, 0).astype(np.int64)   # half in range, half edge values
  edges = V.edge_dense(dt, M, np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1))))   # (one draw: a cheap example to make)
  inputs = {named(b, X): (np.arange(rows * K) % 7 - 3).astype(np.float32).reshape(rows, K),
            named(b, I): np.where(np.arange(M) % 2 == 0, idx.astype(edges.dtype), edges),
            named(b, W): (np.arange(K * N) % 5 - 2).astype(np.float32).reshape(K, N)}
  return Example("gather", b.graph([s]), inputs, [["PADTO", 0, draw(st.sampled_from([8, 16]))]] + padding_opts(draw, 2))


@FAMILY.register("contract")
@st.composite
def contract(draw) -> Example:
  """Rows of (a*b).sum(1): small exact products, and per row perhaps one product that
  overflows when rounded, one of -max/2 (whose sum with it a fused step keeps finite), an
  infinity or a NaN (the reference's class is the same in any order of the sum). Or a
  gemm whose only hazard is one pair of elements, anywhere (the last element of a buffer
  too: what a scan's vector body leaves), or whose data are scaled so that the largest
  product times K is near the dtype's largest value (every partial sum exact and finite,
  in any order): the launch-time guard decides, either way."""
  dt = draw(st.sampled_from(["float32", "float32", "float64"]))
  M, K, N = draw(st.integers(1, 6)), draw(st.integers(2, 12)), draw(st.integers(1, 6))
  half = 2.0 ** (2 ** (DTYPES[dt].exponent - 2))     # 2^64 for float32: its square overflows, its square / 2 does not
  a = (np.arange(M * K) % 7 - 3).astype(np.float64).reshape(M, K)
  w = (np.arange(K * N) % 5 - 2).astype(np.float64).reshape(K, N)
  rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))     # (one draw: a cheap example to make)
  form = draw(st.sampled_from(["rows", "rows", "one pair", "scaled"]))
  own = np.zeros((M, K), bool)     # (m, j): row m put its own hazard in column j
  if form == "one pair":     # -max/2 then a product that overflows only when rounded: finite fused, inf twice
    m, j = int(rng.integers(0, M)), int(rng.choice([K - 1, int(rng.integers(0, K))]))
    a[m, :] = 0.0
    own[m, [(j - 1) % K, j]] = True
    a[m, (j - 1) % K], w[(j - 1) % K, :] = -half / 2, half
    a[m, j], w[j, :] = half, half
    if rng.integers(0, 2): a, w = -a, w     # (either sign)
  elif form == "scaled":     # the largest product x K at most the largest value (exact sums, finite in any order), up to 16x less
    top = np.abs(a).max() * np.abs(w).max() * K
    e = int(np.log2(DTYPES[dt].normal_range[1] / top)) - int(rng.integers(0, 5))
    a, w = a * 2.0 ** (e // 2), w * 2.0 ** (e - e // 2)
  for m in range(M if form == "rows" else 0):
    what = rng.choice(["overflow", "halfmax", "inf", "-inf", "nan"], rng.integers(0, 4), replace=False)
    for j, kind in zip(rng.permutation(K), what):
      if kind == "overflow": a[m, j], w[j, :] = half * rng.choice([1, -1]), half
      elif kind == "halfmax": a[m, j], w[j, :] = -half / 2, half * rng.choice([1, -1])
      else: a[m, j] = float(kind)
      own[m, j] = kind in ("overflow", "halfmax")
  # other rows read 0 where w holds a hazard: their small products never meet large ones that cancel (then the order of the sum would matter)
  a[:, own.any(0)] = np.where(own[:, own.any(0)], a[:, own.any(0)], 0.0)
  sources = draw(st.sampled_from(["float", "float", "float", "bounded", "integer"]))
  if sources == "bounded":     # operands of bounded intervals: the fused path runs
    src = draw(st.sampled_from(["int8", "int16"]))
    a, w = (np.clip(np.nan_to_num(v), -100, 100).astype(src) for v in (a, w))
    t = (Tensor(a).cast(dt).reshape(M, K, 1) * Tensor(w).cast(dt).reshape(1, K, N)).sum(1)
  elif sources == "integer":   # one operand or both read from a buffer of any integer dtype or bool
    x, y = integer_operands(draw, rng, dt, M, K, N)
    t = (x * y if draw(st.booleans()) else y * x).sum(1)
  else:
    t = (Tensor(a.astype(dt)).reshape(M, K, 1) * Tensor(w.astype(dt)).reshape(1, K, N)).sum(1)
  return Example("contract", t.graph(), t.inputs(), optops(draw))


def integer_operands(draw, rng, dt: str, M: int, K: int, N: int) -> tuple:
  """The operands of the contract family's integer form, converted to dt: x (M, K, 1) read
  from a buffer of any integer dtype or bool, its extremes (int64's round when converted)
  among multiples of 2^(bits-4); y (1, K, N) from another such buffer (small multiples of
  one power of two) or a float one (small integers, infinities, NaNs). Every finite
  product and partial sum is exact and finite in any order, so a fused or reordered sum
  is the reference's bit for bit."""
  def multiples(src: str, n: int, e: int, extremes: bool) -> np.ndarray:
    d = DTYPES[src]
    if d.cls == "bool": return rng.integers(0, 2, n).astype(bool)
    small = rng.integers(-8, 8, n) if d.min < 0 else rng.integers(0, 16, n)
    vals = [int(v) << e for v in small]
    if extremes: vals = [[int(d.min), int(d.max), 0][rng.integers(0, 3)] if rng.random() < 0.3 else v for v in vals]
    return V.as_array(vals, src)
  src = draw(st.sampled_from(INTEGER_SOURCES))
  x = multiples(src, M * K, max(0, DTYPES[src].bits - 4), True).reshape(M, K)
  # y's scale: K x 16 x (x's largest, 2^bits) x (y's largest, 16 x 2^e) stays below dt's largest value
  budget = int(math.log2(DTYPES[dt].normal_range[1])) - DTYPES[src].bits - 10
  if draw(st.booleans()):
    other = draw(st.sampled_from(INTEGER_SOURCES))
    y = Tensor(multiples(other, K * N, max(0, min(DTYPES[other].bits - 4, budget)), False).reshape(K, N)).cast(dt)
  else:
    f = (rng.integers(-2, 3, K * N)).astype(dt)
    f[rng.random(K * N) < 0.1] = rng.choice([np.inf, -np.inf, np.nan])
    y = Tensor(f.reshape(K, N))
  return Tensor(x).cast(dt).reshape(M, K, 1), y.reshape(1, K, N)


def _alias_kernel(b, n: int, form: str):
  """A kernel over PARAMs 0 and 1 of n int32 elements that reads one and writes the other,
  or writes both."""
  p0, p1 = b.param((n,), "int32", 0), b.param((n,), "int32", 1)
  r = b.range(n, 0)
  if form == "reverse": return b.SINK(b.END(b.STORE(b.INDEX(p0, r), b.INDEX(p1, b.SUB(b.const(n - 1, "index"), r))), r))
  if form == "shift": return b.SINK(b.END(b.STORE(b.INDEX(p0, r), b.ADD(b.INDEX(p1, b.MOD(b.ADD(r, b.const(1, "index")), b.const(n, "index"))), b.const(1, "int32"))), r))
  if form == "accumulate": return b.SINK(b.END(b.STORE(b.INDEX(p0, r), b.ADD(b.INDEX(p0, r), b.INDEX(p1, r))), r))
  r2 = b.range(n, 1)
  s0 = b.END(b.STORE(b.INDEX(p0, r), b.CAST(r, arg="int32")), r)
  s1 = b.END(b.STORE(b.INDEX(p1, r2), b.ADD(b.INDEX(p1, b.SUB(b.const(n - 1, "index"), r2)), b.const(10, "int32"))), r2)
  return b.SINK(s0, s1)


@FAMILY.register("alias")
@st.composite
def alias(draw) -> Example:
  """CALL(kernel, u, v) with u and v one buffer, overlapping or disjoint views of it, or
  another buffer; or a STORE through a view of a buffer (the root, or read after)."""
  n = draw(st.integers(2, 9))
  L = n + draw(st.integers(0, 6))
  b = Builder()
  B = b.buffer((L,), "int32", 0)
  inputs = {named(b, B): (np.arange(L, dtype=np.int32) * 7) % 23}
  def view(off): return b.BUFFER_VIEW(B, arg={"size": n, "dtype": "int32", "offset": 4 * off})
  if draw(st.booleans()):
    kern = _alias_kernel(b, n, draw(st.sampled_from(["reverse", "shift", "accumulate", "writers"])))
    args = [B if L == n and draw(st.booleans()) else view(draw(st.integers(0, L - n))) for _ in range(2)]
    return Example("alias", b.graph([b.SINK(b.CALL(kern, *args))]), inputs, optops(draw))
  dst = view(draw(st.integers(0, L - n)))
  src = view(draw(st.integers(0, L - n))) if draw(st.booleans()) else b.buffer((n,), "int32", 1)
  if b.nodes[src].op == "BUFFER": inputs[named(b, src)] = np.arange(n, dtype=np.int32) - 3
  one = b.add("EXPAND", b.add("RESHAPE", b.const(100, "int32"), b.shape(1)), b.shape(n))
  st_ = b.STORE(dst, b.ADD(src, one))
  if draw(st.booleans()): return Example("alias", b.graph([st_]), inputs, optops(draw))
  after = b.AFTER(B, st_)
  return Example("alias", b.graph([b.ADD(after, after)]), inputs, optops(draw))


@FAMILY.register("drawn")
def drawn(max_ops: int = 5):
  caps = capabilities_of(get_backend("c"))
  levels = st.sampled_from(["tensor", "kernel"])
  @st.composite
  def one(draw) -> Example:
    lv = draw(levels)
    d = draw(backend_strategy(caps, lv, max_ops))
    return Example("drawn", d.graph, dict(d.inputs), optops(draw), d)
  return one()


def examples(families=FAMILIES):
  """Examples of the given families, each family equally likely."""
  return st.one_of(*[FAMILY[f]() for f in families])
