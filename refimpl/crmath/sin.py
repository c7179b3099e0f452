"""sin, correctly rounded.

Small arguments, |x| < 2^-10: sin x = x + x q R(q), q = x^2, R = -1/6 + q/120 - ...
(Taylor). Otherwise exact argument reduction (Payne-Hanek, integer arithmetic on 32-bit
limbs): x 2/pi = K / 2^10 + f (mod 4), |f| <= 2^-11, then with a = K pi / 2^11 and
t = f pi/2 (|t| <= pi/2^12), sin x = S[K] cos t + C[K] sin t, S[K] = sin a and
C[K] = cos a = S[K + 1024] from consts.sin_table.

Payne-Hanek: x = M 2^E with M an integer. The bits of 2/pi of weight 2^-i with i <= E-2
contribute multiples of 4 to x 2/pi and are dropped; a window of 32 L bits of 2/pi
starting at weight 2^-(E-1) gives P = M W with x 2/pi = P 2^-(32L-2) (mod 4) up to the
bits beyond the window, less than M 2^(2-32L): 2^-102 with tier 1's 24-bit M and L = 4,
2^-137 with tier 2's 53-bit M and L = 6 (as absolute errors in f; in sin x that is at
most pi/2 times as much, counted in the error bound as an absolute term, which sends
the rare results very close to 0, x near a multiple of pi, to the exact fallback).

Tier 1 (float64; x of at most 24 bits): degree-5 Taylor for sin t, degree-4 for cos t
(truncations < 2^-72 relative). Tier 2 (double-double): sin t - t = t q R(q) and
cos t - 1 = -q/2 + q^2 Rc(q) to degree 9 and 8 (truncations < 2^-120), the leading
terms in double-double, results scaled by a power of two for tiny x so that subnormal
results keep their precision.

Errors, measured against mpmath (bench/bench_crmath.py --errors: per tier 10^6 arguments
uniform in bits, 10^5 near multiples of pi/2 and 10^5 below 2^-10) and claimed
(relative, plus the absolute reduction term):
  tier 1: measured max 2^-51.1, claimed 2^-45 + 2^-98 absolute
  tier 2: measured max 2^-95.7, claimed 2^-85 + 2^-133 absolute
"""
from __future__ import annotations
import math
import numpy as np
from . import consts, exact
from .dd import fast_two_sum, two_prod, two_sum
from .engine import by_case, elementwise, solve, tier

EPS1, ABS1 = math.ldexp(1.0, -45), math.ldexp(1.0, -98)
EPS2, ABS2 = math.ldexp(1.0, -85), math.ldexp(1.0, -133)
SMALL = math.ldexp(1.0, -10)
MASK32 = np.uint64(0xFFFFFFFF)
QUARTER_TURN = 1 << consts.SIN_BITS
_S3, _S5, _S7, _S9 = (consts.inv_factorial(i, s) for i, s in ((3, -1), (5, 1), (7, -1), (9, 1)))
_C4, _C6, _C8 = (consts.inv_factorial(i, s) for i, s in ((4, 1), (6, -1), (8, 1)))


def payne_hanek(ax, wide: bool):
  """(K, terms): for ax >= 2^-10, x 2/pi = K / 2^10 + f (mod 4), K in 0..4095,
  |f| <= 2^-11, f = sum(terms) exactly up to the window truncation, terms being
  exact doubles of decreasing weight. wide: 53-bit M and 6 limbs (tier 2), else the
  24-bit M of a float32 value and 4 limbs (tier 1)."""
  bits = ax.view(np.uint64)
  M = (bits & np.uint64(0xFFFFFFFFFFFFF)) | np.uint64(1 << 52)
  E = (bits >> np.uint64(52)).astype(np.int64) - 1075           # ax = M 2^E
  if not wide:
    M, E = M >> np.uint64(29), E + 29                            # the 29 low bits are zero
  limbs = consts.PH_LIMBS if wide else 4
  w = np.take(consts.payne_hanek_rows()[consts.PH_LIMBS - limbs:], E - 1 + consts.PH_PAD, axis=1)
  cols = _multiply(M, w, wide)
  top = cols[-1]
  up = (top >> np.uint64(19)) & np.uint64(1)                     # round K to nearest
  K = ((top >> np.uint64(20)) + up).astype(np.int64) & (4 * QUARTER_TURN - 1)
  lead = (top & np.uint64(0xFFFFF)).astype(np.int64) - (up.astype(np.int64) << 20)
  terms = [lead * math.ldexp(1.0, -30)]
  terms += [cols[-1 - i].astype(np.float64) * math.ldexp(1.0, -30 - 32 * i) for i in range(1, limbs - 1)]
  return K, terms


def _multiply(M, w, wide):
  """The 32-bit limbs (least significant first) of M * W mod 2^(32 len(w)), W given by
  its limbs w; products of 32-bit halves fit uint64 exactly, column sums stay < 2^35."""
  m0 = M & MASK32
  a = m0 * w
  cols = a & MASK32
  cols[1:] += a[:-1] >> np.uint64(32)
  if wide:
    b = (M >> np.uint64(32)) * w
    cols[1:] += b[:-1] & MASK32
    cols[2:] += b[:-2] >> np.uint64(32)
  for c in range(len(cols) - 1):
    cols[c + 1] += cols[c] >> np.uint64(32)
    cols[c] &= MASK32
  cols[-1] &= MASK32
  return cols


