"""min_max intervals (tinyspec/intervals.py) are sound: every value the op can produce from
operands inside the source intervals lies inside the derived interval (NaN excepted).
Checked against brute-force NumPy evaluation with the semantics of the decisions in
spec/ops.yaml: exhaustively over int8/uint8 operand intervals, and on samples plus the
edges for float16, bfloat16 and float32. Where derived.yaml promises exactness (integer
ADD/SUB/MUL/MAX without wrap, IDIV by a positive divisor) the interval is also tight."""
from __future__ import annotations
import math
import random
import ml_dtypes
import numpy as np
import pytest
from tinyspec import intervals as iv

INT_DTYPES = {"int8": np.int8, "uint8": np.uint8}
FLOAT_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
RND = random.Random(1234)
# overflow to inf and comparisons with NaN are what the float tests exercise
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value encountered:RuntimeWarning")


def int_intervals(name, n=60):
  """Edge intervals plus random ones of a small integer dtype."""
  lo, hi = iv.dtype_range(name)
  edges = [(lo, lo), (hi, hi), (lo, hi), (0, 0), (lo, lo + 3), (hi - 3, hi), (0, 5)] + ([(-1, 0), (-3, 3), (-5, -2)] if lo < 0 else [(1, 1)])
  rand = [tuple(sorted((RND.randint(lo, hi), RND.randint(lo, hi)))) for _ in range(n)]
  rand += [(a, min(a + RND.randint(0, 8), hi)) for a in (RND.randint(lo, hi) for _ in range(n))]   # narrow ones: where wrap matters
  return edges + rand


def values(a, name):
  return np.arange(a[0], a[1] + 1, dtype=np.int64)


def wrap(x, name):   # two's complement modulo 2^bits (decision int-wrap)
  return x.astype(INT_DTYPES[name]).astype(np.int64)


# the spec's integer semantics on int64 arrays, wrapped to the dtype
def idiv(x, y, name):
  with np.errstate(divide="ignore"):
    q = np.where(y == 0, 0, np.floor_divide(x, np.where(y == 0, 1, y)))
  return wrap(q, name)                                     # MIN // -1 wraps to MIN


def mod(x, y, name):
  return wrap(np.where(y == 0, x, np.mod(x, np.where(y == 0, 1, y))), name)   # sign of the divisor; a mod 0 = a


def shift(x, y, name, left):
  """decision shift on Python integers: amounts outside [0, width) give 0 (SHR of a negative: -1)."""
  w = 8 * np.dtype(INT_DTYPES[name]).itemsize
  out = np.empty(np.broadcast(x, y).shape, dtype=np.int64)
  for k, (a, b) in enumerate(zip(np.broadcast_to(x, out.shape).ravel(), np.broadcast_to(y, out.shape).ravel())):
    a, b = int(a), int(b)
    r = (a << b if 0 <= b < w else 0) if left else (a >> b if 0 <= b < w else (-1 if a < 0 else 0))
    out.flat[k] = np.array(r % (1 << w)).astype(np.uint64).astype(INT_DTYPES[name]) if w < 64 else np.array(r % (1 << 64), dtype=np.uint64).view(np.int64) if name != "uint64" else r % (1 << 64)
  return out


INT_BINARY = {
  "ADD": (lambda x, y, n: wrap(x + y, n), lambda a, b, n: iv.iv_add(a, b, n)),
  "SUB": (lambda x, y, n: wrap(x - y, n), lambda a, b, n: iv.iv_sub(a, b, n)),
  "MUL": (lambda x, y, n: wrap(x * y, n), lambda a, b, n: iv.iv_mul(a, b, n)),
  "MAX": (lambda x, y, n: np.maximum(x, y), lambda a, b, n: iv.iv_max(a, b, n)),
  "IDIV": (idiv, lambda a, b, n: iv.iv_idiv(a, b, n)),
  "MOD": (mod, lambda a, b, n: iv.iv_mod(a, b, n)),
  "SHL": (lambda x, y, n: shift(x, y, n, left=True), lambda a, b, n: iv.iv_shl(a, b, n)),
  "SHR": (lambda x, y, n: shift(x, y, n, left=False), lambda a, b, n: iv.iv_shr(a, b, n)),
  "CMPLT": (lambda x, y, n: (x < y).astype(np.int64), lambda a, b, n: iv.iv_cmplt(a, b, n)),
  "CMPNE": (lambda x, y, n: (x != y).astype(np.int64), lambda a, b, n: iv.iv_cmpne(a, b, n)),
}


