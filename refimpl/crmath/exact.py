"""The exact fallback, one element at a time: exact cases by integer arithmetic, the
rest by Ziv's strategy with mpmath.

Ziv: evaluate at P bits (starting at 128), trust the result to 2^(SLACK - P) relative
(SLACK = 8 bits, i.e. 256 ulps at P, where mpmath's functions are within a few ulps and
the guard bits added below cover the argument roundings), and accept when both ends of
that interval round to the same value of the format; otherwise double P. Only exact
results and exact midpoints never decide, and those are recognised first: exp2 of an
integer, log2 of a power of two, sin(±0), and the dyadic values of pow (_pow_dyadic).
Every other value is irrational or a non-dyadic rational, neither of which is a
midpoint, so the loop ends.
"""
from __future__ import annotations
import math
import mpmath
from .rounding import Format

START_PREC, MAX_PREC, SLACK = 128, 1 << 15, 8
_ctx = mpmath.MPContext()   # private: never touches the caller's mpmath.mp settings


def round_dyadic(man: int, exp: int, f: Format) -> float:
  """man * 2^exp (Python ints) rounded to nearest, ties to even, in f: subnormals,
  overflow to ±inf, the sign of zero kept. Exact integer arithmetic throughout."""
  neg, man = man < 0, abs(man)
  if man == 0: return -0.0 if neg else 0.0
  q = max(exp + man.bit_length() - f.p, f.qmin)   # the quantum's exponent
  if q - exp > man.bit_length():            # below half the quantum: rounds to zero
    n = 0
  elif q > exp:
    shift = q - exp
    n, rem = man >> shift, man & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    n += rem > half or (rem == half and n & 1)
  else:
    n = man << (exp - q)
  v = math.inf if n.bit_length() + q - 1 > f.emax else math.ldexp(n, q)   # n <= 2^p: exact
  return -v if neg else v


def _ziv(evaluate, f: Format) -> float:
  """evaluate(ctx) -> mpf at ctx.prec bits, relative error < 2^(SLACK - prec)."""
  prec = START_PREC
  while prec <= MAX_PREC:
    _ctx.prec = prec
    v = evaluate(_ctx)
    man, exp = v.man_exp                    # man_exp drops the sign
    if man == 0: break
    man = -man if v < 0 else man
    d = prec - SLACK
    lo = round_dyadic(man * ((1 << d) - 1), exp - d, f)
    hi = round_dyadic(man * ((1 << d) + 1), exp - d, f)
    if lo == hi: return lo
    prec *= 2
  raise ArithmeticError("crmath: Ziv's loop did not decide (an exact case missed?)")


def _guarded(extra: int, fn):
  """fn evaluated with `extra` guard bits above the Ziv precision."""
  def evaluate(ctx):
    prec = ctx.prec
    ctx.prec = prec + extra
    try: return fn(ctx)
    finally: ctx.prec = prec
  return evaluate


def exp2(x: float, f: Format) -> float:
  """2^x, x finite. |x| < 2^11 in practice; the argument x ln2 is formed with 16 guard
  bits, so its rounding costs < 2^(12 - P - 16) relative in the result."""
  if x == math.floor(x): return round_dyadic(1, int(x), f)
  return _ziv(_guarded(16, lambda m: m.exp(m.mpf(x) * m.ln2)), f)


def log2(x: float, f: Format) -> float:
  """log2(x), x > 0 finite (mpmath's log itself adds precision near x = 1)."""
  m, e = math.frexp(x)
  if m == 0.5: return round_dyadic(e - 1, 0, f)
  return _ziv(_guarded(16, lambda c: c.log(c.mpf(x)) / c.ln2), f)


def sin(x: float, f: Format) -> float:
  """sin(x), x finite (mpmath reduces the argument with as many bits of pi as the
  exponent and the cancellation need)."""
  if x == 0: return x
  return _ziv(_guarded(16, lambda m: m.sin(m.mpf(x))), f)


def pow(a: float, b: float, f: Format) -> float:
  """a^b for a > 0 finite, b finite. The guard bits cover |b ln a| < 2^(exponent(b)+10):
  the relative error of b ln a is multiplied by that magnitude in the result."""
  exact = _pow_dyadic(a, b, f.p)
  if exact is not None: return round_dyadic(*exact, f)
  guard = 30 + max(0, math.frexp(b)[1]) + 10
  return _ziv(_guarded(guard, lambda m: m.exp(m.mpf(b) * m.log(m.mpf(a)))), f)


def _odd_parts(v: float) -> tuple[int, int]:
  """(m, e) with v = m * 2^e and m odd (v finite, nonzero)."""
  num, den = v.as_integer_ratio()
  e = 1 - den.bit_length()                 # den is a power of two
  tz = (num & -num).bit_length() - 1
  return num >> tz, e + tz


def _pow_dyadic(a: float, b: float, p: int):
  """(man, exp) with a^b = man * 2^exp exactly, whenever a^b can be representable or a
  midpoint in a p-bit format; None when it cannot (then a^b is irrational, a non-dyadic
  rational, or an odd integer times a power of two with more than p + 1 bits).

  a = m 2^e (m odd), b = n / 2^j (n odd, j > 0) or an integer n. a^b is rational only if
  a is a perfect 2^j-th power: m = s^(2^j) and 2^j | e; then a^b = (s 2^(e/2^j))^n, which
  reduces to an integer power. For an integer n: m = 1 gives the power of two 2^(e n);
  n < 0 with m > 1 gives 1/m^|n|, not dyadic; n > 0 gives the odd m^n, at least
  2^(n (bitlength(m) - 1)), too long once that exceeds p + 1 bits (which bounds n)."""
  m, e = _odd_parts(a)
  n, eb = _odd_parts(b)
  if eb < 0:
    j = -eb
    if e % (1 << j): return None
    for _ in range(j):
      s = math.isqrt(m)
      if s * s != m: return None
      m = s
    e >>= j
  else:
    n <<= eb
  if m == 1: return 1, e * n
  if n < 0 or n * (m.bit_length() - 1) > p + 1: return None
  return m ** n, e * n
