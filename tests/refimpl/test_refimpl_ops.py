"""Every elementwise and decomposed op, in every dtype its slots allow (read from the
tables), on each dtype's edge values (0, -0.0, NaN, ±inf, denormals, min and max...),
against an independent oracle: Python integers for integer ops, exact rational
arithmetic with a software round-to-nearest-even for float ops, and float64 math within
the op's ULP tolerance for the transcendental ones."""
from __future__ import annotations
import math
import itertools
from fractions import Fraction
import numpy as np
import pytest
from tinyspec.tables import tables
from tinyspec.dtypes import DTYPES
from tinyspec.refimpl import evaluate
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.numeric import NP

T = tables()
ELEMENTWISE = [n for n, o in T.ops.items() if o.category in ("elementwise", "decomposed")]


def allowed(op, slot=0):
  return sorted(T.ops[op].slots[slot].allowed())


# ------------------------------------------------------------------ edge values
def float_format(name):
  d = DTYPES[name]
  return d.mantissa, d.exponent


def float_edges(name):
  m, e = float_format(name)
  d = DTYPES[name]
  bias = d.exponent_bias                       # the table's, for the float8 dtypes whose bias is not IEEE's
  tiny = 2.0 ** (1 - bias - m)                 # smallest denormal
  min_normal = 2.0 ** (1 - bias)
  max_finite = d.normal_range[1]
  eps = 2.0 ** -m
  vals = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, -2.5, 3.0, 1 + eps, 1 - eps / 2, tiny, -tiny, min_normal - tiny, min_normal,
          max_finite, -max_finite, math.nan, math.inf, -math.inf, 0.1, 100.25]
  vals = [v for v in vals if (d.has_inf or not math.isinf(v)) and (d.negzero or v != 0 or math.copysign(1, v) > 0)]
  return [v for v in vals if math.isnan(v) or math.isinf(v) or _representable(v, name)]


def held(v, name):
  """v as a value of dtype `name` holds it: a non-finite value is NaN where the dtype has no
  infinity, a zero is +0.0 where it has no -0.0 (decision fp8-convert)."""
  if not isinstance(v, float) or DTYPES[name].cls != "float": return v
  d = DTYPES[name]
  if math.isinf(v) and not d.has_inf: return math.nan
  return 0.0 if v == 0 and not d.negzero else v


def _representable(v, name):
  return round_to(Fraction(v), name) == v