def inside(vals, box) -> bool:
  return box is not None and bool(np.all((vals >= box[0]) & (vals <= box[1])))


@pytest.mark.parametrize("name", INT_DTYPES)
@pytest.mark.parametrize("op", INT_BINARY)
def test_integer_binary_ops_are_sound(op, name):
  fn, ivf = INT_BINARY[op]
  ivs = int_intervals(name)
  pairs = [(a, b) for a in ivs[:12] for b in ivs[:12]] + [(RND.choice(ivs), RND.choice(ivs)) for _ in range(300)]
  for a, b in pairs:
    x, y = np.meshgrid(values(a, name), values(b, name))
    got = fn(x, y, name)
    box = ivf(a, b, name)
    assert inside(got, box), f"{op} {name} {a} {b}: interval {box}, values in [{got.min()}, {got.max()}]"


@pytest.mark.parametrize("name", INT_DTYPES)
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "MAX"])
def test_integer_intervals_are_exact_when_nothing_wraps(op, name):
  fn, ivf = INT_BINARY[op]
  lo, hi = iv.dtype_range(name)
  checked = 0
  for a in int_intervals(name)[:30]:
    for b in int_intervals(name)[:30]:
      x, y = np.meshgrid(values(a, name), values(b, name))
      exact = {"ADD": x + y, "SUB": x - y, "MUL": x * y, "MAX": np.maximum(x, y)}[op]
      if exact.min() < lo or exact.max() > hi: continue       # it can wrap: widening is the rule
      assert ivf(a, b, name) == (exact.min(), exact.max()), (op, a, b)
      checked += 1
  assert checked > 20


def test_wrap_widens_to_the_dtype_range():
  assert iv.iv_add((100, 100), (100, 100), "int8") == (-128, 127)
  assert iv.iv_sub((0, 0), (1, 1), "uint8") == (0, 255)
  assert iv.iv_mul((-128, -128), (-1, -1), "int8") == (-128, 127)
  assert iv.iv_add((0, 2**63 - 1), (1, 1), "index") == iv.dtype_range("index")
  assert iv.iv_add((1, 2), (3, 4), "int8") == (4, 6)


def test_idiv_and_mod_refinements():
  assert iv.iv_idiv((-7, 7), (2, 3), "int8") == (-4, 3)            # floor division by a positive divisor is monotone
  assert iv.iv_idiv((-7, 7), (-1, 2), "int8") == (-128, 127)       # a divisor that may be 0 or negative: the dtype range
  assert iv.iv_mod((-100, 100), (1, 8), "int8") == (0, 7)          # floor MOD by [1, B] lies in [0, B-1]
  assert iv.iv_mod((2, 5), (6, 9), "int8") == (2, 5)               # smaller than every divisor: unchanged
  assert iv.iv_mod((0, 5), (-3, 3), "int8") == (-128, 127)


@pytest.mark.parametrize("name", INT_DTYPES)
def test_where_is_sound(name):
  ivs = int_intervals(name)
  for _ in range(300):
    p, b, c = RND.choice(ivs), RND.choice(ivs), RND.choice(ivs)
    pv = values(p, name)
    got = np.concatenate([values(b, name) if (pv != 0).any() else [], values(c, name) if (pv == 0).any() else []])
    assert inside(got, iv.iv_where(p, b, c, name)), (p, b, c)
  assert iv.iv_where((1, 5), (0, 1), (7, 9), "int8") == (0, 1) and iv.iv_where((0, 0), (0, 1), (7, 9), "int8") == (7, 9)
  assert iv.iv_where((0.0, 0.0), (0, 1), (7, 9), "float32") == (0, 9)   # a float condition may be NaN: nonzero


