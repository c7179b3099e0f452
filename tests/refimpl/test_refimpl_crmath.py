"""refimpl/crmath: correctly rounded exp2, log2, sin, pow, bit for bit against mpmath.

The reference here is independent of the package: mpmath at 320 bits (exact where the
value is rational), rounded to the format with Fraction arithmetic and Python's
round-half-even, and C99 Annex F's special cases written out from the standard's text.

exp2, log2 and sin are checked on all 65536 patterns of float16 and bfloat16 (about 12 s
in all), on random and dense samples in float32 and float64; TINYSPEC_SLOW=1 makes the
random samples ten times larger.
"""
from __future__ import annotations
import importlib
import math
import os
import re
import warnings
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from tinyspec.refimpl import crmath
from tinyspec.refimpl.crmath import consts, engine, exact

MODULES = {n: importlib.import_module(f"tinyspec.refimpl.crmath.{n}") for n in ("exp2", "log2", "sin", "pow")}
SCALE = 10 if os.environ.get("TINYSPEC_SLOW") == "1" else 1
FMT = {"float16": (11, -14, 15), "bfloat16": (8, -126, 127), "float32": (24, -126, 127), "float64": (53, -1022, 1023)}
NAN = float("nan")
INF = math.inf

# ------------------------------------------------------------------ the reference
_mp = mpmath.MPContext()
PREC = 320


def frac(v) -> Fraction:
  man, exp = v.man_exp
  return Fraction(-man if v < 0 else man) * Fraction(2) ** exp


def ref_round(q: Fraction, fmt: str) -> float:
  """q rounded to nearest, ties to even, in fmt (subnormals, overflow, signed zero)."""
  p, emin, emax = FMT[fmt]
  s = -1.0 if q < 0 else 1.0
  q = abs(q)
  if q == 0: return s * 0.0
  e = q.numerator.bit_length() - q.denominator.bit_length()
  if Fraction(2) ** e > q: e -= 1
  quantum = Fraction(2) ** (max(e, emin) - p + 1)
  r = round(q / quantum) * quantum
  return s * INF if r >= Fraction(2) ** (emax + 1) else s * float(r)


def _at(prec, fn):
  _mp.prec = prec
  return fn(_mp)


def ref_exp2(x):
  if math.isnan(x): return NAN
  if x >= 1100: return INF
  if x <= -1200: return 0.0
  return frac(_at(PREC, lambda m: m.power(2, m.mpf(x))))


def ref_log2(x):
  if math.isnan(x) or x < 0: return NAN
  if x == 0: return -INF
  if x == INF: return INF
  return frac(_at(PREC, lambda m: m.log(m.mpf(x), 2)))


def ref_sin(x):
  if not math.isfinite(x): return NAN
  if x == 0: return x
  return frac(_at(PREC, lambda m: m.sin(m.mpf(x))))


def _odd(b):
  return math.isfinite(b) and b == math.floor(b) and abs(b) < 2 ** 53 and int(b) % 2 == 1


def ref_pow(a, b):
  """C99 F.9.4.4's special cases, then the real power."""
  odd = _odd(b)
  if b == 0 or a == 1: return 1.0
  if math.isnan(a) or math.isnan(b): return NAN
  if a == 0:
    if b < 0: return math.copysign(INF, a) if odd else INF
    return a if odd else 0.0
  if math.isinf(b):
    if a == -1: return 1.0
    return INF if (abs(a) < 1) == (b < 0) else 0.0
  if math.isinf(a):
    if a > 0: return INF if b > 0 else 0.0
    if b > 0: return -INF if odd else INF
    return -0.0 if odd else 0.0
  if a < 0 and b != math.floor(b): return NAN
  sign = -1 if (a < 0 and odd) else 1
  return sign * _power(Fraction(abs(a)), b)