def int_edges(name):
  d = DTYPES[name]
  vals = {0, 1, 2, 3, 7, d.max, d.max - 1, d.min, d.min + 1, d.max // 2, 100}
  if d.min < 0: vals |= {-1, -2, -3, -7, -100, d.min // 2}
  return sorted(v for v in vals if d.min <= v <= d.max)


def edges(name):
  if DTYPES[name].cls == "bool": return [False, True]
  if DTYPES[name].cls == "float": return float_edges(name)
  return int_edges(name)


# ------------------------------------------------------------------ oracle helpers
def round_to(q: Fraction, name) -> float:
  """q rounded to nearest even in float dtype `name` (with denormals and overflow: to ±inf,
  or to ±finite_max for a saturating dtype, decision fp8-convert)."""
  m, e = float_format(name)
  bias = DTYPES[name].exponent_bias
  if q == 0: return 0.0
  neg, a = q < 0, abs(q)
  ex = a.numerator.bit_length() - a.denominator.bit_length()
  while Fraction(2) ** ex > a: ex -= 1
  while Fraction(2) ** (ex + 1) <= a: ex += 1
  ex = max(ex, 1 - bias)
  ulp = Fraction(2) ** (ex - m)
  k = a / ulp
  n = k.numerator // k.denominator
  rem = k - n
  if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2): n += 1
  r = n * ulp
  if r > Fraction(DTYPES[name].normal_range[1]):
    big = DTYPES[name].normal_range[1] if DTYPES[name].saturate else math.inf
    return -big if neg else big
  f = float(r)
  return -f if neg else f


def wrap(x: int, name) -> int:
  d = DTYPES[name]
  return (x - d.min) % (d.max - d.min + 1) + d.min


def finite(*xs): return all(not (isinstance(x, float) and (math.isnan(x) or math.isinf(x))) for x in xs)


def f64(fn, *xs):
  with np.errstate(all="ignore"): return float(fn(*[np.float64(x) for x in xs]))


def float_arith(name, fn, *xs):
  """fn exactly (Fraction), rounded once; IEEE float64 for special operands and zero results."""
  if finite(*xs):
    try: q = fn(*[Fraction(x) for x in xs])
    except ZeroDivisionError: q = 0
    if q != 0: return round_to(q, name)
  return round_special(f64(fn, *xs), name)


def round_special(v, name):
  return v if math.isnan(v) or math.isinf(v) or v == 0 else round_to(Fraction(v), name)


def sqrt_exact(a: float, name) -> float:
  if math.isnan(a) or a < 0: return math.nan
  if a == 0 or math.isinf(a): return a
  q = Fraction(a)
  s = q.denominator.bit_length() + 200   # enough fraction bits for the smallest denormal
  num = q.numerator * 4 ** s // q.denominator
  r = math.isqrt(num)
  exact = r * r == num and q.numerator * 4 ** s % q.denominator == 0
  return round_to(Fraction(r, 2 ** s) + (0 if exact else Fraction(1, 2 ** (s + 2))), name)


def fmax(a, b):
  if isinstance(a, bool): return a or b
  if isinstance(a, float):
    if math.isnan(a) or math.isnan(b): return math.nan
    if a == 0 and b == 0: return -0.0 if math.copysign(1, a) < 0 and math.copysign(1, b) < 0 else 0.0
  return max(a, b)


def idiv(a, b, name):
  if b == 0: return 0
  return wrap(a // b, name)


def mod(a, b, name):
  if b == 0: return a
  return wrap(a % b, name)


def shl(a, b, name):
  w = DTYPES[name].itemsize * 8
  return wrap(a << b, name) if 0 <= b < w else 0


def shr(a, b, name):
  w = DTYPES[name].itemsize * 8
  return a >> b if 0 <= b < w else (-1 if a < 0 else 0)


def fdiv(x, y): return x / y


def int_or_float(name, int_fn, float_fn):
  return (lambda *xs: float_arith(name, float_fn, *xs)) if DTYPES[name].cls == "float" else (lambda *xs: wrap(int_fn(*xs), name))


def oracle(op, name):
  """An independent definition of op in dtype `name` on Python values (None: tolerance-checked)."""
  fl = DTYPES[name].cls == "float"
  table = {
    "ADD": int_or_float(name, lambda a, b: a + b, lambda a, b: a + b),
    "SUB": int_or_float(name, lambda a, b: a - b, lambda a, b: a - b),
    "MUL": int_or_float(name, lambda a, b: a * b, lambda a, b: a * b),
    "NEG": (lambda a: -a) if fl else (lambda a: wrap(-a, name)),
    "MULACC": (lambda a, b, c: float_arith(name, lambda x, y: x + y, float_arith(name, lambda x, y: x * y, a, b), c)) if fl
              else (lambda a, b, c: wrap(a * b + c, name)),
    "DIV": lambda a, b: float_arith(name, fdiv, a, b),
    "RECIP": lambda a: float_arith(name, lambda x: fdiv(1, x), a),
    "SQRT": lambda a: sqrt_exact(a, name),
    "TRUNC": lambda a: a if not finite(a) else math.copysign(float(math.trunc(a)), a),
    "MAX": (lambda a, b: b if a < b else a) if fl else fmax,   # decision max-nan: Python's max, tinygrad's (a<b)?b:a
    "IDIV": lambda a, b: idiv(a, b, name), "MOD": lambda a, b: mod(a, b, name),
    "SHL": lambda a, b: shl(a, b, name), "SHR": lambda a, b: shr(a, b, name),
    "XOR": lambda a, b: a ^ b, "OR": lambda a, b: a | b, "AND": lambda a, b: a & b,
    "CMPLT": lambda a, b: a < b, "CMPNE": lambda a, b: a != b, "CMPGT": lambda a, b: a > b,
    "CMPGE": lambda a, b: not a < b, "CMPLE": lambda a, b: not b < a, "CMPEQ": lambda a, b: a == b,   # seed 001: NOT(a < b)
    "NOT": lambda a: not a,
    "EXP2": None, "LOG2": None, "SIN": None, "POW": None,
  }
  return table[op]


TRANSCENDENTAL = {"EXP2": lambda x: 2.0 ** x, "LOG2": lambda x: math.log2(x), "SIN": math.sin, "POW": lambda a, b: a ** b}
SPECIAL_OPS = ("WHERE", "CAST", "THREEFRY")   # tested on their own below


def test_every_elementwise_op_has_an_oracle():
  for op in ELEMENTWISE:
    assert op in SPECIAL_OPS or op in TRANSCENDENTAL or oracle(op, "float32" if "float32" in allowed(op) else allowed(op)[0]) is not None, op


# ------------------------------------------------------------------ running
def run_op(op, dtypes, columns, arg=None):
  """Evaluate op on BUFFER inputs (one per column) and return the result array."""
  b = Builder()
  n = len(columns[0])
  bufs = [b.buffer((n,), dt, k) for k, dt in enumerate(dtypes)]
  b.add(op, *bufs, arg=arg)
  arrays = {f"buf{k}": np.array(col, dtype=NP[dt]) if DTYPES[dt].cls != "float" else
            np.array([np.float64(v) for v in col]).astype(NP[dt]) for k, (dt, col) in enumerate(zip(dtypes, columns))}
  return evaluate(b.graph(), arrays)["out0"]


def same(got, want) -> bool:
  if isinstance(want, float):
    got = float(got)
    if math.isnan(want): return math.isnan(got)
    return got == want and math.copysign(1, got) == math.copysign(1, want)
  return got == want


def python_value(x, name):
  cls = DTYPES[name].cls
  if cls == "bool": return bool(x)
  if cls == "float": return float(np.asarray(x).astype(np.float64))
  return int(x)


def ulp_distance(a: float, b: float, name) -> float:
  """Representable values between a and b (both representable in `name`; ±0 count as one)."""
  if math.isnan(a) or math.isnan(b): return 0.0 if math.isnan(a) and math.isnan(b) else math.inf
  w = DTYPES[name].itemsize * 8
  def ordinal(x):
    bits = int(np.array(x, np.float64).astype(NP[name]).view(np.dtype(f"u{w // 8}")))
    mag = bits & ((1 << (w - 1)) - 1)
    return -mag if bits >> (w - 1) else mag
  return abs(ordinal(a) - ordinal(b))


CASES = [(op, dt) for op in ELEMENTWISE if op not in SPECIAL_OPS for dt in allowed(op)]


@pytest.mark.parametrize("op,dt", CASES, ids=[f"{o}-{d}" for o, d in CASES])
def test_op_in_dtype_on_edge_values(op, dt):
  nsrc = len(T.ops[op].slots)
  vals = edges(dt)
  combos = list(itertools.product(vals, repeat=nsrc)) if nsrc < 3 else [(a, b, c) for a, b in itertools.product(vals, repeat=2) for c in vals[::5]]
  columns = list(zip(*combos))
  got = run_op(op, [dt] * nsrc, columns)
  out_dt = "bool" if got.dtype == np.bool_ else dt
  fn = oracle(op, dt)
  bad = []
  for k, args in enumerate(combos):
    g = python_value(got[k], out_dt)
    if fn is not None:
      want = held(fn(*args), out_dt)
      if not same(g, want): bad.append((args, g, want))
      continue
    want = transcendental_want(op, dt, args)
    tol = tolerance_ulp(op, dt)
    if want is None: continue   # outside the domain the tables bound
    if isinstance(want, tuple):   # special value: exact
      if not same(g, held(want[0], dt)): bad.append((args, g, held(want[0], dt)))
    elif ulp_distance(g, want, dt) > tol: bad.append((args, g, want))
  assert not bad, f"{op} {dt}: {len(bad)} wrong, e.g. {bad[:5]}"


def tolerance_ulp(op, dt):
  t = T.tolerances.get(op, {}).get("ulp", 0)
  return t.get(dt, max(t.values())) if isinstance(t, dict) else t


def c99_pow(a, b):
  """pow's value on special operands, C99 Annex F: math.pow, whose ValueError for a zero
  base and a negative exponent is C99's pole (±inf, the sign of zero for an odd integer
  exponent), and NaN for a negative base with a non-integer exponent."""
  try: return math.pow(a, b)
  except ValueError:
    if a == 0: return math.copysign(math.inf, a) if b == math.trunc(b) and int(b) % 2 else math.inf
    return math.nan
  except OverflowError: return math.inf if a > 0 or int(b) % 2 == 0 else -math.inf


def transcendental_want(op, dt, args):
  """(exact special value,) for special operands, a float within tolerance otherwise, or
  None outside the op's bounded domain."""
  fn = TRANSCENDENTAL[op]
  pow_special = op == "POW" and finite(*args) and (args[0] == 0 or args[1] == 0 or args[0] == 1 or (args[0] < 0 and args[1] != math.trunc(args[1])))
  if not finite(*args) or (op == "LOG2" and args[0] <= 0) or pow_special:
    x = [np.float64(a) for a in args]
    with np.errstate(all="ignore"):   # C99 Annex F's special values (decision pow-domain): Python's math.pow
      v = {"EXP2": lambda: np.exp2(x[0]), "LOG2": lambda: np.log2(x[0]), "SIN": lambda: np.sin(x[0]),
           "POW": lambda: c99_pow(*args)}[op]()
    return (round_special(float(v), dt),)
  if op == "SIN" and abs(args[0]) > 1e4: return None
  if op == "POW":   # a negative base with an integer exponent: the signed power of |a|
    if abs(args[1] * math.log2(abs(args[0]))) >= 64: return None
    sign = -1.0 if args[0] < 0 and int(args[1]) % 2 else 1.0
    return round_special(sign * math.pow(abs(args[0]), args[1]), dt)
  try: v = fn(*args)
  except OverflowError: return (DTYPES[dt].normal_range[1] if DTYPES[dt].saturate else math.inf,)   # a float8 saturates (fp8-convert)
  return round_special(v, dt)


# ------------------------------------------------------------------ WHERE, CAST, BITCAST, THREEFRY
@pytest.mark.parametrize("pdt", allowed("WHERE", 0))
def test_where_condition_of_every_dtype(pdt):
  assert pdt == "bool"   # decision where-cond: a bool, as tinygrad 0.14 requires
  conds = edges(pdt)
  got = run_op("WHERE", [pdt, "float32", "float32"], [conds, [1.0] * len(conds), [2.0] * len(conds)])
  want = [1.0 if c else 2.0 for c in conds]
  assert got.tolist() == want


@pytest.mark.parametrize("adt", allowed("WHERE", 1))
def test_where_values_of_every_dtype(adt):
  vals = edges(adt)
  got = run_op("WHERE", ["bool", adt, adt], [[k % 2 == 0 for k in range(len(vals))], vals, vals[::-1]])
  want = [a if k % 2 == 0 else b for k, (a, b) in enumerate(zip(vals, vals[::-1]))]
  assert all(same(python_value(g, adt), w) for g, w in zip(got, want))


def cast_oracle(x, src, dst):
  s, d = DTYPES[src], DTYPES[dst]
  if d.cls == "bool": return bool(x != 0 or (isinstance(x, float) and math.isnan(x)))
  if s.cls == "bool": x = int(x)
  if d.cls == "float":
    if isinstance(x, float) and not finite(x): return x
    return round_special(float(x), dst) if isinstance(x, float) and x == 0 else round_to(Fraction(x), dst)
  if isinstance(x, float):   # decision cast-float-int: truncate, wrap; NaN and ±inf give 0 (ECMAScript's ToInt32)
    return 0 if not finite(x) else wrap(math.trunc(x), dst)
  return wrap(x, dst)


CASTS = [(s, d) for s in allowed("CAST") for d in allowed("CAST")]


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{s}-{d}" for s, d in CASTS])
def test_cast(src, dst):
  vals = edges(src)
  if DTYPES[src].cls == "float" and DTYPES[dst].cls == "int":
    lim = DTYPES[dst]
    vals = vals + [v for v in (float(lim.max) + 1, float(lim.min) - 1, float(lim.max), float(lim.min), 2.0 ** 63, 2.0 ** 64) if _representable(v, src)]
  got = run_op("CAST", [src], [vals], arg=dst)
  want = [held(cast_oracle(x, src, dst), dst) for x in vals]
  bad = [(x, python_value(g, dst), w) for x, g, w in zip(vals, got, want) if not same(python_value(g, dst), w)]
  assert not bad, bad[:5]


def test_cast_rounds_wide_integers_once_to_bfloat16():
  # 2^60 + 2^52 + 1 lies just above the midpoint of two bfloat16 neighbours: float64 would round it onto the midpoint
  x = [2 ** 60 + 2 ** 52 + 1, -(2 ** 60 + 2 ** 52 + 1), 2 ** 60 + 2 ** 52]
  got = run_op("CAST", ["int64"], [x], arg="bfloat16")
  assert [float(g) for g in got.astype(np.float64)] == [round_to(Fraction(v), "bfloat16") for v in x]


BITCASTS = [(s, d) for s in allowed("BITCAST") for d in allowed("BITCAST") if DTYPES[s].itemsize == DTYPES[d].itemsize]


@pytest.mark.parametrize("src,dst", BITCASTS, ids=[f"{s}-{d}" for s, d in BITCASTS])
def test_bitcast_keeps_bits(src, dst):
  vals = edges(src)
  got = run_op("BITCAST", [src], [vals], arg=dst)
  raw = np.array([np.float64(v) for v in vals]).astype(NP[src]) if DTYPES[src].cls == "float" else np.array(vals, NP[src])
  if dst == "bool": assert got.tolist() == [b != 0 for b in raw.view(np.uint8).tolist()]
  else: assert got.tobytes() == raw.tobytes()


RESIZES = [(s, d) for s in allowed("BITCAST") for d in allowed("BITCAST") if DTYPES[s].itemsize != DTYPES[d].itemsize and "index" not in (s, d)]


@pytest.mark.parametrize("src,dst", RESIZES, ids=[f"{s}-{d}" for s, d in RESIZES])
def test_bitcast_to_another_itemsize_reads_little_endian_bytes(src, dst):
  # decision bitcast-size: the last axis rescales; bytes in order, little-endian, on any host
  a, b = DTYPES[src].itemsize, DTYPES[dst].itemsize
  n = max(a, b) // a * 3
  vals = (edges(src) * n)[:n]
  raw = np.array([np.float64(v) for v in vals]).astype(NP[src]) if DTYPES[src].cls == "float" else np.array(vals, NP[src])
  got = run_op("BITCAST", [src], [vals], arg=dst)
  le = raw.astype(raw.dtype.newbyteorder("<")) if raw.dtype.name != "bfloat16" else raw.view("<u2")
  want = np.frombuffer(le.tobytes(), dtype=np.uint8 if dst == "bool" else np.dtype(NP[dst]).newbyteorder("<") if dst != "bfloat16" else "<u2")
  assert got.shape == (n * a // b,)
  if dst == "bool": assert got.tolist() == [x != 0 for x in want.tolist()]
  else: assert got.view(np.uint8).tobytes() == want.astype(want.dtype.newbyteorder("=")).view(np.uint8).tobytes() if dst != "bfloat16" else got.view(np.uint16).tolist() == want.tolist()


# Random123's known-answer vectors for threefry2x32_20: (ctr0, ctr1, key0, key1) -> (out0, out1),
# word 0 the low half of the uint64 operands (ops.yaml semantics).
KAT = [((0, 0, 0, 0), (0x6b200159, 0x99ba4efe)),
       ((0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
       ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]


def test_threefry_known_answers():
  xs = [c0 | c1 << 32 for (c0, c1, _, _), _ in KAT]
  ks = [k0 | k1 << 32 for (_, _, k0, k1), _ in KAT]
  got = run_op("THREEFRY", ["uint64", "uint64"], [xs, ks])
  assert [(int(g) & 0xffffffff, int(g) >> 32) for g in got] == [o for _, o in KAT]
