"""An independent high-precision reference for EXP2, LOG2, SIN and POW: Python's `decimal`
module (no NumPy, no mpmath, nothing the evaluator uses), with the rounding to a binary
format done in exact rational arithmetic. Slow and simple; for checking samples.

`correctly_rounded(op, fmt, *xs)` gives the value the op's correctly rounded result in
format fmt must have, as a Python float, or None where the sample cannot decide (the
value lies within 10^-70 relative of a rounding boundary: exact cases are handled by the
callers' special cases, not guessed here).
"""
from __future__ import annotations
import math
from decimal import Decimal, localcontext
from fractions import Fraction
from tinyspec.dtypes import DTYPES

DIGITS = 90
def _formats() -> dict:
  """Each float dtype of the table: (precision, smallest normal exponent, largest exponent,
  the largest finite where an overflow saturates to it (a dtype the table marks saturating),
  else None)."""
  out = {}
  for name, d in DTYPES.items():
    if not d.is_float: continue
    lo, hi = d.normal_range
    out[name] = (d.mantissa + 1, int(math.log2(lo)), int(math.floor(math.log2(hi))), float(hi) if getattr(d, "saturate", False) else None)
  return out


FORMATS = _formats()


def _pi(ctx_digits: int) -> Decimal:
  """pi by Machin's formula, to ctx_digits digits."""
  with localcontext() as c:
    c.prec = ctx_digits + 10
    def arctan_inv(n: int) -> Decimal:
      x, n2, total, k, sign = Decimal(1) / n, n * n, Decimal(0), 1, 1
      term = x
      while term != 0:
        total += sign * term / k
        x /= n2; term = x; k += 2; sign = -sign
      return total
    return 4 * (4 * arctan_inv(5) - arctan_inv(239))


def _sin(x: Decimal) -> Decimal:
  """sin by reduction modulo 2*pi (with enough digits of pi for |x| up to 2^1024) and Taylor."""
  with localcontext() as c:
    c.prec = DIGITS + 330
    two_pi = 2 * _pi(c.prec)
    r = x - two_pi * (x / two_pi).to_integral_value()
    term, total, k, r2 = r, Decimal(0), 1, r * r
    while term != 0 and (total == 0 or abs(term) > abs(total) * Decimal(10) ** -(DIGITS + 20)):
      total += term
      term = -term * r2 / ((k + 1) * (k + 2)); k += 2
    return total


def value(op: str, *xs: float) -> Decimal:
  """The op's exact value to about DIGITS digits (finite operands; a > 0 for LOG2 and POW)."""
  with localcontext() as c:
    c.prec = DIGITS + 20
    d = [Decimal(x) for x in xs]   # exact: every binary float is a finite decimal
    ln2 = Decimal(2).ln()
    if op == "LOG2": return d[0].ln() / ln2
    if op == "SIN": return _sin(d[0])
    if op in ("EXP2", "POW"):
      t = d[0] if op == "EXP2" else d[1] * d[0].ln() / ln2   # the result is 2^t
      # beyond +-1200 every format rounds it to inf or +0: any value past that says so
      t = max(min(t, Decimal(1200)), Decimal(-1200))
      return (t * ln2).exp()
  raise KeyError(op)


def round_to(v: Fraction, fmt: str) -> float | None:
  """v rounded to nearest even in format fmt (subnormals, overflow to inf), or None when v
  is within 10^-70 (relative) of a tie, which a DIGITS-digit approximation cannot decide."""
  p, emin, emax, saturate = FORMATS[fmt]
  if v == 0: return 0.0
  sign, a = (-1 if v < 0 else 1), abs(v)
  e = math.floor(math.log2(a.numerator) - math.log2(a.denominator))
  while Fraction(2) ** e > a: e -= 1
  while Fraction(2) ** (e + 1) <= a: e += 1
  q = max(e, emin) - (p - 1)                       # the weight of the last kept bit
  scaled = a / Fraction(2) ** q
  lo = math.floor(scaled)
  frac = scaled - lo
  if abs(frac - Fraction(1, 2)) < Fraction(1, 10**70) * scaled: return None
  n = lo + (1 if frac > Fraction(1, 2) else 0)
  r = Fraction(n) * Fraction(2) ** q
  if saturate is not None and r > Fraction(saturate): return sign * saturate   # decision fp8-convert
  if r >= Fraction(2) ** (emax + 1): return sign * math.inf
  return sign * float(r)


def correctly_rounded(op: str, fmt: str, *xs: float) -> float | None:
  return round_to(Fraction(value(op, *xs)), fmt)
