"""pow, correctly rounded, with the special cases of C99 Annex F.

For a > 0: a^b = 2^t with t = b log2(a), carried as a double-double so that its
absolute error, which becomes the relative error of the result, stays tiny even
where |t| reaches the overflow and underflow thresholds (|t| < 1100 there; beyond,
the result is decided as inf or 0 directly). A negative base with an integer exponent
is |a|^b with the sign of the parity of b; the rounding is symmetric, so the sign is
applied after it.

Tier 1 (inputs of at most 24 bits): log2 a as a double-double to ~2^-62 relative (the
table value split, z / ln2 by an exact product, the rest of the series in float64), t
by an exact product, then exp2's tier-1 core. Tier 2: log2's and exp2's double-double
cores; the log's relative error (< 2^-100) times |t| < 2^11 stays below 2^-88.

Exact representable results (pow(9, 0.5) = 3, pow(4, 1.5) = 8) pass the rounding test
like any other value. Exact midpoints (float32 pow(1 + 2^-12, 2) = 1 + 2^-11 + 2^-24,
float16 pow(169, 1.5) = 2197, ties in the subnormal range) never do, the test being
strict; they reach the fallback, which finds them with integer arithmetic.

Errors, measured against mpmath (bench/bench_crmath.py --errors: per tier 10^6 random
pairs with |t| below 140 (tier 1) or 1070 (tier 2), 10^5 with a base within 2^-1 of 1
and |t| in the top 60 of that range) and claimed, relative:
  tier 1: measured max 2^-52.0, claimed 2^-45
  tier 2: measured max 2^-93.9, claimed 2^-80
"""
from __future__ import annotations
import math
import numpy as np
from . import consts, exact
from .dd import fast_two_sum, two_prod, two_sum
from .engine import by_case, elementwise, solve
from .exp2 import core1 as exp2_core1, core2 as exp2_core2
from .log2 import core2 as log2_core2, reduce, series_tail, table1
from .rounding import decide

EPS1, EPS2 = math.ldexp(1.0, -45), math.ldexp(1.0, -80)
HUGE_B = math.ldexp(1.0, 64)   # |b| >= 2^64 and a != 1: |t| >= 2^64 |log2(1 +- 2^-53)| > 2^11
TWO53 = math.ldexp(1.0, 53)


def _log2_t1(a):
  """log2(a) as a double-double with relative error < 2^-60, for a with at most 24 bits:
  the leading z / ln2 exactly, the rest of log2(1 + z) in float64."""
  m, e, i1 = reduce(a)
  z = m * (i1 * (1.0 / 256)) - 1.0                # exact, as in log2.core1
  ph, pl = two_prod(z, consts.INVLN2[0])
  rest = z * z * series_tail(z)                  # the series beyond its first term
  t_hi, t_lo = table1(i1)
  s, e1 = two_sum(e, t_hi)
  s, e2 = two_sum(s, ph)
  return fast_two_sum(s, e1 + e2 + (t_lo + pl + z * consts.INVLN2[1] + rest))


def _exponent(log_hi, log_lo, b):
  """t = b log2(a) as a double-double (|b| < 2^64, so b splits without overflow)."""
  th, tl = two_prod(b, log_hi)
  return fast_two_sum(th, tl + b * log_lo)


def exponent1(a, b):
  return _exponent(*_log2_t1(a), b)


def exponent2(a, b):
  return _exponent(*log2_core2(a), b)


def from_exponent1(th, tl):
  """(y, 0, k, err) for 2^(th + tl), |th| < 1100 (a normalized double-double)."""
  y, k = exp2_core1(th, tl)
  return y, 0.0, k, EPS1 * y


def from_exponent2(th, tl):
  hi, lo, k = exp2_core2(th, tl)
  return hi, lo, k, EPS2 * hi


def approx1(a, b):
  """a^b for a > 0 where |b log2 a| < 1100 (the error measurement's entry point)."""
  return from_exponent1(*exponent1(a, b))


def approx2(a, b):
  return from_exponent2(*exponent2(a, b))


def _tier(exponent, from_exponent):
  """Decide a^b: clear overflows and underflows of 2^t directly, the rest by the test."""
  def run(a, b, f):
    th, tl = exponent(a, b)
    over, under = th >= f.emax + 2, th <= f.qmin - 3    # 2^t > 2^(emax+1.9) or < 2^(qmin-2.9)
    clear = over | under
    if not clear.any():
      return decide(*from_exponent(th, tl), f)
    out, ok = np.where(over, np.inf, 0.0), np.ones(th.shape, dtype=bool)
    mid = ~clear
    out[mid], ok[mid] = decide(*from_exponent(th[mid], tl[mid]), f)
    return out, ok
  return run


TIERS = (_tier(exponent1, from_exponent1), _tier(exponent2, from_exponent2))


def _odd_integer(b):
  """b is an odd integer (all floats of magnitude >= 2^53 are even)."""
  return (np.abs(b) < TWO53) & (np.trunc(b) == b) & (np.trunc(b * 0.5) != b * 0.5)


def _special(a, b):
  """a^b where a or b is special (C99 Annex F), where a < 0 and b is not an integer
  (NaN), where |a| = 1, and where |b| >= 2^64 (then 2^t is certainly inf or 0 and b
  even). The first rule that applies wins."""
  out, done = np.full(a.shape, np.nan), np.zeros(a.shape, dtype=bool)

  def rule(mask, value):
    mask = mask & ~done
    out[mask] = value[mask] if np.ndim(value) else value
    done[mask] = True

  odd, ax = _odd_integer(b), np.abs(a)
  rule((b == 0) | (a == 1), 1.0)                       # pow(x, ±0) = pow(+1, y) = 1, NaN too
  rule(np.isnan(a) | np.isnan(b), np.nan)
  rule(np.isinf(b), np.where(a == -1, 1.0, np.where((ax < 1) == (b < 0), np.inf, 0.0)))
  rule(a == 0, np.where(b < 0, np.where(odd, np.copysign(np.inf, a), np.inf), np.where(odd, a, 0.0)))
  inf_base = np.where(b > 0, np.inf, 0.0)
  rule(np.isinf(a), np.where((a < 0) & odd, -inf_base, inf_base))
  rule((a < 0) & (np.trunc(b) != b), np.nan)
  rule(ax == 1, np.where(odd, -1.0, 1.0))              # a = -1, b an integer
  rule(np.abs(b) >= HUGE_B, np.where((ax > 1) == (b > 0), np.inf, 0.0))
  return out


@elementwise
def pow(a, b, f):
  """a^b correctly rounded to f, with C99 Annex F's special values."""
  ax = np.abs(a)
  ordinary = ((ax > 0) & (ax < np.inf) & (ax != 1) & (b != 0) & (np.abs(b) < HUGE_B)
              & ((a > 0) | (np.trunc(b) == b)))

  def solve_ordinary(x, y):
    value = solve("pow", [np.abs(x), y], f, TIERS, exact.pow)
    negative = x < 0                                   # rounding is symmetric: sign after
    return np.where(negative & _odd_integer(y), -value, value) if negative.any() else value

  return by_case(ordinary, solve_ordinary, _special, a, b)
