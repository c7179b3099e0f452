"""Tensor-level graphs for every op the tables allow at tensor level, against NumPy.

Each case builds a graph and says what NumPy computes for it; a meta-test checks that
the cases together use every tensor-level op of the tables (untrusted ones excepted)."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.tables import tables
from tinyspec.refimpl import evaluate, EvalError
from tinyspec.refimpl.build import Builder

T = tables()
F32 = "float32"
rng = np.random.default_rng(0)
CASES = {}


def case(fn):
  CASES[fn.__name__] = fn
  return fn


def rand(*shape, dtype=np.float32): return rng.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------ sources
@case
def sources():
  b = Builder()
  c = b.const(2.5, F32)
  v = b.vconst([1, -2, 3], "int32")
  raw = b.add("BINARY", arg={"data": "AAH/"})
  x = b.buffer((2, 4), F32, 0, name="x")
  p = b.param((3,), "int32", 1)
  view = b.BUFFER_VIEW(x, arg={"size": 2, "dtype": "uint32", "offset": 8})
  xv = rand(2, 4)
  return b.graph(roots=[c, v, raw, b.ADD(v, p), view]), {"x": xv, "param1": np.array([10, 20, 30], np.int32)}, {
    "out0": np.float32(2.5), "out1": np.array([1, -2, 3], np.int32), "out2": np.array([0, 1, 255], np.uint8),
    "out3": np.array([11, 18, 33], np.int32), "out4": xv.reshape(-1)[2:4].view(np.uint32)}


# ------------------------------------------------------------------ movement
@case
def movement():
  b = Builder()
  x = b.buffer((2, 3, 4), F32, 0)
  xv = rand(2, 3, 4)
  roots = [b.PERMUTE(x, arg=[2, 0, 1]), b.FLIP(x, arg=[True, False, True]), b.RESHAPE(x, b.shape(6, 4)),
           b.EXPAND(b.RESHAPE(b.INDEX(x, b.const(1, "index")), b.shape(1, 3, 4)), b.shape(5, 3, 4)),
           b.PAD(x, b.shape(1, 0, 2), b.shape(4, 3, 7)), b.SHRINK(x, b.shape(1, 1, 0), b.shape(1, 2, 3)),
           b.STACK(x, x, x), b.BITCAST(x, arg="int32")]
  padded = np.zeros((4, 3, 7), np.float32); padded[1:3, :, 2:6] = xv
  return b.graph(roots=roots), {0: xv}, {
    "out0": xv.transpose(2, 0, 1), "out1": xv[::-1, :, ::-1], "out2": xv.reshape(6, 4),
    "out3": np.broadcast_to(xv[1], (5, 3, 4)), "out4": padded, "out5": xv[1:2, 1:3, 0:3], "out6": np.stack([xv] * 3),
    "out7": xv.view(np.int32)}


@case
def index_outer():
  b = Builder()
  x = b.buffer((4, 5, 6), "int32", 0)
  xv = np.arange(120, dtype=np.int32).reshape(4, 5, 6)
  i = b.buffer((3,), "index", 1)
  j = b.const(2, "index")
  k = b.vconst([5, 0, 9], "int64")
  roots = [b.INDEX(x, j), b.INDEX(x, i), b.INDEX(x, i, j), b.INDEX(x, j, i, k), b.INDEX(x, i, k)]
  iv = np.array([3, -1, 0])
  def outer(*idx):
    """Outer indexing written out element by element (out-of-range reads zero)."""
    lists = [np.atleast_1d(a) for a in idx]
    rest = xv.shape[len(idx):]
    out = np.zeros(tuple(len(l) for l in lists) + rest, xv.dtype)
    for pos in np.ndindex(*[len(l) for l in lists]):
      ks = [int(l[p]) for l, p in zip(lists, pos)]
      if all(0 <= k < n for k, n in zip(ks, xv.shape)): out[pos] = xv[tuple(ks)]
    return out.reshape(tuple(len(l) for l, a in zip(lists, idx) if np.ndim(a)) + rest)
  return b.graph(roots=roots), {0: xv, 1: iv}, {
    "out0": xv[2], "out1": outer(iv), "out2": outer(iv, 2), "out3": outer(2, iv, np.array([5, 0, 9])), "out4": outer(iv, np.array([5, 0, 9]))}


# ------------------------------------------------------------------ reduce and elementwise
@case
def reduces():
  b = Builder()
  x = b.buffer((3, 4, 5), F32, 0)
  xi = b.buffer((3, 4), "int16", 1)
  xv, iv = rand(3, 4, 5), rng.integers(-50, 50, (3, 4)).astype(np.int16)
  roots = [b.REDUCE(x, arg={"op": "ADD", "axes": [0, 2]}), b.REDUCE(x, arg={"op": "MAX", "axes": [1]}),
           b.REDUCE(x, arg={"op": "MUL", "axes": [2]}), b.REDUCE(xi, arg={"op": "ADD", "axes": [1]}), b.REDUCE(x, arg={"op": "ADD", "axes": []})]
  return b.graph(roots=roots), {0: xv, 1: iv}, {
    "out0": xv.sum((0, 2), keepdims=True), "out1": xv.max(1, keepdims=True), "out2": xv.prod(2, keepdims=True),
    "out3": iv.sum(1, keepdims=True, dtype=np.int16), "out4": xv}


@case
def elementwise_broadcast():
  b = Builder()
  x = b.buffer((3, 1), F32, 0); y = b.buffer((4,), F32, 1)
  xv, yv = rand(3, 1), rand(4)
  roots = [b.ADD(x, y), b.WHERE(b.CMPLT(x, y), x, y), b.CAST(b.MUL(x, y), arg="float16"), b.MULACC(x, y, x), b.TRUNC(b.MUL(x, y))]
  return b.graph(roots=roots), {0: xv, 1: yv}, {
    "out0": xv + yv, "out1": np.where(xv < yv, xv, yv), "out2": (xv * yv).astype(np.float16), "out3": xv * yv + xv, "out4": np.trunc(xv * yv)}


# NumPy's own function for each elementwise op, on operands where NumPy and the decisions agree
NUMPY = {"ADD": np.add, "MUL": np.multiply, "MAX": np.maximum, "CMPLT": np.less, "CMPNE": np.not_equal, "XOR": np.bitwise_xor,
         "OR": np.bitwise_or, "AND": np.bitwise_and, "IDIV": np.floor_divide, "MOD": np.mod, "SHL": np.left_shift, "SHR": np.right_shift,
         "NEG": np.negative, "SUB": np.subtract, "DIV": np.divide, "CMPGT": np.greater, "CMPGE": np.greater_equal,
         "CMPLE": np.less_equal, "CMPEQ": np.equal, "NOT": np.logical_not, "EXP2": np.exp2, "LOG2": np.log2, "SIN": np.sin,
         "SQRT": np.sqrt, "POW": np.power, "RECIP": np.reciprocal, "TRUNC": np.trunc, "MULACC": lambda a, b, c: a * b + c}


@case
def every_elementwise_op_broadcast():
  """(3,1) op (4,) for every elementwise op of the tables, in int32, float32 or bool."""
  b = Builder()
  roots, want, inputs = [], {}, {}
  ops = [n for n, o in T.ops.items() if o.category in ("elementwise", "decomposed") and n in NUMPY]
  for op in ops:
    dts = T.ops[op].slots[0].allowed()
    dt = "int32" if "int32" in dts else F32 if F32 in dts else "bool"
    npdt = {"int32": np.int32, F32: np.float32, "bool": np.bool_}[dt]
    shapes = [(3, 1), (4,), (3, 4)][:len(T.ops[op].slots)]
    if dt == "bool": vals = [rng.integers(0, 2, sh).astype(bool) for sh in shapes]
    elif dt == "int32": vals = [rng.integers(1, 7, sh).astype(np.int32) for sh in shapes]
    else: vals = [rng.uniform(0.5, 3, sh).astype(np.float32) for sh in shapes]
    srcs = []
    for v in vals:
      k = len(inputs)
      srcs.append(b.buffer(v.shape, dt, k)); inputs[k] = v
    roots.append(b.add(op, *srcs))
    want[f"out{len(roots) - 1}"] = np.asarray(NUMPY[op](*vals)).astype(np.bool_ if op.startswith("CMP") or op == "NOT" else npdt)
  return b.graph(roots=roots), inputs, want


@case
def threefry():
  b = Builder()
  x = b.buffer((2, 1), "uint64", 0); k = b.buffer((3,), "uint64", 1)
  xv = np.array([[0], [0x85a308d3243f6a88]], np.uint64); kv = np.array([0, 0x0370734413198a2e, 7], np.uint64)
  want = np.zeros((2, 3), np.uint64)
  want[0, 0] = 0x99ba4efe6b200159; want[1, 1] = 0x483df7a0c4923a9c
  b.THREEFRY(x, k)
  return b.graph(), {0: xv, 1: kv}, {"out0": want}


@case
def markers():
  b = Builder()
  x = b.buffer((3,), F32, 0)
  xv = rand(3)
  return b.graph(roots=[b.CONTIGUOUS(x), b.DETACH(x), b.CONTIGUOUSBACKWARD(x)]), {0: xv}, {"out0": xv, "out1": xv, "out2": xv}


@case
def gemm_composition():
  b = Builder()
  M, K, N = 5, 7, 3
  A = b.buffer((M, K), F32, 0); B = b.buffer((K, N), F32, 1)
  out = b.REDUCE(b.MUL(b.RESHAPE(A, b.shape(M, K, 1)), b.RESHAPE(B, b.shape(1, K, N))), arg={"op": "ADD", "axes": [1]})
  av, bv = rand(M, K), rand(K, N)
  return b.graph(roots=[out]), {0: av, 1: bv}, {"out0": (av.reshape(M, K, 1) * bv.reshape(1, K, N)).sum(1, keepdims=True)}


# ------------------------------------------------------------------ functions
@case
def functions():
  b = Builder()
  p0 = b.param((3,), F32, 0); p1 = b.param((3,), F32, 1)
  inner_body = b.TUPLE(b.MUL(p0, p0))
  body = b.TUPLE(b.ADD(b.GETTUPLE(b.FUNCTION(inner_body, p1), arg=0), p0), b.SUB(p0, p1))   # nested: p1*p1 + p0
  A = b.buffer((3,), F32, 0); B = b.buffer((3,), F32, 1)
  f = b.FUNCTION(body, A, B)
  c = b.CALL(body, B, A)
  av, bv = rand(3), rand(3)
  return b.graph(roots=[b.GETTUPLE(f, arg=0), b.GETTUPLE(f, arg=1), b.GETTUPLE(c, arg=0), f]), {0: av, 1: bv}, {
    "out0": bv * bv + av, "out1": av - bv, "out2": av * av + bv, "out3.0": bv * bv + av, "out3.1": av - bv}


@case
def call_kernel():
  b = Builder()
  x = b.param((4,), F32, 0); y = b.param((4,), F32, 1)
  i = b.range(4, 0)
  kern = b.SINK(b.END(b.STORE(b.INDEX(y, i), b.ADD(b.INDEX(x, i), b.INDEX(y, i))), i))
  X = b.buffer((4,), F32, 0); Y = b.buffer((4,), F32, 1)
  c = b.CALL(kern, X, Y)
  xv, yv = rand(4), rand(4)
  return b.graph(roots=[b.MUL(b.AFTER(Y, c), b.const(2.0, F32)), c]), {0: xv, 1: yv}, {"out0": (xv + yv) * 2, "buf1": xv + yv}


# ------------------------------------------------------------------ storage
@case
def assign_chain():
  b = Builder()
  A = b.buffer((3,), F32, 0)
  s1 = b.STORE(A, b.ADD(A, b.const(1.0, F32)))
  a1 = b.AFTER(A, s1)
  s2 = b.STORE(a1, b.MUL(a1, b.const(3.0, F32)))
  s3 = b.STORE(b.INDEX(b.AFTER(A, s2), b.const(1, "index")), b.const(-1.0, F32), b.const(True, "bool"))
  s4 = b.STORE(b.INDEX(b.AFTER(A, s3), b.const(2, "index")), b.const(-9.0, F32), b.const(False, "bool"))   # gated off
  B = b.buffer((3,), F32, 1)
  s5 = b.STORE(B, b.AFTER(A, s1))
  av = rand(3)
  want = (av + 1) * 3; want[1] = -1
  return b.graph(roots=[b.GROUP(s4, s5), b.ADD(b.AFTER(A, s4), A)]), {0: av}, {
    "buf0": want, "buf1": av + 1, "out1": want + av}


@case
def store_through_views_and_nested_index():
  b = Builder()
  A = b.buffer((4,), F32, 0)
  s1 = b.STORE(b.BUFFER_VIEW(A, arg={"size": 2, "dtype": "uint32", "offset": 4}), b.vconst([0x3F800000, 0x40000000], "uint32"))
  B = b.buffer((3, 4), "int32", 1)
  s2 = b.STORE(b.INDEX(b.INDEX(B, b.const(1, "index")), b.vconst([3, 0, 7], "index")), b.vconst([5, 6, 7], "int32"))   # 7: dropped
  want_b = np.zeros((3, 4), np.int32); want_b[1, 3], want_b[1, 0] = 5, 6
  return b.graph(roots=[b.SINK(s1, s2)]), {0: np.full(4, 9, np.float32)}, {"buf0": np.array([9, 1, 2, 9], np.float32), "buf1": want_b}


@case
def load_gate_and_device():
  b = Builder()
  x = b.buffer((3,), F32, 0)
  alt = b.buffer((3,), F32, 1)
  xv, av = rand(3), rand(3)
  roots = [b.LOAD(x, arg={"device": "GPU"}), b.LOAD(x, alt, b.const(False, "bool")), b.LOAD(x, alt, b.const(True, "bool"), arg={"addrspace": "GLOBAL"})]
  return b.graph(roots=roots), {0: xv, 1: av}, {"out0": xv, "out1": av, "out2": xv}


# ------------------------------------------------------------------ multi-device (seed 001's collectives)
D = ("GPU:0", "GPU:1", "GPU:2")


@case
def collectives():
  n, s = len(D), 6
  b = Builder()
  t1 = b.buffer((s,), F32, 0)                      # (s,) on one device
  tn = b.buffer((n * s,), F32, 1, device=D)        # (n*s,) sharded, axis 0
  bcast = b.REPLICATED(b.COPY(b.EXPAND(b.RESHAPE(t1, b.shape(1, s)), b.shape(n, s)), arg={"device": list(D)}), arg=[0])
  scatter = b.COPY(t1, arg={"device": list(D)})
  gather = b.COPY(tn, arg={"device": D[0]})
  reduce_ = b.REDUCE(b.RESHAPE(gather, b.shape(n, s)), arg={"op": "ADD", "axes": [0]})
  allgather = b.REPLICATED(b.COPY(b.EXPAND(b.RESHAPE(tn, b.shape(1, n * s)), b.shape(n, n * s)), arg={"device": list(D)}), arg=[0])
  rs = b.RESHAPE(b.REDUCE(b.COPY(b.PERMUTE(b.RESHAPE(tn, b.shape(n, n, s // n)), arg=[1, 0, 2]), arg={"device": list(D)}),
                          arg={"op": "ADD", "axes": [1]}), b.shape(s))
  xv, yv = rand(s), rand(n * s)
  return b.graph(roots=[bcast, scatter, gather, reduce_, allgather, rs]), {0: xv, 1: yv}, {
    "out0": xv.reshape(1, s), "out1": xv, "out2": yv, "out3": yv.reshape(n, s).sum(0, keepdims=True),
    "out4": yv.reshape(1, n * s), "out5": yv.reshape(n, n, s // n).transpose(1, 0, 2).sum(1).reshape(s)}


# ------------------------------------------------------------------ running the cases
def closeness(got, want, mask=None):
  want = np.asarray(want)
  assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
  if want.dtype.kind == "f": np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
  elif mask is not None: np.testing.assert_array_equal(got[mask], want[mask])
  else: np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", list(CASES))
def test_case(name):
  g, inputs, want = CASES[name]()
  out = evaluate(g, inputs)
  assert set(out) == set(want), (sorted(out), sorted(want))
  for k, w in want.items():
    mask = (w != 0) if name == "threefry" else None   # only the known-answer entries are checked
    closeness(out[k], w, mask)


def test_cases_cover_every_tensor_op():
  used = {n.op for fn in CASES.values() for n in fn()[0].nodes}
  want = {n for n, o in T.ops.items() if "tensor" in o.levels and not o.untrusted}
  assert not want - used, f"tensor-level ops without a case: {sorted(want - used)}"


def test_expand_is_a_zero_copy_view():
  b = Builder()
  x = b.buffer((1, 1000), F32, 0)
  e = b.EXPAND(x, b.shape(20000, 1000))   # 80 MB if it were materialized
  s = b.REDUCE(e, arg={"op": "MAX", "axes": [0, 1]})
  res = evaluate(b.graph(roots=[s]), {0: rand(1, 1000)}, trace=True, budget="64M")
  v = res.values[e]
  assert v.strides[0] == 0 and res.peak_bytes < (1 << 20)


def test_fused_gemm_agrees_with_the_product():
  b = Builder()
  M, K, N = 160, 192, 160   # product of 4.9M elements: summed without building it
  A = b.buffer((M, K), F32, 0); B = b.buffer((K, N), F32, 1)
  out = b.REDUCE(b.MUL(b.RESHAPE(A, b.shape(M, K, 1)), b.RESHAPE(B, b.shape(1, K, N))), arg={"op": "ADD", "axes": [1]})
  av, bv = rand(M, K), rand(K, N)
  res = evaluate(b.graph(roots=[out]), {0: av, 1: bv}, trace=False)
  exact = (av.astype(np.float64) @ bv.astype(np.float64)).reshape(M, 1, N)
  # the REDUCE tolerance: 1 ulp per element summed, relative to the magnitudes
  bound = K * np.spacing(np.float32(1)) * (np.abs(av).astype(np.float64) @ np.abs(bv).astype(np.float64)).reshape(M, 1, N)
  assert np.all(np.abs(res["out0"] - exact) <= bound)


def test_replicated_slices_that_differ_are_refused():
  b = Builder()
  b.REPLICATED(b.buffer((2, 2), F32, 0, device=D[:2]), arg=[0])
  with pytest.raises(EvalError, match="REPLICATED"):
    evaluate(b.graph(), {0: np.array([[1, 2], [1, 3]], np.float32)})


def test_long_chain_is_linear():
  b = Builder()
  x = b.buffer((4,), F32, 0)
  one = b.const(1.0, F32)
  for _ in range(20000): x = b.ADD(x, one)
  out = evaluate(b.graph(), {0: np.zeros(4, np.float32)})
  assert out["out0"].tolist() == [20000.0] * 4


def test_index_into_an_empty_axis_reads_zero():
  # every index into a size-0 axis is out of range (decision index-oob): zeros, no error
  from tinyspec.graph import from_document
  from tinyspec.refimpl import evaluate
  doc = [{"op": "VCONST", "arg": {"values": [0, 3], "dtype": "index"}},
         {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
         {"op": "VCONST", "arg": {"values": [0, 5, -1], "dtype": "index"}},
         {"op": "INDEX", "src": [1, 2]}]
  g, _ = from_document(doc)
  out = evaluate(g, {"buf0": np.zeros((0, 3), np.float32)})["out0"]
  assert out.shape == (3, 3) and not out.any()


def test_replicated_over_an_empty_axis_has_the_derived_shape():
  from tinyspec.graph import from_document
  from tinyspec.validate import validate
  from tinyspec.refimpl import evaluate
  doc = [{"op": "VCONST", "arg": {"values": [0, 3], "dtype": "index"}},
         {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "int32", "device": ["D:0", "D:1"]}},
         {"op": "REPLICATED", "src": [1], "arg": [0]}]
  g, _ = from_document(doc)
  out = evaluate(g, {"buf0": np.zeros((0, 3), np.int32)})["out0"]
  assert out.shape == validate(g).views[-1].shape == (1, 3) and not out.any()