@pytest.mark.parametrize("src", INT_DTYPES)
@pytest.mark.parametrize("dst", ["int8", "uint8", "int16", "uint16", "bool", "float16", "bfloat16"])
def test_integer_casts_are_sound(src, dst):
  for a in int_intervals(src):
    x = values(a, src)
    if dst == "bool": got = (x != 0).astype(np.int64)
    elif dst in FLOAT_DTYPES: got = x.astype(FLOAT_DTYPES[dst]).astype(np.float64)
    else: got = x.astype(np.dtype(dst)).astype(np.int64)      # keeps the low bits (decision cast-int-int)
    assert inside(got, iv.iv_cast(a, src, dst)), (src, dst, a, iv.iv_cast(a, src, dst))


# ------------------------------------------------------------------ floats
def float_values(name, n=400):
  t = FLOAT_DTYPES[name]
  info = ml_dtypes.finfo(t)   # NumPy's finfo does not know bfloat16
  special = [0.0, -0.0, 1.0, -1.0, float(info.max), -float(info.max), float(info.tiny), float(info.smallest_subnormal), 0.1, 1e-3, 3.0, 65504.0, 1e30]
  rand = [RND.choice((-1, 1)) * 2.0 ** RND.uniform(-30, 20) for _ in range(n)]
  return np.unique(np.array(special + rand, dtype=np.float64).astype(t).astype(np.float64))   # on the dtype's grid


def float_interval(vals):
  a, b = sorted(RND.sample(list(vals), 2))
  return (a, b)