def _power(A: Fraction, b: float):
  """A^b for A > 0: inf or 0 far beyond the range, exact for small integer b and for
  the exact fractional powers, else mpmath with enough bits for |b log A|."""
  t = _at(64, lambda m: m.mpf(b) * m.log(m.mpf(A.numerator) / A.denominator, 2))
  if abs(t) > 1200: return INF if t > 0 else 0.0
  if b == math.floor(b) and abs(b) <= 64: return A ** int(b)
  extra = max(0, math.frexp(b)[1]) + 20
  v = frac(_at(PREC + extra, lambda m: m.exp(m.mpf(b) * m.log(m.mpf(A.numerator) / A.denominator))))
  n, d = Fraction(b).as_integer_ratio()                # b = n / 2^j
  if d <= 64 and abs(n) <= 512 and v != 0:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    c = Fraction(round(v * Fraction(2) ** (200 - e)), 2 ** 200) * Fraction(2) ** e   # v to ~200 bits
    if c ** d == A ** n: return c
  return v


REF = {"exp2": ref_exp2, "log2": ref_log2, "sin": ref_sin, "pow": ref_pow}


def reference(name, flat_args, fmt):
  out = []
  for xs in zip(*flat_args):
    v = REF[name](*map(float, xs))
    out.append(ref_round(v, fmt) if isinstance(v, Fraction) else v)
  return np.array(out, dtype=np.float64)


def check(name, args, fmt):
  """crmath's result is bit-equal to the reference (any NaN matching any NaN)."""
  args = [np.asarray(a, dtype=np.float64) for a in args]
  shape = np.broadcast_shapes(*[a.shape for a in args])
  flat = [np.broadcast_to(a, shape).ravel() for a in args]
  got = getattr(crmath, name)(*args, fmt=fmt).ravel()
  want = reference(name, flat, fmt)
  same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
  if not same.all():
    rows = [f"{tuple(float(a[i]).hex() for a in flat)}: got {got[i]!r} want {want[i]!r}"
            for i in np.flatnonzero(~same)[:8]]
    pytest.fail(f"{name} {fmt}: {int((~same).sum())} of {same.size} differ\n" + "\n".join(rows))


# ------------------------------------------------------------------ inputs
def all_patterns(fmt):
  """Every 16-bit pattern of float16 / bfloat16 as float64."""
  bits = np.arange(1 << 16, dtype=np.uint32)
  with np.errstate(invalid="ignore"):                 # NaN patterns
    if fmt == "float16": return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    return (bits << 16).view(np.float32).astype(np.float64)


def rand_bits(rng, n, fmt):
  """n finite values of fmt uniform in bits (float32 for the narrow formats, rounded)."""
  if fmt == "float64":
    x = rng.integers(0, 1 << 64, n, dtype=np.uint64).view(np.float64)
  else:
    with np.errstate(invalid="ignore"):               # NaN patterns
      x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32).astype(np.float64)
    x = crmath.round_to(x, fmt)
  return x[np.isfinite(x)]


def steps(centers, fmt, count):
  """Values of fmt at k = -count..count quanta of fmt from each center."""
  p, emin, _ = FMT[fmt]
  c = crmath.round_to(np.asarray(centers, dtype=np.float64), fmt)
  _, e = np.frexp(np.abs(c))
  quantum = np.ldexp(1.0, np.maximum(e - p, emin - p + 1))
  k = np.arange(-count, count + 1)
  return crmath.round_to((c[:, None] + k[None, :] * quantum[:, None]).ravel(), fmt)


# ------------------------------------------------------------------ formats and rounding
def test_formats():
  for name, (p, emin, emax) in FMT.items():
    f = crmath.FORMATS[name]
    assert (f.p, f.emin, f.emax) == (p, emin, emax)


@pytest.mark.parametrize("fmt", list(FMT))
def test_round_to(fmt):
  rng = np.random.default_rng(1)
  p, emin, emax = FMT[fmt]
  x = rng.integers(0, 1 << 64, 3000, dtype=np.uint64).view(np.float64)
  x = np.concatenate([x[np.isfinite(x)], np.ldexp(rng.uniform(-2, 2, 2000), rng.integers(emin - p - 3, emax + 2, 2000))])
  ties = np.ldexp(2.0 * rng.integers(2 ** (p - 1), 2 ** p, 500) + 1, rng.integers(emin - p - 1, emax - p + 1, 500) - 1)
  overflow = (2.0 - 2.0 ** -p) * 2.0 ** emax      # max + ulp(max)/2: a tie, to the even inf
  x = np.concatenate([x, ties, -ties, [overflow, -overflow, np.nextafter(overflow, 0), 2.0 ** (emin - p), 0.0, -0.0, INF]])
  got = crmath.round_to(x, fmt)
  want = np.array([ref_round(Fraction(v), fmt) if math.isfinite(v) and v != 0 else v for v in x])
  assert (got.view(np.uint64) == want.view(np.uint64)).all()
  assert np.isnan(crmath.round_to(NAN, fmt))
  if fmt == "float32":                               # the hardware conversion agrees
    y = x[np.abs(x) < 1e38]
    assert (crmath.round_to(y, fmt) == y.astype(np.float32).astype(np.float64)).all()


