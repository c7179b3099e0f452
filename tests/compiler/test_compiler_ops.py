"""Every elementwise and decomposed op, on every dtype its slots accept, through both
targets (C and OpenCL/PoCL) against refimpl.evaluate, on edge values: 0, -0, ±1, the
dtype's extremes, shift amounts around the width, ±inf, NaN, subnormals, halfway cases.
Integers and bools must be bit-exact; floats within ops.yaml `tolerances`.

One graph per dtype holds all its ops as roots; horizontal fusion makes each shape group
one kernel, so the whole table costs a few compilations per target.
"""
from __future__ import annotations
import math
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.tables import tables
from tinyspec.dtypes import DTYPES, dtype as _dt
from tinyspec.compiler import supported_dtypes
from tinyspec.intervals import np_dtype
from tinyspec.compiler import compile_graph
from tinyspec.compiler.check import compare, tolerance
from tinyspec.tolerance import within_tolerance
from tinyspec.props import props
from tinyspec.compiler.literals import shape_operand

from targets import TARGETS
DTYPE_NAMES = [n for n, d in DTYPES.items() if d.cls != "void" and n in supported_dtypes("c") & supported_dtypes("opencl")]   # the float8s are refused


def edges(name: str) -> np.ndarray:
  d = _dt(name)
  if d.cls == "bool": return np.array([False, True, True, False])
  if d.cls in ("int", "uint", "index"):
    w = d.bits
    vals = [0, 1, 2, 3, 5, 7, 100, w - 1, w, w + 1, 2 * w, d.max, d.max - 1, d.max // 2 + 1]
    if d.min < 0: vals += [-1, -2, -3, -7, -100, -w, -(w - 1), d.min, d.min + 1, d.min // 2]
    vals = [v for v in vals if d.min <= v <= d.max]
    return np.array(vals, dtype=object).astype(np_dtype(name))
  f = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 0.1, -0.1, math.pi, 100.0, -100.0, 1e-3, 7.0,
       65504.0, 65520.0, -65520.0, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 63, 2.0 ** 64, 1e10, -1e10, 3e38, -3e38,
       1.2e-38, 1e-40, -1e-40, 6e-8, 1e-5, math.inf, -math.inf, math.nan, 1e300, 5e-324, 127.9, 128.5, -129.5, 255.5, 256.0]
  with np.errstate(all="ignore"):
    return np.array(f, dtype=np.float64).astype(np_dtype(name))


def _buf(slot: int, shape, dt: str) -> UOp:
  return UOp("BUFFER", (shape_operand(shape),), {"slot": slot, "dtype": dt, "device": "CPU"})


def _accepts(op, k: int, dt: str) -> bool:
  s = op.slot_for(k)
  a = s.allowed()
  return s.kind == "value" and (a is None or dt in a)


def op_graph(dt: str):
  """Roots: every elementwise/decomposed op (and CAST/BITCAST to every dtype) on edge
  values of dt. Returns (roots, names, inputs)."""
  T = tables()
  e = edges(dt)
  n = len(e)
  A, B, C = _buf(0, (n, 1), dt), _buf(1, (1, n), dt), _buf(2, (1, n), dt)
  inputs = {"buf0": e.reshape(n, 1), "buf1": e.reshape(1, n), "buf2": e[::-1].copy().reshape(1, n)}
  roots, names = [], []
  for name, op in T.ops.items():
    if op.category not in ("elementwise", "decomposed") or name in ("CAST",): continue
    nsrc = op.min_src
    if not all(_accepts(op, k, dt) for k in range(nsrc)): continue
    if name == "WHERE": u = UOp(name, (A, B, C))
    else: u = UOp(name, (A, B, C)[:nsrc] if nsrc > 1 else (A,))
    try: props(u)
    except Exception: continue
    roots.append(u); names.append(name)
  for to in DTYPE_NAMES:
    roots.append(UOp("CAST", (A,), to)); names.append(f"CAST->{to}")
    if _dt(to).itemsize == _dt(dt).itemsize and to != dt:
      roots.append(UOp("BITCAST", (A,), to)); names.append(f"BITCAST->{to}")
  return roots, names, inputs


@pytest.fixture(scope="module")
def reference():
  from tinyspec.refimpl import evaluate
  cache = {}
  def get(dt):
    if dt not in cache:
      roots, names, inputs = op_graph(dt)
      cache[dt] = (roots, names, inputs, evaluate(roots, inputs))
    return cache[dt]
  return get


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", DTYPE_NAMES)
def test_elementwise_ops(target, dt, reference):
  roots, names, inputs, want = reference(dt)
  c = compile_graph(roots, target, keep_stages=False)
  assert len(c.sources) <= 3, [k.name for k in c.sources]   # fused: one kernel per shape group
  got = c.run(inputs)
  bad = []
  for k, name in enumerate(names):
    key = f"out{k}"
    out_dt = props(roots[k]).dtype
    op = name.split("->")[0]
    ulp = tolerance(op, out_dt)
    g, w = got[key], want[key]
    if ulp == 0:
      msg = compare(g, w, out_dt, 0)     # bit-exact (the sign of zero included), NaN payloads aside
    else:                                # the table's bound inside its domain, exact on ±inf/NaN operands
      srcs = [inputs[f"buf{j}"] for j in range(len(roots[k].src))]
      ok = within_tolerance(op, out_dt, g, w, srcs)
      msg = None if ok.all() else f"{np.sum(~ok)} of {ok.size} outside {ulp} ulp, e.g. input {[np.broadcast_to(x, ok.shape)[~ok][0] for x in srcs]}: got {g[~ok][0]!r}, want {w[~ok][0]!r}"
    if msg: bad.append(f"{name} ({dt} -> {out_dt}): {msg}")
  assert not bad, "\n".join(bad)


def test_every_elementwise_op_is_covered():
  """The graphs above reach every elementwise/decomposed op of the tables on some dtype."""
  seen = set()
  for dt in DTYPE_NAMES: seen |= {n.split("->")[0] for n in op_graph(dt)[1]}
  want = {n for n, o in tables().ops.items() if o.category in ("elementwise", "decomposed")}
  assert want <= seen, sorted(want - seen)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("op", ["ADD", "MUL", "MAX"])
@pytest.mark.parametrize("axes,shape", [((), (4, 3)), ((1,), (4, 1)), ((0, 1), (1, 1))])
def test_reduce_over_no_axes_or_size_one_axes(target, dt, op, axes, shape):
  """A REDUCE over no axes or over axes of size 1 is its input (decision reduce-one: -0.0
  stays -0.0 under ADD, NaN stays NaN under MAX), as the reference has it."""
  from tinyspec.refimpl import evaluate
  x = _buf(0, shape, dt)
  root = UOp("REDUCE", (x,), {"op": op, "axes": list(axes)})
  vals = np.array([-0.0, np.nan, -1.5, np.inf, -np.inf, 0.0, 2.0, -0.0, 3.0, -2.0, 0.5, -0.0], np.float64)
  inp = {"buf0": vals[: int(np.prod(shape))].reshape(shape).astype(np_dtype(dt))}
  want = evaluate([root], inp)["out0"]
  got = compile_graph([root], target, keep_stages=False).run(inp)["out0"]
  assert compare(got, want, dt, 0) is None, (got, want)
  assert np.asarray(want).tobytes() == inp["buf0"].reshape(np.shape(want)).tobytes()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["ADD", "MUL", "MAX"])