def samples(a, vals):
  inner = vals[(vals >= a[0]) & (vals <= a[1])]
  return np.unique(np.concatenate([[a[0], a[1]], inner[:: max(1, len(inner) // 40)]]))


@pytest.mark.parametrize("name", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_float_intervals_round_outward(op, name):
  t = FLOAT_DTYPES[name]
  vals = float_values(name)
  fn = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply}[op]
  ivf = {"ADD": iv.iv_add, "SUB": iv.iv_sub, "MUL": iv.iv_mul}[op]
  for _ in range(150):
    a, b = float_interval(vals), float_interval(vals)
    x, y = np.meshgrid(samples(a, vals).astype(t), samples(b, vals).astype(t))
    with np.errstate(all="ignore"):
      got = fn(x, y).astype(np.float64)                     # the dtype's own arithmetic, rounded once
    got = got[~np.isnan(got)]
    box = ivf(a, b, name)
    assert inside(got, box), f"{op} {name} {a} {b}: {box} misses [{got.min()}, {got.max()}]"
    assert box[0] == float(np.array(box[0]).astype(t)) and box[1] == float(np.array(box[1]).astype(t))   # bounds on the grid


def test_float_overflow_reaches_inf():
  lo, hi = iv.iv_add((60000.0, 65504.0), (60000.0, 65504.0), "float16")
  assert hi == math.inf and lo < 120000
  assert iv.iv_mul((0.0, 0.0), (math.inf, math.inf), "float32") == iv.dtype_range("float32")   # 0 * inf is NaN
  assert iv.iv_cast((70000, 70000), "int32", "float16")[1] == math.inf


@pytest.mark.parametrize("name", FLOAT_DTYPES)
def test_const_intervals_hold_the_rounded_constant(name):
  t = FLOAT_DTYPES[name]
  for v in (0.1, 1 / 3, 1e-8, 70000.0, -2.5):
    r = float(np.array(v).astype(t))
    assert iv.iv_const(v, name) == (r, r)
  assert iv.iv_const("nan", name) == iv.dtype_range(name)


@pytest.mark.parametrize("src", FLOAT_DTYPES)
@pytest.mark.parametrize("dst", ["int8", "uint8", "bool"])
def test_float_to_int_casts_saturate_and_nan_gives_zero(src, dst):
  """Decision cast-float-int: truncate, saturate, NaN -> 0; to bool: x != 0 (NaN -> true)."""
  t = FLOAT_DTYPES[src]
  vals = float_values(src)
  lo_d, hi_d = iv.dtype_range(dst)
  def cast(x):
    if dst == "bool": return np.where(np.isnan(x), 1, (x != 0).astype(np.int64))
    with np.errstate(invalid="ignore"):
      return np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x, posinf=1e300, neginf=-1e300)), lo_d, hi_d)).astype(np.int64)
  for _ in range(200):
    a = float_interval(vals)
    x = np.concatenate([samples(a, vals), [np.nan]]).astype(t).astype(np.float64)
    box = iv.iv_cast(a, src, dst)
    assert inside(cast(x), box), (src, dst, a, box)
  assert iv.iv_cast((2.5, 3.7), src, "int8") == (0, 3)              # 0 for NaN is always in
  assert iv.iv_cast((-1e30, 1e30), src, "int8") == (-128, 127)
  assert iv.iv_cast((math.inf, math.inf), src, "uint8") == (0, 255)
  assert iv.iv_cast((0.0, 0.0), src, "bool") == (0, 1)             # 0.0 is false but NaN is true
  assert iv.iv_cast((0.5, 2.0), src, "bool") == (1, 1)


def test_float_comparisons_never_prove_true():
  """NaN lies outside every float interval and compares false, so CMPLT of floats is
  never [1, 1]; CMPNE of disjoint intervals is [1, 1] (NaN != x is true)."""
  for name in FLOAT_DTYPES:
    assert iv.iv_cmplt((0.0, 1.0), (2.0, 3.0), name) == (0, 1)
    assert iv.iv_cmplt((2.0, 3.0), (0.0, 1.0), name) == (0, 0)
    assert iv.iv_cmpne((0.0, 1.0), (2.0, 3.0), name) == (1, 1)
    assert iv.iv_cmpne((1.0, 1.0), (1.0, 1.0), name) == (0, 1)
  assert iv.iv_cmplt((0, 1), (2, 3), "int8") == (1, 1) and iv.iv_cmpne((4, 4), (4, 4), "int8") == (0, 0)


@pytest.mark.parametrize("name", FLOAT_DTYPES)
def test_float_compare_and_max_are_sound(name):
  t = FLOAT_DTYPES[name]
  vals = float_values(name)
  for _ in range(150):
    a, b = float_interval(vals), float_interval(vals)
    x, y = np.meshgrid(np.concatenate([samples(a, vals), [np.nan]]).astype(t), np.concatenate([samples(b, vals), [np.nan]]).astype(t))
    assert inside((x < y).astype(np.int64), iv.iv_cmplt(a, b, name))
    assert inside((x != y).astype(np.int64), iv.iv_cmpne(a, b, name))
    m = np.where(x < y, y, x).astype(np.float64)   # decision max-nan: a NaN operand selects the other one
    assert inside(m[~np.isnan(m)], iv.iv_max(a, b, name))


def test_outward_step_is_one_ulp():
  """_down is the nearest value one step below, on the dtype's grid (float16/32/64 via the
  bit pattern, bfloat16 through ml_dtypes)."""
  assert iv._down(1.0, "float16") == float(np.nextafter(np.float16(1.0), np.float16(-np.inf)))
  assert iv._down(1.0, "float32") == float(np.nextafter(np.float32(1.0), np.float32(-np.inf)))
  assert iv._down(1.0, "float64") == math.nextafter(1.0, -math.inf)
  bf = ml_dtypes.bfloat16
  assert iv._down(1.0, "bfloat16") == float(np.nextafter(np.array(1.0, bf), np.array(-np.inf, bf)))
  assert iv._down(0.0, "float32") < 0 and iv._down(-0.0, "float16") < 0
  assert iv._down(math.inf, "float16") == 65504.0 and iv._up(-math.inf, "float16") == -65504.0
  assert iv._down(math.nan, "float32") == -math.inf


def test_min_max_of_storage_after_a_store_covers_what_was_stored():
  """AFTER(PARAM bounded [0, 10], STORE(PARAM, 100)) evaluates to 100: its interval holds it."""
  from tinyspec.refimpl.build import Builder
  from tinyspec.validate import validate
  from tinyspec.refimpl import evaluate
  b = Builder()
  p = b.param((), "int32", 0, name="p", bounds=(0, 10))
  a = b.AFTER(p, b.STORE(p, b.const(100, "int32")))
  g = b.graph([b.ADD(a, b.const(0, "int32"))], level="tensor")
  res = validate(g)
  assert res.ok
  lo, hi = res.views[a].min_max
  assert lo <= 100 <= hi
  assert int(evaluate(g, {"p": np.array(5, np.int32)})["out0"]) == 100