def test_round_dyadic_matches_reference():
  rng = np.random.default_rng(2)
  for fmt in FMT:
    f = crmath.FORMATS[fmt]
    for _ in range(400):
      man = int(rng.integers(-(1 << 62), 1 << 62)) | 1 if rng.random() < 0.5 else int(rng.integers(1, 1 << 12))
      exp = int(rng.integers(-1200, 1100))
      assert exact.round_dyadic(man, exp, f) == ref_round(Fraction(man) * Fraction(2) ** exp, fmt)
    assert exact.round_dyadic(1, -10 ** 6, f) == 0.0 and exact.round_dyadic(-1, 10 ** 6, f) == -INF


# ------------------------------------------------------------------ exp2, log2, sin
@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["exp2", "log2", "sin"])
def test_narrow_formats_exhaustive(name, fmt):
  check(name, [all_patterns(fmt)], fmt)


HARD32 = {   # all the float32 arguments where tier 1's plain rounding is wrong (full scans)
  "exp2": [float.fromhex("0x1.853a6ep-9"), float.fromhex("-0x1.e7526ep-6")],
  "log2": [],
  "sin": [float.fromhex("0x1.33333p+13"), float.fromhex("0x1.95f654p+44")],
}


def exp2_inputs(rng, fmt):
  p, emin, emax = FMT[fmt]
  x = rand_bits(rng, 2500 * SCALE, fmt)
  domain = crmath.round_to(rng.uniform(emin - p, emax + 1, 2500 * SCALE), fmt)
  integers = np.arange(emin - p - 2, emax + 3, dtype=np.float64)
  near = steps(np.concatenate([integers[::7], [emin - p, emin - p + 1, emin, emax, emax + 1, 0.0]]), fmt, 3)
  tiny = np.ldexp(rng.uniform(-1, 1, 300), rng.integers(-80, -5, 300))
  return np.concatenate([x, domain, near, crmath.round_to(tiny, fmt), [0.0, -0.0, INF, -INF, NAN]])


def log2_inputs(rng, fmt):
  p, emin, emax = FMT[fmt]
  x = np.abs(rand_bits(rng, 3000 * SCALE, fmt))
  powers = np.ldexp(1.0, np.arange(emin - p + 1, emax + 1))
  near = steps(np.concatenate([[1.0, 2.0, 0.5], powers[::9]]), fmt, 3)
  near1 = 1 + rng.uniform(-1, 1, 400) * np.exp2(rng.uniform(-p - 1, -3, 400))
  sub = np.ldexp(rng.uniform(0, 1, 200), emin)
  edges = 256.0 / (rng.integers(182, 362, 300) + 0.5)      # the table's index boundaries
  return np.concatenate([x, near, crmath.round_to(np.concatenate([near1, sub, edges]), fmt),
                         [0.0, -0.0, -1.0, INF, -INF, NAN, 2.0 ** (emin - p + 1)]])


def sin_inputs(rng, fmt):
  p, emin, emax = FMT[fmt]
  x = rand_bits(rng, 3000 * SCALE, fmt)
  k = np.concatenate([np.arange(1, 200), rng.integers(1, 1 << 40, 300).astype(np.float64)])
  near = steps(k * (np.pi / 2), fmt, 2)
  turns = steps(np.arange(1, 4096) * (np.pi / 2048), fmt, 1)[::3]
  huge = [1e300, 2.0 ** 1023, np.finfo(np.float64).max, 6381956970095103 * 2.0 ** 797, 1e22, 2.0 ** 127,
          float(np.finfo(np.float32).max), 1e38, 5.0e9, 2.0 ** 64]
  small = np.ldexp(rng.uniform(-1, 1, 300), rng.integers(-40, -5, 300))
  sub = np.ldexp(rng.uniform(-1, 1, 100), emin)
  return np.concatenate([x, near, turns, crmath.round_to(np.concatenate([huge, small, sub]), fmt),
                         [0.0, -0.0, INF, -INF, NAN, 2.0 ** (emin - p + 1)]])