def _table(K):
  hi, lo = consts.sin_table()
  Kc = (K + QUARTER_TURN) & (4 * QUARTER_TURN - 1)
  return np.take(hi, K), np.take(lo, K), np.take(hi, Kc), np.take(lo, Kc)


def _small1(x):
  q = x * x
  return x + x * (q * (_S3 + q * _S5))


def _reduced1(ax):
  K, terms = payne_hanek(ax, wide=False)
  t = (terms[0] + (terms[1] + terms[2])) * consts.PIO2[0]
  q = t * t
  s, _, c, _ = _table(K)
  sin_t = t + t * (q * (_S3 + q * _S5))
  cos_m1 = q * (-0.5 + q * _C4)
  return s + (s * cos_m1 + c * sin_t)


def approx1(x):
  ax = np.abs(x)
  small = ax < SMALL
  y = np.empty_like(x)
  y[small] = _small1(x[small])
  y[~small] = _reduced1(ax[~small]) * np.where(x[~small] < 0, -1.0, 1.0)
  return y, 0.0, 0, EPS1 * np.abs(y) + np.where(small, 0.0, ABS1)


def _sin_minus_t(qh, ql):
  """(uh, ul) = q R(q) = (sin t - t) / t as a double-double, |t| <= 2^-10."""
  r_tail = qh * (1 / 120 + qh * (_S7 + qh * _S9))
  uh, ul = two_prod(qh, consts.MINUS_SIXTH[0])
  return uh, ul + (qh * (consts.MINUS_SIXTH[1] + r_tail) + ql * consts.MINUS_SIXTH[0])


def _small2(x):
  """(hi, lo, k): sin x = (hi + lo) 2^k for |x| < 2^-10. q = x^2 is formed unscaled;
  where it underflows, its contribution (< x^2 relative) is far below the bound."""
  _, k = np.frexp(x)
  xs = np.ldexp(x, -k)
  qh, ql = two_prod(x, x)
  uh, ul = _sin_minus_t(qh, ql)
  vh, vl = two_prod(xs, uh)
  hi, e = fast_two_sum(xs, vh)
  hi, lo = fast_two_sum(hi, e + (vl + xs * ul))
  return hi, lo, k


def _reduced2(ax):
  """(hi, lo) = sin(ax) for ax >= 2^-10."""
  K, terms = payne_hanek(ax, wide=True)
  fh, fl = two_sum(terms[0], terms[1])
  fh, e = two_sum(fh, terms[2])
  fh, fl = fast_two_sum(fh, fl + e + (terms[3] + terms[4]))
  th, tl = two_prod(fh, consts.PIO2[0])                  # t = f pi/2
  th, tl = fast_two_sum(th, tl + (fh * consts.PIO2[1] + fl * consts.PIO2[0]))
  qh, ql = two_prod(th, th)                              # q = t^2
  ql = ql + 2.0 * th * tl
  sh, sl, ch, cl = _table(K)
  ah, al = two_prod(ch, th)                              # C t
  al = al + (ch * tl + cl * th)
  uh, ul = _sin_minus_t(qh, ql)
  dh, dl = two_prod(ah, uh)                              # C (sin t - t)
  dl = dl + (ah * ul + al * uh)
  mh = -0.5 * qh                                         # cos t - 1
  ml = -0.5 * ql + (qh * qh) * (_C4 + qh * (_C6 + qh * _C8))
  bh, bl = two_prod(sh, mh)                              # S (cos t - 1)
  bl = bl + (sh * ml + sl * mh)
  s, e1 = two_sum(sh, ah)
  s, e2 = two_sum(s, bh)
  s, e3 = two_sum(s, dh)
  return fast_two_sum(s, e1 + e2 + e3 + (sl + al + bl + dl))


def approx2(x):
  ax = np.abs(x)
  small = ax < SMALL
  hi, lo, k = np.empty_like(x), np.empty_like(x), np.zeros(x.shape, dtype=np.int64)
  hi[small], lo[small], k[small] = _small2(x[small])
  h, l = _reduced2(ax[~small])
  sign = np.where(x[~small] < 0, -1.0, 1.0)
  hi[~small], lo[~small] = h * sign, l * sign
  return hi, lo, k, EPS2 * np.abs(hi) + np.where(small, 0.0, ABS2)


TIERS = (tier(approx1), tier(approx2))


@elementwise
def sin(x, f):
  """sin(x) correctly rounded to f: sin(±0) = ±0, sin(±inf) = NaN, NaN stays NaN."""
  special = lambda v: np.where(v == 0, v, np.nan)
  return by_case(np.isfinite(x) & (x != 0), lambda v: solve("sin", [v], f, TIERS, exact.sin), special, x)
