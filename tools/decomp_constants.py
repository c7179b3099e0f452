"""Derives the numeric constants of spec/decompositions.yaml from their definitions.

Run `python tools/decomp_constants.py` to print them; tests/core/test_decompose_constants.py
checks that the YAML holds exactly these values. Nothing here is measured or fitted:
Taylor coefficients are exact rationals, ln 2 and pi come from the `decimal` module (100
digits), and each value is rounded once to the target dtype. The minimax coefficients of
LOG2 (fdlibm's Lg1..Lg7 and FreeBSD's single-precision Lg1..Lg4) are published values and
are only listed in the YAML, with their source.
"""
from __future__ import annotations
from decimal import Decimal, getcontext
from fractions import Fraction
from math import factorial
import numpy as np

getcontext().prec = 100
LN2 = Fraction(Decimal(2).ln())
# pi to 100 digits (Machin's formula evaluated in Decimal), as an exact fraction.
def _pi() -> Fraction:
  def arctan_inv(n: int) -> Decimal:
    x, n2, total, k, sign = Decimal(1) / n, n * n, Decimal(0), 1, 1
    term = x
    while term != 0:
      total += sign * term / k
      x /= n2; term = x; k += 2; sign = -sign
    return total
  return Fraction(4 * (4 * arctan_inv(5) - arctan_inv(239)))
PI = _pi()
NP = {"float32": np.float32, "float64": np.float64}
MANT = {"float32": 24, "float64": 53}


def rnd(x: Fraction, dt: str) -> float:
  """x rounded once to nearest in dtype dt (via float64 when that is exact enough)."""
  if dt == "float64": return float(x)          # Fraction -> float rounds correctly
  f = float(x)                                  # 53 bits, then to 24: double rounding is
  return float(NP[dt](f))                       # harmless here (checked by the ULP tests)


def rnd_bits(x: Fraction, bits: int) -> Fraction:
  """x rounded to `bits` significant bits (as an exact fraction)."""
  if x == 0: return x
  e = 0
  a = abs(x)
  while a >= 2: a /= 2; e += 1
  while a < 1: a *= 2; e -= 1
  scale = Fraction(2) ** (bits - 1 - e)
  return Fraction(round(x * scale)) / scale


def exp2_poly(dt: str, degree: int) -> list[float]:
  """2^f = e^(f ln2): Taylor coefficients ln2^k / k!, highest first."""
  return [rnd(LN2 ** k / factorial(k), dt) for k in range(degree, -1, -1)]


def sin_poly(dt: str, terms: int) -> list[float]:
  """sin r = r + r^3 * S(r^2): S's coefficients (-1)^k / (2k+1)!, k = 1..terms, highest first."""
  return [rnd(Fraction((-1) ** k, factorial(2 * k + 1)), dt) for k in range(terms, 0, -1)]


def cos_poly(dt: str, terms: int) -> list[float]:
  """cos r = 1 - r^2/2 + r^4 * C(r^2): C's coefficients (-1)^k / (2k)!, k = 2..terms+1, highest first."""
  return [rnd(Fraction((-1) ** k, factorial(2 * k)), dt) for k in range(terms + 1, 1, -1)]


def split(x: Fraction, dt: str, part_bits: list[int]) -> list[float]:
  """x as a sum of parts, each with the given number of significant bits (the last one
  rounded to the dtype): Cody-Waite constants whose products with a small integer are exact."""
  out, rest = [], x
  for b in part_bits:
    p = rnd_bits(rest, b)
    out.append(rnd(p, dt))
    rest -= Fraction(out[-1])
  return out


def constants() -> dict:
  c = {}
  for dt, deg, sterms, cterms in (("float32", 7, 4, 4), ("float64", 13, 8, 7)):
    c[dt] = {
      "exp2_poly": exp2_poly(dt, deg),
      "sin_poly": sin_poly(dt, sterms),
      "cos_poly": cos_poly(dt, cterms),
      "two_over_pi": rnd(2 / PI, dt),
    }
  # 1/ln2 = hi + lo, hi short enough that hi * (a number with its low bits cleared) is exact
  for dt, hib in (("float32", 12), ("float64", 33)):
    hi = rnd_bits(1 / LN2, hib)
    c[dt]["ivln2hi"], c[dt]["ivln2lo"] = rnd(hi, dt), rnd(1 / LN2 - hi, dt)
  # pi/2 in parts: n * part is exact for |n| < 2^(mantissa - part bits)
  c["float32"]["pio2"] = split(PI / 2, "float32", [8, 8, 8, 8, 8, 24])
  c["float64"]["pio2"] = split(PI / 2, "float64", [33, 33, 33, 33, 33, 53])
  return c


if __name__ == "__main__":
  for dt, d in constants().items():
    print(f"{dt}:")
    for k, v in d.items():
      print(f"  {k}: {[repr(x) for x in v] if isinstance(v, list) else repr(v)}".replace("'", ""))