INPUTS = {"exp2": exp2_inputs, "log2": log2_inputs, "sin": sin_inputs}


@pytest.mark.parametrize("fmt", ["float32", "float64"])
@pytest.mark.parametrize("name", ["exp2", "log2", "sin"])
def test_wide_formats(name, fmt):
  rng = np.random.default_rng({"exp2": 10, "log2": 11, "sin": 12}[name] + (fmt == "float64"))
  x = INPUTS[name](rng, fmt)
  if fmt == "float32": x = np.concatenate([x, HARD32[name]])
  check(name, [x], fmt)


# ------------------------------------------------------------------ pow
MIDPOINTS = [   # (a, b, fmt): exact results and exact midpoints (ties to even)
  (9.0, 0.5, "float32"), (4.0, 1.5, "float64"), (4.0, 1.5, "float16"), (1 + 2.0 ** -12, 2.0, "float32"),
  (4097.0, 2.0, "float32"), (47.0, 2.0, "float16"), (17.0, 2.0, "bfloat16"), (21.0, 2.0, "bfloat16"),
  (13.0, 3.0, "float16"), (15.0, 3.0, "float16"), (169.0, 1.5, "float16"), (225.0, 1.5, "float16"),
  (3.0, 34.0, "float64"), (-3.0, 34.0, "float64"), (-3.0, 35.0, "float64"), (94906267.0, 2.0, "float64"),
  (0.09375, 5.0, "float16"), (3 * 2.0 ** -75, 2.0, "float32"), (3 * 2.0 ** -215, 5.0, "float64"),
  (2.0, -1075.0, "float64"), (2.0, -1074.0, "float64"), (2.0, -25.0, "float16"), (2.0, -24.5, "float16"),
  (0.25, 0.5, "float32"), (2.0 ** -100, -0.25, "float32"), (1.5, 3.0, "bfloat16"), (-1.5, 3.0, "bfloat16"),
  (6.25, 0.5, "float32"), (6.25, 1.5, "float32"), (6.25, -0.5, "float32"), (81.0, 0.25, "float64"),
  (81.0, 0.75, "float64"), (65536.0, 0.0625, "float16"), (2.0 ** 64, -0.015625, "float32"),
  (-2.0, 3.0, "float32"), (-2.0, -3.0, "float32"), (-0.5, 2.0 ** 53, "float64"), (-0.5, -(2.0 ** 53) - 2, "float64"),
  (2.0, 1024.0, "float64"), (2.0, 1023.5, "float64"), (2.0, 16.0, "float16"), (2.0, 15.99, "float16"),
  (255.0, 2.0, "bfloat16"), (2049.0, 2.0, "float16"), (3.0, -1.0, "float32"), (10.0, -1.0, "float64"),
  (49.0, 1.5, "bfloat16"), (66049.0, 1.5, "float32"), (43291044225.0, 1.5, "float64"),   # s^3 ties
]


def test_pow_exact_and_midpoints():
  engine.reset_stats()
  for a, b, fmt in MIDPOINTS:
    check("pow", [a, b], fmt)
  assert engine.stats().get(("pow", "exact"), 0) >= 15    # the ties reach the fallback
  assert crmath.pow(1 + 2.0 ** -12, 2.0, fmt="float32") == 1 + 2.0 ** -11           # tie, to even
  assert crmath.pow(169.0, 1.5, fmt="float16") == 2196.0                            # 2197 is a tie
  assert crmath.pow(3.0, 34.0, fmt="float64") == 16677181699666568.0                # 3^34 is a tie
  assert crmath.pow(3 * 2.0 ** -75, 2.0, fmt="float32") == 4 * 2.0 ** -149          # 4.5 quanta -> 4
  assert crmath.pow(66049.0, 1.5, fmt="float32") == 16974592.0                      # 257^3 is a tie