@pytest.mark.parametrize("opts", [None, [["PADTO", 1, 4]]], ids=["plain", "padded"])
def test_kernel_reduce_over_a_range_of_size_one(target, op, opts):
  """At kernel level a REDUCE over a RANGE that runs once is its one element (reduce-one),
  also where PADTO pads that axis (its padded iterations would fold in identities)."""
  from tinyspec.refimpl import evaluate
  from tinyspec.refimpl.build import Builder
  b = Builder()
  p, o, r = b.param((3,), "float32", 0), b.param((3,), "float32", 1), b.range(3, 0)
  one = b.range(1, 1)
  red = b.REDUCE(b.INDEX(p, b.ADD(r, one)), one, arg={"op": op})
  b.SINK(b.END(b.STORE(b.INDEX(o, r), red), r))
  inp = {"param0": np.array([-0.0, np.nan, -1.5], np.float32), "param1": np.ones(3, np.float32)}
  want = evaluate(b.graph(), inp)["param1"]
  got = compile_graph(b.graph(), target, opts=opts, keep_stages=False).run(inp)["param1"]
  assert np.asarray(want).tobytes() == inp["param0"].tobytes() == np.asarray(got).tobytes(), (want, got)


@pytest.mark.parametrize("dt, got, want, said", [
  # a float16 rounding bug (truncation): one ulp, both bit patterns
  ("float16", 0.99951171875, 1.0, "got 0.99951171875 (0x3bff), want 1.0 (0x3c00), 1 ulp apart"),
  ("float32", -0.0, 0.0, "got -0.0 (0x80000000), want 0.0 (0x00000000), 0 ulp apart"),   # the sign of zero
  ("bfloat16", 1.0078125, 1.0, "got 1.0078125 (0x3f81), want 1.0 (0x3f80), 1 ulp apart"),
  ("float64", np.nan, 2.0, "got nan (0x7ff8000000000000), want 2.0 (0x4000000000000000)"),   # no distance to a NaN
])
def test_a_float_that_differs_shows_its_bits_and_ulps(dt, got, want, said):
  """check.compare's message (the stage checks, `tinyspec compile --check`) shows a float as
  the conformance runner does: its bit pattern in hex and the distance in ulps."""
  t = np_dtype(dt)
  msg = compare(np.array([want, got], t), np.array([want, want], t), dt, 0)
  assert msg is not None and said in msg and "at (1,)" in msg, msg
  assert "ulp apart" not in msg or not np.isnan(got)
  assert compare(np.array([5, 7], np.int32), np.array([5, 6], np.int32), "int32") == "1 of 2 differ, e.g. at (1,): got 7, want 6"
