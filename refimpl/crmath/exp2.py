"""exp2, correctly rounded.

Reduction: t = n / 2^12 + r with n = rint(t * 2^12), |r| <= 2^-13, so
2^t = 2^(n >> 12) * T[n & 4095] * 2^r with T[j] = 2^(j / 4096) from consts.exp2_table.
The power of two stays apart as the scale k of the rounding test.

Tier 1 (float64, inputs of at most 24 bits): 2^r - 1 by its degree-4 Taylor polynomial
(truncation < 2^-71). Tier 2 (double-double): the degree-6 Taylor polynomial
(truncation < 2^-106) with the first two terms in double-double, the table in
double-double; a low part tl of the argument (pow passes one) enters to first order.

Errors, measured against mpmath (bench/bench_crmath.py --errors: per tier 10^6 random
arguments over the whole domain plus 10^5 around the reduction boundaries |r| = 2^-13)
and claimed, relative:
  tier 1: measured max 2^-52.0, claimed 2^-45
  tier 2: measured max 2^-94.6 (the float64 rounding of the r^3 term), claimed 2^-85
"""
from __future__ import annotations
import math
import numpy as np
from . import consts, engine, exact
from .dd import fast_two_sum, two_prod, two_sum
from .engine import STATS, by_case, elementwise, fits_tier1, solve, tier
from .rounding import FORMATS, pow2

EPS1, EPS2 = math.ldexp(1.0, -45), math.ldexp(1.0, -85)
N = 1 << consts.EXP2_BITS
_C1 = [consts.exp2_taylor(i)[0] for i in range(1, 5)]
_LN2, _C2 = consts.exp2_taylor(1), consts.exp2_taylor(2)
_C3_6 = [consts.exp2_taylor(i)[0] for i in range(3, 7)]


def _reduce(th, tl):
  """(j, k, rh, rl): t = k + j/N + (rh + rl) with |rh + rl| <= 2^-13 (+ |tl|)."""
  n = np.rint(th * N)
  if np.isscalar(tl) and tl == 0:                # two_sum(r, 0) is (r, 0): r is never -0.0 (x - x is +0.0)
    rh, rl = th - n * (1.0 / N), 0.0
  else:
    rh, rl = two_sum(th - n * (1.0 / N), tl)    # th - n/N is exact
  ni = n.astype(np.int64)
  return ni & (N - 1), ni >> consts.EXP2_BITS, rh, rl


def core1(th, tl=0.0):
  """(y, k) with 2^(th + tl) = y 2^k, |error| < EPS1 |y|, (th, tl) a normalized
  double-double with |th| < 1100 (tl = 0 for a plain argument)."""
  j, k, rh, rl = _reduce(th, tl)
  r = rh + rl
  c1, c2, c3, c4 = _C1
  p = r * (c1 + r * (c2 + r * (c3 + r * c4)))
  t = np.take(consts.exp2_table()[0], j)
  return t + t * p, k


def core2(th, tl=0.0):
  """(hi, lo, k) with 2^(th + tl) = (hi + lo) 2^k, |error| < EPS2 |hi|, as core1."""
  j, k, rh, rl = _reduce(th, tl)
  a1h, a1l = two_prod(_LN2[0], rh)                 # ln2 r
  a1l = a1l + _LN2[1] * rh
  sh, sl = two_prod(rh, rh)                        # (ln2^2 / 2) r^2
  a2h, a2l = two_prod(_C2[0], sh)
  a2l = a2l + (_C2[0] * sl + _C2[1] * sh)
  c3, c4, c5, c6 = _C3_6
  tail = sh * rh * (c3 + rh * (c4 + rh * (c5 + rh * c6)))
  first = rl * (_LN2[0] + rh * (2.0 * _C2[0]))     # d(2^r)/dr * rl = rl ln2 2^r, to first order
  ph, pe = fast_two_sum(a1h, a2h)
  ph, pl = fast_two_sum(ph, pe + a1l + a2l + tail + first)   # 2^r - 1
  tab_hi, tab_lo = consts.exp2_table()
  th_, tl_ = np.take(tab_hi, j), np.take(tab_lo, j)
  uh, ul = two_prod(th_, ph)                       # T (2^r - 1)
  ul = ul + (th_ * pl + tl_ * ph)
  hi, e = fast_two_sum(th_, uh)
  hi, lo = fast_two_sum(hi, e + tl_ + ul)
  return hi, lo, k


def approx1(x):
  y, k = core1(x)
  return y, 0.0, k, EPS1 * y


def approx2(x):
  hi, lo, k = core2(x)
  return hi, lo, k, EPS2 * hi


TIERS = (tier(approx1), tier(approx2))


@elementwise
def exp2(x, f):
  """2^x correctly rounded to f. 2^x >= 2^(emax+1) overflows; 2^x <= 2^(qmin-1), half the
  smallest subnormal (a tie at equality, to the even 0), is +0; NaN stays NaN."""
  if f is FORMATS["float32"] and TIERS: return _float32(x, f)   # without tiers (a test of the fallback) nothing is quick
  return _any(x, f)


def _any(x, f):
  ordinary = (x > f.qmin - 1) & (x < f.emax + 1)          # NaN is not
  special = lambda v: np.where(v >= f.emax + 1, np.inf, np.where(v <= f.qmin - 1, 0.0, np.nan))
  return by_case(ordinary, lambda v: solve("exp2", [v], f, TIERS, exact.exp2), special, x)


# float32, the common case, without the cascade's generic rounding test: for x in QUICK
# (2^x a normal float32 with a binade to spare on either side), tier 1's y 2^k is within
# EPS1 y < 2^8 units of y's last float64 place of 2^x (y has fewer than 2^53 of them), and
# float32 keeps y's top 24 bits on the same grid at any scale 2^k. Where the 29 bits it drops
# lie more than QUICK_MARGIN units from 2^28 (a midpoint between two float32s; the adjacent
# binades' midpoints are 2^27 units or more away), every real within the error rounds as y
# does, and NumPy's float64 -> float32 conversion (to nearest even) of the exact y 2^k is
# the result. The rest (about one element in a million, and x outside QUICK) go to _any.
QUICK = (-125.0, 127.0)
QUICK_MARGIN = 512
_LOW29, _MID29 = (1 << 29) - 1, 1 << 28


def _float32(x, f):
  out = np.empty(x.size)
  for start in range(0, x.size, engine.CHUNK): out[start:start + engine.CHUNK] = _float32_part(x[start:start + engine.CHUNK], f)
  return out


def _float32_part(x, f):
  quick = (x > QUICK[0]) & (x < QUICK[1]) & fits_tier1(x)   # NaN is not
  every = bool(quick.all())
  at = None if every else np.flatnonzero(quick)
  y, k = core1(x if every else x[at])
  decided = np.abs((y.view(np.int64) & _LOW29) - _MID29) > QUICK_MARGIN
  value = (y * pow2(k)).astype(np.float32).astype(np.float64)
  STATS["exp2", "tier1"] += int(np.count_nonzero(decided))
  if every and decided.all(): return value
  out = np.empty(x.size)
  if every: at = np.arange(x.size)
  out[at[decided]] = value[decided]
  rest = np.ones(x.size, bool)
  rest[at[decided]] = False
  rest = np.flatnonzero(rest)
  out[rest] = _any(x[rest], f)
  return out