def pow_inputs(rng, fmt, n):
  p, emin, emax = FMT[fmt]
  a = np.abs(rand_bits(rng, n, fmt))
  a = a[(a > 0) & (a != 1)]
  with np.errstate(all="ignore"):
    la = np.log2(a)                                   # only to aim t = b log2 a (test input generation)
    t = rng.uniform(emin - p - 4, emax + 2, a.size)
    b = crmath.round_to(t / la, fmt)
    edge_t = rng.choice([emin - p - 1, emin - p, emin, emax + 1], a.size) + rng.uniform(-0.01, 0.01, a.size)
    b_edge = crmath.round_to(edge_t / la, fmt)
  b_int = rng.integers(-40, 41, a.size).astype(np.float64)
  neg = -np.abs(rand_bits(rng, n, fmt))[: a.size]
  b_rand = rand_bits(rng, a.size, fmt)
  A = np.concatenate([a, a, a, neg, neg, a[: b_rand.size]])
  B = np.concatenate([b, b_edge, b_int, b_int[: neg.size], crmath.round_to(b[: neg.size], fmt), b_rand])
  keep = np.isfinite(B)
  return A[keep], B[keep]


@pytest.mark.parametrize("fmt", list(FMT))
def test_pow_random(fmt):
  rng = np.random.default_rng({"float16": 20, "bfloat16": 21, "float32": 22, "float64": 23}[fmt])
  check("pow", list(pow_inputs(rng, fmt, 500 * SCALE)), fmt)


ANNEX_F = [   # (a, b, expected) straight from C99 F.9.4.4
  (0.0, -3.0, INF), (-0.0, -3.0, -INF), (0.0, -2.0, INF), (-0.0, -2.0, INF), (-0.0, -0.5, INF),
  (-0.0, -INF, INF), (0.0, 3.0, 0.0), (-0.0, 3.0, -0.0), (-0.0, 2.0, 0.0), (-0.0, 0.5, 0.0), (-0.0, INF, 0.0),
  (-1.0, INF, 1.0), (-1.0, -INF, 1.0), (1.0, NAN, 1.0), (1.0, INF, 1.0), (1.0, -INF, 1.0), (NAN, 0.0, 1.0),
  (NAN, -0.0, 1.0), (INF, 0.0, 1.0), (-2.0, 0.5, NAN), (-2.0, -1.5, NAN), (0.5, -INF, INF), (-0.5, -INF, INF),
  (2.0, -INF, 0.0), (-2.0, -INF, 0.0), (0.5, INF, 0.0), (-0.5, INF, 0.0), (2.0, INF, INF), (-2.0, INF, INF),
  (-INF, -3.0, -0.0), (-INF, -2.0, 0.0), (-INF, -0.5, 0.0), (-INF, 3.0, -INF), (-INF, 2.0, INF), (-INF, 0.5, INF),
  (INF, -1.0, 0.0), (INF, 0.5, INF), (NAN, 1.0, NAN), (2.0, NAN, NAN), (-1.0, NAN, NAN), (-1.0, 3.0, -1.0),
  (-1.0, 2.0 ** 60, 1.0), (-2.0, 2.0 ** 70, INF), (-0.5, 2.0 ** 70, 0.0), (-2.0, -(2.0 ** 70), 0.0),
  (1.5, 2.0 ** 80, INF), (1.5, -(2.0 ** 80), 0.0), (-2.0, 3.0, -8.0), (-2.0, 2.0, 4.0),
]


@pytest.mark.parametrize("fmt", list(FMT))
def test_pow_annex_f(fmt):
  a, b, want = (np.array(c) for c in zip(*ANNEX_F))
  got = crmath.pow(a, b, fmt=fmt)
  same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
  assert same.all(), [(x, y, g, w) for x, y, g, w, s in zip(a, b, got, want, same) if not s]
  check("pow", [a, b], fmt)                           # the reference agrees with the table


