"""Target formats, exact round-to-nearest-even into them, and the rounding test.

A value is carried as (hi + lo) * 2^k: hi, lo float64 of size O(1) and k an integer, so
that results in a format's subnormal range or beyond float64's range are still carried
with full relative precision (double-double arithmetic loses its low part near
underflow). Rounding is done on that scaled value with the quantum of the format at the
true magnitude, so subnormals and overflow come out as IEEE round-to-nearest-even gives
them, whatever k is.
"""
from __future__ import annotations
from dataclasses import dataclass
import math
import numpy as np


@dataclass(frozen=True)
class Format:
  """A binary IEEE-style format: p significant bits (hidden bit included), normal
  exponents emin..emax, gradual underflow."""
  name: str
  p: int
  emin: int
  emax: int

  @property
  def qmin(self) -> int:
    """Exponent of the smallest subnormal, the finest quantum of the format."""
    return self.emin - self.p + 1

  @property
  def bottom(self) -> float:
    """2^(p-1): the smallest significand of a binade, in quanta."""
    return math.ldexp(1.0, self.p - 1)

  @property
  def top(self) -> float:
    """2^p: one past the largest significand of a binade, in quanta."""
    return math.ldexp(1.0, self.p)

  @property
  def overflow(self) -> float:
    """2^(emax+1) (inf for float64): a rounded result this large is an overflow."""
    return math.inf if self.emax >= 1023 else math.ldexp(1.0, self.emax + 1)


FORMATS = {f.name: f for f in (
  Format("float16", 11, -14, 15),
  Format("bfloat16", 8, -126, 127),    # float32's exponent range
  Format("float32", 24, -126, 127),
  Format("float64", 53, -1022, 1023),
)}


def get_format(fmt) -> Format:
  if isinstance(fmt, Format): return fmt
  try: return FORMATS[str(fmt)]
  except KeyError: raise ValueError(f"unknown format {fmt!r}; expected one of {sorted(FORMATS)}") from None


def round_to(x, fmt):
  """Each float64 of x rounded to nearest-even in fmt (subnormals, overflow to ±inf,
  signed zeros, NaN kept), returned as float64."""
  f = get_format(fmt)
  x = np.asarray(x, dtype=np.float64)
  with np.errstate(all="ignore"):
    a = np.abs(x)
    _, e = np.frexp(a)                         # a = m 2^e, m in [0.5, 1)
    g = np.ldexp(1.0, np.maximum(e - f.p, f.qmin))   # the quantum of fmt at a
    r = np.rint(a / g) * g                     # a / g is exact: a power-of-two scaling
    r = np.where(r >= f.overflow, np.inf, r)
    return np.copysign(r, x)


def pow2(n):
  """2^n as float64 for integers n in [-1022, 1023], built from the bits (np.ldexp is
  several times slower)."""
  return ((np.asarray(n, dtype=np.int64) + 1023) << 52).view(np.float64)


def decide(hi, lo, k, err, f: Format):
  """The rounding test. The exact value v is known to satisfy
  |v / 2^k - (hi + lo)| <= err (err an absolute bound in the units of hi, including a
  little slack for the roundings done here, which the conservative tier bounds provide;
  hi a normal float64 or 0, lo = 0 or a double-double's low part, k an integer array
  or 0). Returns (rounded, ok): where ok, every real in that interval rounds to the same
  value of f, which is `rounded` (float64, ±inf on overflow); elsewhere `rounded` is
  meaningless.

  The test runs in units of the quantum g of f at |hi| 2^k: t = |hi| / g (exact, a
  power-of-two scaling) is rounded to the integer r0, the candidate r0 g, and
  D = (t - r0) + lo/g (t - r0 is exact) widened by E = err/g must lie strictly inside
  the reals that round to it, (-1/2, 1/2) in quanta away from the edges handled by
  _edges; exact midpoints are thus never decided here. Where hi sits exactly on a
  midpoint, the sign of lo picks r0 (otherwise such elements, frequent in float64's deep
  subnormals where the grid is coarse, would never decide).
  """
  a = np.abs(hi)
  ea = (a.view(np.int64) >> 52) - 1023                      # floor(log2 a), a normal
  q = np.maximum(ea + (k - (f.p - 1)), f.qmin)              # exponent of f's quantum
  ginv = pow2(k - q)
  t = a * ginv
  r0 = np.rint(t)
  if np.isscalar(lo) and lo == 0:
    D = t - r0
  else:
    lt = np.where(hi < 0, -lo, lo) * ginv
    fl = np.floor(t)
    r0 = np.where((t - fl == 0.5) & (lt != 0), fl + (lt > 0), r0)
    D = (t - r0) + lt
  E = err * ginv
  ok = (np.abs(D) + E < 0.5) & (a > 0)
  value = r0 * pow2(q) if f.qmin >= -1022 else r0 * pow2(q >> 1) * pow2(q - (q >> 1))
  edge = np.flatnonzero((r0 == f.bottom) | (r0 == f.top) | (ea + k >= f.emax))
  if edge.size:
    pick = lambda v: v[edge] if np.ndim(v) else v
    ok[edge], value[edge] = _edges(pick(a), pick(ea), pick(k), pick(q), r0[edge], D[edge], E[edge], f)
  return np.copysign(value, hi), ok


def _edges(a, ea, k, q, r0, D, E, f):
  """decide's rules at the binade edges and near overflow. Outside the subnormal range
  the spacing halves below a power of two and doubles above it: the reals that round to
  r0 g reach 1/4 quantum below it at the bottom of a binade (r0 = 2^(p-1)) and a whole
  quantum above it at the top (r0 = 2^p). A candidate at 2^(emax+1) or beyond is an
  overflow: only the lower bound counts, and r0 g - g/4 is then max + ulp(max)/2, the
  IEEE overflow threshold (a tie there rounds to the even infinity)."""
  free = q > f.qmin
  top = free & (r0 == f.top)
  hu = np.where(top, 1.0, 0.5)
  hd = np.where(free & (r0 == f.bottom), 0.25, 0.5)
  above = ea + k + top > f.emax                              # r0 g >= 2^(emax+1)
  ok = (D - E > -hd) & ((D + E < hu) | above) & (a > 0)
  value = np.where(above, np.inf, r0 * pow2(q >> 1) * pow2(q - (q >> 1)))
  return ok, value
