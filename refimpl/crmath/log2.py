"""log2, correctly rounded.

Reduction: x = m 2^e with m in [sqrt(1/2), sqrt(2)); r1 = i1 / 2^8 with
i1 = rint(2^8 / m), so 1 + z1 = m r1 has |z1| <= 2^-8.5 and
log2(x) = e + T1[i1] + log2(1 + z1), T1[i] = -log2(i / 2^8) (consts.log2_tables). The
division is IEEE (correctly rounded), so the table index is the same everywhere. Near
x = 1, e = 0 and r1 = 1, so the result is log2(1 + z1) alone, with full relative
accuracy.

Tier 1 (float64, m of at most 24 bits, so m r1 - 1 is exact): log2(1 + z1) by its
degree-7 Taylor polynomial (truncation < 2^-62 relative). Tier 2 (double-double): a
second reduction r2 = i2 / 2^16 ~ 1 / (1 + z1) leaves |z2| <= 2^-16.99, then
ln(1 + z2) = z - z^2/2 + z^3/3 - z^4/4 + z^5/5 - z^6/6 (truncation < 2^-104 relative),
with z^2 and z^3/3 in double-double, times 1/ln2 in double-double. `core2` is also the
logarithm of pow, which needs its relative error well below 2^-90.

Errors, measured against mpmath (bench/bench_crmath.py --errors: per tier 10^6 random
arguments, 10^5 near 1 and near the table's index boundaries) and claimed, relative:
  tier 1: measured max 2^-52.0, claimed 2^-45
  tier 2: measured max 2^-103.5, claimed 2^-85 for log2 itself; pow counts on < 2^-100
"""
from __future__ import annotations
import math
import numpy as np
from . import consts, exact
from .dd import fast_two_sum, split, two_prod, two_sum
from .engine import by_case, elementwise, solve, tier

EPS1, EPS2 = math.ldexp(1.0, -45), math.ldexp(1.0, -85)
SQRT_HALF = float.fromhex("0x1.6a09e667f3bcdp-1")   # any fixed split point near sqrt(1/2) works
_C = [consts.log2_taylor(i)[0] for i in range(1, 8)]
_QUARTER, _FIFTH, _SIXTH = -0.25, 1 / 5, 1 / 6     # IEEE division: the nearest doubles


def reduce(x):
  """(m, e, i1): x = m 2^e, m in [sqrt(1/2), sqrt(2)), e as float64, i1 = rint(2^8/m)."""
  m, e = np.frexp(x)                        # m in [0.5, 1)
  low = m < SQRT_HALF
  m = np.where(low, 2.0 * m, m)
  e = (e - low).astype(np.float64)
  return m, e, np.rint(256.0 / m)


def table1(i1):
  hi, lo = consts.log2_tables()[0]
  i = i1.astype(np.intp) - consts.LOG_R1[0]
  return np.take(hi, i), np.take(lo, i)


def series_tail(z):
  """(log2(1 + z) - z/ln2) / z^2 for |z| <= 2^-8.5, Horner in float64."""
  _, c2, c3, c4, c5, c6, c7 = _C
  return c2 + z * (c3 + z * (c4 + z * (c5 + z * (c6 + z * c7))))


def core1(x):
  """log2(x) in float64, |error| < EPS1 |result|, for x > 0 with at most 24 bits."""
  m, e, i1 = reduce(x)
  z = m * (i1 * (1.0 / 256)) - 1.0                 # exact: 33 bits, then Sterbenz
  t_hi, t_lo = table1(i1)
  return (e + t_hi) + (t_lo + z * (_C[0] + z * series_tail(z)))


def _second_reduction(m, i1):
  """(z2h, z2l, i2): m r1 r2 = 1 + z2h + z2l (error < 2^-113), |z2| <= 2^-16.99."""
  r1 = i1 * (1.0 / 256)
  mh, ml = split(m)
  z1h, z1l = two_sum(mh * r1 - 1.0, ml * r1)       # exact: mh r1 has <= 35 bits, ml r1 <= 36
  i2 = np.rint(65536.0 / (1.0 + z1h))
  r2 = i2 * (1.0 / 65536)
  zh, zl = split(z1h)
  # (r2 - 1) + zh r2 is exact: when r2 != 1, |z1h| >= 2^-18, so both terms are multiples
  # of 2^(exponent(z1h) - 42) and their sum is below 2^-16
  s, err = two_sum((r2 - 1.0) + zh * r2, zl * r2)
  z2h, z2l = fast_two_sum(s, err + z1l * r2)
  return z2h, z2l, i2


def _ln1p(zh, zl):
  """ln(1 + z) for |z| <= 2^-16.99 as a double-double, relative error < 2^-104."""
  qh, ql = two_prod(zh, zh)                         # z^2
  ql = ql + 2.0 * zh * zl
  ch, cl = two_prod(zh, qh)                         # z^3
  cl = cl + (zh * ql + zl * qh)
  th, tl = two_prod(ch, consts.THIRD[0])            # z^3 / 3
  tl = tl + (ch * consts.THIRD[1] + cl * consts.THIRD[0])
  tail = (qh * qh) * (_QUARTER + zh * (_FIFTH - zh * _SIXTH))
  s, e1 = fast_two_sum(zh, -0.5 * qh)
  s, e2 = fast_two_sum(s, th)
  return fast_two_sum(s, e1 + e2 + (zl - 0.5 * ql + tl + tail))


def core2(x):
  """(hi, lo): log2(x) as a double-double, relative error < EPS2, for x > 0 finite."""
  m, e, i1 = reduce(x)
  z2h, z2l, i2 = _second_reduction(m, i1)
  sh, sl = _ln1p(z2h, z2l)
  uh, ul = two_prod(sh, consts.INVLN2[0])
  ul = ul + (sh * consts.INVLN2[1] + sl * consts.INVLN2[0])
  t1h, t1l = table1(i1)
  t2h, t2l = consts.log2_tables()[1]
  j = i2.astype(np.intp) - consts.LOG_R2[0]
  a, ea = two_sum(e, t1h)
  a, eb = two_sum(a, np.take(t2h, j))
  a, ec = two_sum(a, uh)
  return fast_two_sum(a, ea + eb + ec + (t1l + np.take(t2l, j) + ul))


def approx1(x):
  y = core1(x)
  return y, 0.0, 0, EPS1 * np.abs(y)


def approx2(x):
  hi, lo = core2(x)
  return hi, lo, 0, EPS2 * np.abs(hi)


TIERS = (tier(approx1), tier(approx2))


@elementwise
def log2(x, f):
  """log2(x) correctly rounded to f: log2(±0) = -inf, log2(x < 0) = NaN,
  log2(+inf) = +inf, log2(1) = +0, NaN stays NaN. The results need no scaling:
  1.4e-16 < |log2 x| <= 1075 for x != 1, well inside float64's normal range."""
  special = lambda v: np.where(v == 0, -np.inf, np.where(v == 1, 0.0, np.where(v == np.inf, v, np.nan)))
  ordinary = (x > 0) & (x < np.inf) & (x != 1)
  return by_case(ordinary, lambda v: solve("log2", [v], f, TIERS, exact.log2), special, x)