# ------------------------------------------------------------------ the exact fallback
@pytest.mark.parametrize("fmt", ["float16", "float32", "float64"])
def test_fallback_alone(monkeypatch, fmt):
  """With no tier at all, every element goes through mpmath (Ziv) and still matches."""
  rng = np.random.default_rng(30)
  p, emin, emax = FMT[fmt]
  for mod in MODULES.values():
    monkeypatch.setattr(mod, "TIERS", ())
  engine.reset_stats()
  n = 50 if fmt == "float64" else 80
  check("exp2", [crmath.round_to(rng.uniform(emin - p, emax + 1, n), fmt)], fmt)
  check("log2", [crmath.round_to(np.exp2(rng.uniform(emin - p, emax, n)), fmt)], fmt)
  sin_x = rng.choice([-1, 1], n) * np.exp2(rng.uniform(emin - p, min(emax, 200), n))
  check("sin", [crmath.round_to(np.concatenate([sin_x, [1e300, 3.0e38, 1e4, 355.0]]), fmt)], fmt)
  a = crmath.round_to(rng.choice([-1, 1], n) * np.exp2(rng.uniform(-4, 4, n)), fmt)
  b = crmath.round_to(np.where(a < 0, rng.integers(-9, 10, n), rng.uniform(-9, 9, n)), fmt)
  check("pow", [np.concatenate([a, [169.0, 4097.0]]), np.concatenate([b, [1.5, 2.0]])], fmt)
  st = engine.stats()
  assert all(st.get((name, "exact"), 0) >= 0.9 * n for name in ("exp2", "log2", "sin", "pow")), st
  assert not any(k[1].startswith("tier") and v for k, v in st.items())


def test_fallback_observed_on_hard_cases():
  """Elements the tiers cannot decide (exact midpoints) are routed to mpmath."""
  engine.reset_stats()
  crmath.pow(np.array([47.0, 169.0, 13.0, 2.0]), np.array([2.0, 1.5, 3.0, 0.5]), fmt="float16")
  assert engine.stats()[("pow", "exact")] == 3 and engine.stats()[("pow", "tier1")] == 1


def test_pow_dyadic_detection():
  d = exact._pow_dyadic
  assert d(9.0, 0.5, 24) == (3, 0)
  assert d(4.0, 1.5, 24) == (1, 3)
  assert d(169.0, 1.5, 11) == (2197, 0)
  assert d(2.0 ** -100, -0.25, 24) == (1, 25)
  assert d(3.0, -1.0, 53) is None                     # 1/3 is not dyadic
  assert d(2.0, 0.5, 53) is None                      # irrational
  assert d(3.0, 40.0, 53) == (3 ** 40, 0)             # exact (64 bits), rounded exactly
  assert d(3.0, 60.0, 53) is None                     # > 54 bits: neither exact nor a midpoint
  assert d(3.0, 34.0, 53) == (3 ** 34, 0)


# ------------------------------------------------------------------ determinism, shapes
def mixed(rng, fmt):
  return np.concatenate([rand_bits(rng, 150, fmt), crmath.round_to(rng.uniform(-5, 5, 150), fmt),
                         [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0]])


@pytest.mark.parametrize("fmt", ["bfloat16", "float32", "float64"])
def test_whole_array_equals_elementwise(fmt):
  rng = np.random.default_rng(40)
  x = mixed(rng, fmt)
  y = np.roll(x, 17)
  for name in ("exp2", "log2", "sin"):
    fn = getattr(crmath, name)
    whole = fn(x, fmt=fmt)
    single = np.array([fn(v, fmt=fmt) for v in x])
    assert whole.tobytes() == single.tobytes(), name
    assert fn(x[0], fmt=fmt).shape == ()
  whole = crmath.pow(x, y, fmt=fmt)
  single = np.array([crmath.pow(u, v, fmt=fmt) for u, v in zip(x, y)])
  assert whole.tobytes() == single.tobytes()


def test_shapes_broadcast_and_chunks(monkeypatch):
  rng = np.random.default_rng(41)
  x = mixed(rng, "float32")[:300]
  flat = {n: getattr(crmath, n)(x, fmt="float32") for n in ("exp2", "log2", "sin")}
  for n, v in flat.items():
    assert getattr(crmath, n)(x.reshape(3, 10, 10), fmt="float32").tobytes() == v.tobytes()
  a, b = x[:12], x[100:107]
  grid = crmath.pow(a[:, None], b[None, :], fmt="float32")
  assert grid.shape == (12, 7)
  assert grid.tobytes() == np.array([[crmath.pow(u, v, fmt="float32") for v in b] for u in a]).tobytes()
  monkeypatch.setattr(engine, "CHUNK", 7)
  for n, v in flat.items():
    assert getattr(crmath, n)(x, fmt="float32").tobytes() == v.tobytes()
  assert crmath.pow(a[:, None], b[None, :], fmt="float32").tobytes() == grid.tobytes()


