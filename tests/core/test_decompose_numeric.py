"""Decompositions compute what the ops compute: for every decomposed op and every dtype its
slots allow, the expanded graph and the op itself, both run by the reference evaluator,
agree: integers and bools bit for bit, floats within the op's tolerance from the tables
(inside its domain; exactly wherever an operand is NaN or ±inf). Inputs: each dtype's
edge values (0, -0.0, NaN, ±inf, denormals, the integer minimum and maximum ...), all
their pairs, and random values. THREEFRY is also held to Random123's known answers."""
import itertools
import zlib
import ml_dtypes
import numpy as np
import pytest
from tinyspec.refimpl import evaluate
from tinyspec import Graph, Node
from tinyspec.dtypes import dtype as D
from tinyspec.intervals import NUMPY_TYPES
from tinyspec.decompose import decompose
from tinyspec.tables import tables
from tinyspec.tolerance import within_tolerance, in_domain, ulp_distance
from test_decompose import CASES, graph_of

N_RANDOM = 3000


def np_dtype(dt):
  return NUMPY_TYPES[dt]


def edges(dt) -> np.ndarray:
  d = D(dt)
  if d.cls == "bool": return np.array([False, True])
  if d.is_int:
    v = [0, 1, 2, 3, d.max, d.max - 1, d.max // 2] + ([-1, -2, d.min, d.min + 1, d.min // 2] if d.is_signed else [])
    return np.array(v, dtype=np_dtype(dt))
  f = ml_dtypes.finfo(np_dtype(dt))
  v = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -2.5, float(f.smallest_subnormal), -float(f.smallest_subnormal),
       float(f.tiny) * (1 - float(f.eps)), float(f.tiny), float(f.max), -float(f.max), np.nan, np.inf, -np.inf, 100.0, -149.5]
  return np.array(v, dtype=np.float64).astype(np_dtype(dt))


def randoms(dt, rng) -> np.ndarray:
  """Random bit patterns, plus (floats) values spread over the ranges the domains care about."""
  d, npd = D(dt), np_dtype(dt)
  if d.cls == "bool": return rng.integers(0, 2, N_RANDOM).astype(bool)
  bits = rng.integers(0, 2 ** (8 * d.itemsize), N_RANDOM, dtype=np.uint64 if d.itemsize == 8 else np.int64)
  raw = bits.astype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[d.itemsize]).view(npd)
  if not d.is_float: return raw
  n = N_RANDOM // 5
  spread = [rng.uniform(-4, 4, n), rng.uniform(0.01, 8, n), rng.uniform(-160, 160, n), rng.uniform(-1e5, 1e5, n),
            np.exp2(rng.uniform(-140, 140, n)) * rng.choice([-1, 1], n)]
  with np.errstate(over="ignore"):
    return np.concatenate([raw, np.concatenate(spread).astype(npd)])


def operands(op, dt, rng) -> list[np.ndarray]:
  """One array per fixed slot: every combination of edge values, then random values."""
  od = tables().ops[op]
  slots = [s for s in od.slots if not (s.optional or s.variadic)]
  dts = [next(iter(s.allowed())) if s.allowed() is not None and len(s.allowed()) == 1 else dt for s in slots]
  grid = list(itertools.product(*[range(len(edges(t))) for t in dts]))
  cols = []
  for k, t in enumerate(dts):
    e = edges(t)[[g[k] for g in grid]]
    r = randoms(t, rng)
    cols.append(np.concatenate([e, rng.permutation(r)]))
  n = min(len(c) for c in cols)
  return [c[:n] for c in cols]


def run(g: Graph, xs: list[np.ndarray]) -> np.ndarray:
  out = evaluate(g, {f"buf{k}": x for k, x in enumerate(xs)})
  return np.asarray(out["out0"])


def check(op, dt, xs, label=""):
  g = graph_of(op, dt, [x.shape for x in xs])
  direct, expanded = run(g, xs), run(decompose(g), xs)
  assert expanded.dtype == direct.dtype and expanded.shape == direct.shape
  if not D(next((n for n, t in NUMPY_TYPES.items() if t == direct.dtype), str(direct.dtype))).is_float:
    bad = np.flatnonzero(np.broadcast_to(direct != expanded, direct.shape).ravel())
  else:
    ok = within_tolerance(op, dt, expanded, direct, xs, decomposed=True)
    bad = np.flatnonzero(~ok.ravel())
  if len(bad):
    i = bad[:5]
    flat = [np.broadcast_to(x, direct.shape).ravel() for x in xs]
    rows = [f"  in={[f[j] for f in flat]} direct={direct.ravel()[j]!r} expanded={expanded.ravel()[j]!r}" for j in i]
    pytest.fail(f"{op} {dt}{label}: {len(bad)} of {direct.size} elements differ, e.g.\n" + "\n".join(rows))
  return direct, expanded


