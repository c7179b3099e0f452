"""Constants and tables, derived once with exact arithmetic and mpmath.

How each is derived (and re-derived bit for bit by tests/refimpl/test_refimpl_crmath.py at a
different precision):
  * a double-double constant c is (hi, lo) with hi = c rounded to nearest double and
    lo = (c - hi) rounded to nearest double; the roundings are exact rational arithmetic
    (Fraction -> float is correctly rounded), c itself is either an exact Fraction
    (1/3, 1/6, ...) or an mpmath evaluation at PREC = 256 bits, whose error (< 2^-250
    relative) is far below the 2^-107 the double-double keeps;
  * a plain double constant is the double-double's hi (polynomial coefficients are
    Taylor coefficients: exp2 uses ln2^i / i!, log2 (-1)^(i+1) / (i ln2), sin and cos
    1/i!), their truncation errors are in the tier bounds of each function module;
  * the bits of 2/pi are floor(2/pi * 2^TWO_OVER_PI_BITS), from mpmath with 128 guard
    bits.
The tables are built on first use (about 0.2 s of mpmath in all) and cached.
"""
from __future__ import annotations
from fractions import Fraction
from functools import cache
import math
import mpmath
import numpy as np

PREC = 256
_ctx = mpmath.MPContext()   # private: never touches the caller's mpmath.mp settings


def exact(v) -> Fraction:
  """The exact rational value of an mpmath mpf, a Fraction or an int."""
  if isinstance(v, (Fraction, int)): return Fraction(v)
  man, exp = v.man_exp                     # man_exp drops the sign
  return Fraction(-man if v < 0 else man) * Fraction(2) ** exp


def dd(v) -> tuple[float, float]:
  """(hi, lo): v rounded to nearest double, and the remainder rounded to nearest."""
  q = exact(v)
  hi = float(q)
  return hi, float(q - Fraction(hi))


def mp_eval(fn, prec: int = PREC):
  """fn(ctx) evaluated with the private mpmath context at prec bits."""
  _ctx.prec = prec
  return fn(_ctx)


LN2 = dd(mp_eval(lambda m: m.ln2))
INVLN2 = dd(mp_eval(lambda m: 1 / m.ln2))
PIO2 = dd(mp_eval(lambda m: m.pi / 2))
THIRD = dd(Fraction(1, 3))
MINUS_SIXTH = dd(Fraction(-1, 6))


def exp2_taylor(i: int) -> tuple[float, float]:
  """ln2^i / i!, the i-th Taylor coefficient of 2^r."""
  return dd(mp_eval(lambda m: m.ln2 ** i / m.factorial(i)))


def log2_taylor(i: int) -> tuple[float, float]:
  """(-1)^(i+1) / (i ln2), the i-th Taylor coefficient of log2(1 + z)."""
  return dd(mp_eval(lambda m: (-1) ** (i + 1) / (i * m.ln2)))


def inv_factorial(i: int, sign: int = 1) -> float:
  """sign / i! rounded to nearest double."""
  return float(Fraction(sign, _factorial(i)))


def _factorial(i: int) -> int:
  out = 1
  for j in range(2, i + 1): out *= j
  return out


def _table(values) -> tuple[np.ndarray, np.ndarray]:
  pairs = [dd(v) for v in values]
  return np.array([h for h, _ in pairs]), np.array([l for _, l in pairs])


EXP2_BITS = 12    # exp2 table: 2^(j / 2^12), j = 0 .. 4095


@cache
def exp2_table() -> tuple[np.ndarray, np.ndarray]:
  n = 1 << EXP2_BITS
  return _table(mp_eval(lambda m: m.power(2, m.mpf(j) / n)) for j in range(n))


LOG_R1 = (181, 363)               # first reduction: r1 = i / 2^8, i in [181, 363)
LOG_R2 = (65536 - 512, 65536 + 512)   # second reduction: r2 = i / 2^16


@cache
def log2_tables() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
  """-log2(i / 2^8) for i in LOG_R1 and -log2(i / 2^16) for i in LOG_R2 (indexed from
  the range's start): log2(x) = e + T1[i1] + T2[i2] + log2(1 + z)."""
  def tab(lo, hi, scale):
    return _table(mp_eval(lambda m: -m.log(m.mpf(i) / scale, 2)) for i in range(lo, hi))
  return tab(*LOG_R1, 256), tab(*LOG_R2, 65536)


SIN_BITS = 10     # sin table: sin(K pi / 2^11), K = 0 .. 4095 (a quarter turn is 1024 steps)


@cache
def sin_table() -> tuple[np.ndarray, np.ndarray]:
  """sin(K * (pi/2) / 2^10) for K mod 4096; from the quarter period by symmetry, with
  sinpi so that the zeros and ones are exact."""
  q = 1 << SIN_BITS
  base = [dd(mp_eval(lambda m: m.sinpi(m.mpf(j) / (2 * q)))) for j in range(q + 1)]
  hi, lo = np.empty(4 * q), np.empty(4 * q)
  for K in range(4 * q):
    quadrant, j = divmod(K, q)
    h, l = base[j] if quadrant % 2 == 0 else base[q - j]
    s = -1.0 if quadrant >= 2 else 1.0
    hi[K], lo[K] = s * h, s * l
  return hi, lo


TWO_OVER_PI_BITS = 1280
PH_LIMBS = 6          # the Payne-Hanek window: 6 limbs of 32 bits of 2/pi
PH_PAD = 64           # window rows start at bit index -PH_PAD (bits at index <= 0 are 0)
PH_MAX_START = 970    # the largest window start: float64 exponent 1023 - 52 - 1


def two_over_pi_bits() -> int:
  """floor(2/pi * 2^TWO_OVER_PI_BITS): bit i (weight 2^-i) of 2/pi is bit
  TWO_OVER_PI_BITS - i of this integer."""
  v = mp_eval(lambda m: 2 / m.pi * m.mpf(2) ** TWO_OVER_PI_BITS, TWO_OVER_PI_BITS + 128)
  return math.floor(exact(v))


@cache
def payne_hanek_rows() -> np.ndarray:
  """rows[j, s + PH_PAD]: the j-th 32-bit limb (least significant first) of the 192 bits
  of 2/pi with weights 2^-s .. 2^-(s+191), for window starts s in -PH_PAD .. PH_MAX_START.
  Shape (PH_LIMBS, PH_PAD + PH_MAX_START + 1), uint64 holding 32-bit values; a shorter
  window of L limbs from the same start is rows[PH_LIMBS - L:]."""
  bits = two_over_pi_bits()
  width = 32 * PH_LIMBS
  starts = range(-PH_PAD, PH_MAX_START + 1)
  rows = np.empty((PH_LIMBS, len(starts)), dtype=np.uint64)
  for col, s in enumerate(starts):
    window = (bits >> (TWO_OVER_PI_BITS - (s + width - 1))) & ((1 << width) - 1)
    for j in range(PH_LIMBS):
      rows[j, col] = (window >> (32 * j)) & 0xFFFFFFFF
  return rows