def test_no_warnings_escape():
  x = np.array([0.0, -0.0, INF, -INF, NAN, -1.0, 1e300, -1e300, 5e-324, 1e-310, 2000.0, -2000.0])
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    for fmt in FMT:
      for name in ("exp2", "log2", "sin"):
        getattr(crmath, name)(x, fmt=fmt)
      crmath.pow(x[:, None], x[None, :], fmt=fmt)
      crmath.round_to(x, fmt)


@pytest.mark.parametrize("fmt", ["bfloat16", "float32"])
def test_arguments_the_format_cannot_hold(fmt):
  """Outside the callers' contract, float64 arguments of a narrow format's function
  skip tier 1 and are still rounded correctly."""
  rng = np.random.default_rng(42)
  x = rng.uniform(-200, 200, 300) * np.exp2(rng.uniform(-30, 30, 300))
  for name in ("exp2", "log2", "sin"):
    check(name, [np.abs(x) if name == "log2" else x], fmt)
  check("pow", [np.abs(x[:100]), rng.uniform(-3, 3, 100)], fmt)


def test_unknown_format():
  with pytest.raises(ValueError):
    crmath.exp2(1.0, fmt="float8")


# ------------------------------------------------------------------ constants
def _dd(q: Fraction):
  hi = float(q)
  return hi, float(q - Fraction(hi))


def _mpdd(fn, prec=640):
  _mp.prec = prec
  return _dd(frac(fn(_mp)))


def test_constants_rederived():
  assert consts.LN2 == _mpdd(lambda m: m.ln2)
  assert consts.INVLN2 == _mpdd(lambda m: 1 / m.ln2)
  assert consts.PIO2 == _mpdd(lambda m: m.pi / 2)
  assert consts.THIRD == _dd(Fraction(1, 3)) and consts.MINUS_SIXTH == _dd(Fraction(-1, 6))
  for i in range(1, 8):
    assert consts.exp2_taylor(i) == _mpdd(lambda m: m.ln2 ** i / m.factorial(i))
    assert consts.log2_taylor(i) == _mpdd(lambda m: m.mpf((-1) ** (i + 1)) / (i * m.ln2))
    assert consts.inv_factorial(i) == float(Fraction(1, math.factorial(i)))


def test_tables_rederived():
  hi, lo = consts.exp2_table()
  want = [_mpdd(lambda m: m.exp(m.ln2 * j / 4096), 400) for j in range(4096)]
  assert hi.tolist() == [h for h, _ in want] and lo.tolist() == [l for _, l in want]
  (h1, l1), (h2, l2) = consts.log2_tables()
  for (h, l), (start, stop), scale in (((h1, l1), consts.LOG_R1, 256), ((h2, l2), consts.LOG_R2, 65536)):
    want = [_mpdd(lambda m: -m.log(m.mpf(i) / scale) / m.ln2, 400) for i in range(start, stop)]
    assert h.tolist() == [a for a, _ in want] and l.tolist() == [b for _, b in want]
  hi, lo = consts.sin_table()                          # built by symmetry from a quarter
  want = [_mpdd(lambda m: m.sinpi(m.mpf(K) / 2048), 400) for K in range(4096)]
  assert hi.tolist() == [h for h, _ in want] and lo.tolist() == [l for _, l in want]


def test_two_over_pi_rederived():
  n = consts.TWO_OVER_PI_BITS
  _mp.prec = n + 400
  want = math.floor(frac(2 / _mp.pi * _mp.mpf(2) ** n))
  assert consts.two_over_pi_bits() == want
  rows = consts.payne_hanek_rows()
  bits = format(want, f"0{n}b")                       # bit i (weight 2^-i) is bits[i - 1]
  for col in range(0, rows.shape[1], 37):
    s = col - consts.PH_PAD
    window = "".join(bits[i - 1] if i >= 1 else "0" for i in range(s, s + 32 * consts.PH_LIMBS))
    assert [int(window[32 * j: 32 * j + 32], 2) for j in range(consts.PH_LIMBS)][::-1] == rows[:, col].tolist()