@pytest.mark.parametrize("op,dt", CASES)
def test_expansion_agrees_with_the_op(op, dt):
  rng = np.random.default_rng(zlib.crc32(f"{op} {dt}".encode()))
  xs = operands(op, dt, rng)
  check(op, dt, xs)
  if D(dt).is_float and op != "COPY":
    # a meaningful share of the random inputs lies inside the op's domain
    inside = in_domain(op, dt, xs, decomposed=True)
    assert inside.sum() >= N_RANDOM // 3, (op, dt, int(inside.sum()))


@pytest.mark.parametrize("dt,dom", [("float32", 1e5), ("float64", 1e6)])
def test_sin_near_multiples_of_half_pi(dt, dom):
  """The hardest arguments for the reduction: the floats nearest to n*pi/2 (and their
  neighbours), where x - n*pi/2 cancels to ~1e-9 (float32) or ~1e-19 (float64)."""
  pio2 = np.longdouble("1.57079632679489661923132169163975144")
  n = np.unique(np.concatenate([np.arange(1, 400), np.geomspace(400, dom / 1.6, 1500).astype(np.int64)])).astype(np.longdouble)
  x0 = (n * pio2).astype(np_dtype(dt))
  x = np.concatenate([x0, np.nextafter(x0, np.inf), np.nextafter(x0, -np.inf), np.array([252.89820861816406, 45.553093477052])]).astype(np_dtype(dt))
  x = np.concatenate([x, -x])
  check("SIN", dt, [x[np.abs(x) <= dom]], " near n*pi/2")


def test_float16_and_bfloat16_exhaustively():
  """Every float16 and bfloat16 value through EXP2, LOG2, SIN and SQRT."""
  for dt in ("float16", "bfloat16"):
    allv = np.arange(2 ** 16, dtype=np.uint16).view(np_dtype(dt))
    for op in ("EXP2", "LOG2", "SIN", "SQRT"):
      check(op, dt, [allv], " (all values)")


def test_broadcast_operands():
  rng = np.random.default_rng(7)
  a = rng.uniform(-3, 3, (3, 1)).astype(np.float32)
  b = rng.uniform(0.5, 3, (1, 4)).astype(np.float32)
  for op in ("SUB", "DIV", "POW", "CMPGE"):
    direct, _ = check(op, "float32", [a, b], " broadcast")
    assert direct.shape == (3, 4)


# Random123's known-answer vectors for threefry2x32_20: (ctr, key) -> out, each a pair of
# 32-bit words, the first word the low half of the uint64.
KAT = [((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6b200159, 0x99ba4efe)),
       ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
       ((0x243f6a88, 0x85a308d3), (0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]


def test_threefry_known_answers():
  def pack(w): return w[0] | (w[1] << 32)
  x = np.array([pack(c) for c, _, _ in KAT], np.uint64)
  k = np.array([pack(k) for _, k, _ in KAT], np.uint64)
  want = np.array([pack(o) for _, _, o in KAT], np.uint64)
  g = graph_of("THREEFRY", "uint64", [x.shape, k.shape])
  assert np.array_equal(run(decompose(g), [x, k]), want)
  assert np.array_equal(run(g, [x, k]), want)


def test_ulp_distance_counts_representable_values():
  f32 = np.float32
  one = f32(1)
  assert ulp_distance(np.array([one]), np.array([np.nextafter(one, f32(2))]))[0] == 1
  assert ulp_distance(np.array([f32(0)]), np.array([f32(-0.0)]))[0] == 0
  tiny = np.array([np.finfo(f32).smallest_subnormal], f32)
  assert ulp_distance(tiny, -tiny)[0] == 2
  assert ulp_distance(np.array([np.nan], f32), np.array([np.nan], f32))[0] == 0
  assert ulp_distance(np.array([np.nan], f32), np.array([one]))[0] == np.inf
  assert ulp_distance(np.array([np.finfo(f32).max]), np.array([np.inf], f32))[0] == 1


def test_kernel_level_expansion():
  """Inside a kernel (what instruction selection sees): a RANGE over a buffer, SIN of each
  element stored to another; the expanded kernel stores the same values within tolerance."""
  nodes = [Node("CONST", (), {"value": 64, "dtype": "index"}), Node("RANGE", (0,), {"id": 0, "type": "LOOP"}),
           Node("VCONST", (), {"values": [64], "dtype": "index"}),
           Node("PARAM", (2,), {"slot": 0, "dtype": "float32"}), Node("PARAM", (2,), {"slot": 1, "dtype": "float32"}),
           Node("INDEX", (3, 1)), Node("SIN", (5,)), Node("INDEX", (4, 1)), Node("STORE", (7, 6)),
           Node("END", (8, 1)), Node("SINK", (9,))]
  g = Graph(nodes, level="kernel")
  x = np.linspace(-7, 7, 64).astype(np.float32)
  inputs = {"param0": x, "param1": np.zeros(64, np.float32)}
  e = decompose(g)
  assert "SIN" not in {n.op for n in e.nodes}
  direct, expanded = evaluate(g, dict(inputs))["param1"], evaluate(e, dict(inputs))["param1"]
  assert within_tolerance("SIN", "float32", expanded, direct, [x], decomposed=True).all()
  assert not np.array_equal(expanded, np.zeros(64, np.float32))