def test_fast_path_uses_only_exact_operations():
  """No libm transcendental (NumPy's or math's) anywhere in the package, and no float
  power (Python's ** calls libm's pow): those can differ across hosts. Only consts.py
  (mpmath at 256 bits) and exact.py (Python integers) use **."""
  libm = re.compile(r"\bnp\.(exp|exp2|expm1|log|log2|log10|log1p|sin|cos|tan|arcsin|arccos|arctan|sinh|cosh|"
                    r"tanh|power|float_power|cbrt|hypot)\(|\bmath\.(exp|expm1|log|log2|log1p|sin|cos|tan|pow)\(")
  for path in Path(crmath.__file__).parent.glob("*.py"):
    text = path.read_text()
    assert not libm.findall(text), path.name
    if path.name not in ("consts.py", "exact.py"):
      assert "**" not in text, path.name


# ------------------------------------------------------------------ exp2's quick float32 path
def test_exp2_float32_quick_path_equals_the_cascade():
  """exp2's quick float32 path (tier 1 with a rounding test on the float64 bits) gives the
  cascade's bits on a dense sweep, the edges of its domain and every special value; the
  elements it does not decide still reach the cascade."""
  f = crmath.FORMATS["float32"]
  rng = np.random.default_rng(50)
  q0, q1 = MODULES["exp2"].QUICK
  edges = np.concatenate([[q0, q1, -126.0, -149.0, -150.0, 128.0, 127.5, 0.0, -0.0, INF, -INF, NAN, 1e-45, -1e-45, 2.0 ** -60],
                          steps([q0, q1, -126.0, 0.0, 1.0, 128.0], "float32", 40)])
  x = np.concatenate([crmath.round_to(rng.uniform(-160, 140, 60000), "float32"), rand_bits(rng, 20000, "float32"), edges, HARD32["exp2"]])
  quick = MODULES["exp2"]._float32(x, f)
  cascade = MODULES["exp2"]._any(x, f)
  assert ((quick.view(np.uint64) == cascade.view(np.uint64)) | (np.isnan(quick) & np.isnan(cascade))).all()
  check("exp2", [edges], "float32")


def test_exp2_float32_quick_path_margin_is_what_keeps_it_right(monkeypatch):
  """A planted bug: with no margin in the quick path's rounding test, the arguments where
  tier 1's plain rounding is wrong (HARD32) come out wrong -- the test above and
  test_wide_formats would catch a margin that is too small."""
  check("exp2", [HARD32["exp2"]], "float32")
  monkeypatch.setattr(MODULES["exp2"], "QUICK_MARGIN", -1)
  with pytest.raises(pytest.fail.Exception, match="2 of 2 differ"):
    check("exp2", [HARD32["exp2"]], "float32")


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_transcendental_units_piece_by_piece(monkeypatch, dt):
  """The EXP2/LOG2/SIN/POW units convert their operands to float64 a piece at a time
  (refimpl/ops/decomposed.py PIECE): broadcast, strided and spanning many pieces, the result
  is crmath's on the whole arrays, element for element, special values included."""
  from tinyspec.refimpl.ops import decomposed
  from tinyspec.refimpl.numeric import NP
  t = NP[dt]
  rng = np.random.default_rng(51)
  special = np.array([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 0.5, 3.0, -2.5, 1e-6])
  a = np.concatenate([special, rng.uniform(-30, 30, 60)]).astype(t)
  whole = np.concatenate([a, a[::-1]]).reshape(2, -1)[:, ::3]        # strided
  b = np.concatenate([special, rng.uniform(-4, 4, 18)]).astype(t)[:, None]   # broadcast against a row
  monkeypatch.setattr(decomposed, "PIECE", 7)
  for name in ("exp2", "log2", "sin"):
    got = decomposed.transcendental(getattr(crmath, name), dt, whole)
    want = getattr(crmath, name)(whole.astype(np.float64), fmt=dt).astype(t)
    assert got.shape == want.shape and got.dtype == t and np.array_equal(got, want, equal_nan=True), name
  got = decomposed.transcendental(crmath.pow, dt, b, whole[0])
  want = crmath.pow(b.astype(np.float64), whole[0].astype(np.float64), fmt=dt).astype(t)
  assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True)
  assert decomposed.transcendental(crmath.exp2, dt, np.zeros((0, 3), t)).shape == (0, 3)
  assert decomposed.transcendental(crmath.exp2, dt, np.asarray(2.0, t)) == 4.0
