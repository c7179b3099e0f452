"""Which accumulator updates may be fused multiply-adds (spec/render.yaml `contract`).

A float REDUCE(ADD) of products, acc + a*b, fused into fma(a, b, acc), rounds once
instead of twice: within REDUCE's tolerance. It may not change which results are NaN or
infinite, and it would where a product overflows when rounded but not exactly (1e30 *
1e10 in float32: -inf + inf is NaN, -inf + 1e40 is -inf), or where a partial sum
crosses the largest finite value one way and not the other. So an update is fused only
where the operands' magnitudes prove neither can happen: then both ways add finite
products into finite sums, or meet the same infinities and NaNs of infinite or NaN
operands.

The proof is static where the operands' intervals give it (narrow integers converted to
float32). Where they do not, but an operand is read from a buffer the kernel does not
write, the bound may use the largest finite magnitude that buffer holds when the kernel
starts: the renderer then gives the kernel a fused variant and a `Guard` that the
runtime checks at each launch (one scan of those buffers) to pick between the two.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from functools import cached_property
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.props import props
from tinyspec.uop import toposort
from tinyspec.compiler.render.nodes import param_of


def finite_bound(u: UOp) -> float:
  """A bound on |v| for every finite value v of u (inf where none is known): its interval
  where that is finite, the finite range of its dtype, and through a CAST the bound of
  what it converts (float16 -> float32: 65504; a rounding cast may add half an ulp)."""
  D = _dt(props(u).dtype)
  mm = props(u).min_max
  b = max(abs(float(mm[0])), abs(float(mm[1]))) if mm and all(math.isfinite(float(x)) for x in mm) else math.inf
  if D.cls == "float":
    b = min(b, D.normal_range[1])
    if _converts(u): b = min(b, finite_bound(u.src[0]) * _widen(D))
  return b


def _converts(u: UOp) -> bool:
  if u.op != "CAST" or not u.src or not isinstance(props(u.src[0]).dtype, str): return False
  S = _dt(props(u.src[0]).dtype)
  return S.cls == "float" or S.is_int


def _widen(D) -> float:
  return 1 + 2.0 ** -D.mantissa     # a rounding conversion moves a value by at most half an ulp


@dataclass(frozen=True)
class Magnitude:
  """|v| <= this for every finite value v of an operand: the larger of `fixed` and, for
  each (slot, factor) of `scans`, factor x the largest finite magnitude in PARAM slot's
  buffer when the kernel starts; never more than `cap` (its static bound)."""
  cap: float
  fixed: float = 0.0
  scans: tuple = ()

  def at(self, largest: dict | None = None) -> float:
    """The bound, given each scanned slot's largest finite magnitude (None: static)."""
    if not self.scans or largest is None: return self.cap
    return min(self.cap, max([self.fixed] + [f * largest[s] for s, f in self.scans]))


def magnitude(u: UOp, scannable) -> Magnitude:
  """u's Magnitude; a float read (a LOAD, or an INDEX used as a value) of a PARAM whose
  slot is `scannable(slot)` (a buffer the kernel only reads) is bounded by a scan of it, a
  LOAD's alternative value by its own bound (a read out of range gives 0). An integer or
  bool read keeps its static bound (its interval: the dtype's range at most): the scan
  reads float bits, and a CAST above it adds the rounding of a wide integer."""
  cap = finite_bound(u)
  if u.op in ("LOAD", "INDEX") and _dt(props(u).dtype).cls == "float":
    p = param_of(u.src[0] if u.op == "LOAD" else u)
    if p.op == "PARAM" and len(p.src) != 3 and scannable(p.arg["slot"]):
      alt = max((finite_bound(s) for s in u.src[1:2]), default=0.0) if u.op == "LOAD" else 0.0
      return Magnitude(cap, alt, ((p.arg["slot"], 1.0),))
  elif _converts(u):
    m, g = magnitude(u.src[0], scannable), _widen(_dt(props(u).dtype))
    if m.scans: return Magnitude(min(cap, m.cap * g), m.fixed * g, tuple((s, f * g) for s, f in m.scans))
  return Magnitude(cap)


@dataclass(frozen=True)
class Update:
  """An accumulator update acc + t1 + t2 + ...: per addend, the Magnitudes of a product's
  two operands or of the addend itself; `count`: how many addends one result sums, at
  most, in any order and grouping."""
  dtype: str
  terms: tuple
  count: int

  @property
  def scans(self) -> set:
    return {s for t in self.terms for m in t for s, _ in m.scans}

  def cannot_overflow(self, largest: dict | None = None) -> bool:
    """Does no product, and no partial sum of `count` addends, rounded or not, leave the
    dtype's finite range (with the scanned buffers' magnitudes, or statically)?"""
    D = _dt(self.dtype)
    per = max(math.prod(m.at(largest) for m in t) for t in self.terms)
    drift = self.count * 2.0 ** -D.mantissa     # each rounded step may grow a partial sum by at most this factor, in all
    return drift < 1 and per * self.count * math.exp(2 * drift) < D.normal_range[1]


def update(terms: list, dt: str, reduce_terms: int, scannable=lambda slot: False) -> Update:
  """The Update of an accumulator whose REDUCE sums `reduce_terms` elements, each update
  adding `terms` (a MUL's operands are bounded apart)."""
  mags = tuple((magnitude(t.src[0], scannable), magnitude(t.src[1], scannable)) if t.op == "MUL" else (magnitude(t, scannable),)
               for t in terms)
  return Update(dt, mags, reduce_terms * len(terms))


@dataclass(frozen=True)
class Guard:
  """A kernel's fused variant `fused` runs where every update cannot overflow with the
  largest finite magnitudes its scanned buffers hold at launch; else the kernel itself."""
  fused: str
  updates: tuple

  @cached_property
  def scans(self) -> list:     # (asked at every launch)
    return sorted({s for u in self.updates for s in u.scans})

  def holds(self, largest: dict) -> bool:
    return all(u.cannot_overflow(largest) for u in self.updates)


def longest_reduce(sink: UOp) -> int:
  """The most elements any REDUCE of a kernel sums (the product of its ranges' largest sizes)."""
  n = 1
  for u in toposort(sink):
    if u.op == "REDUCE":
      n = max(n, math.prod(max(1, int(props(r.src[0]).min_max[1])) for r in u.src[1:] if r.op == "RANGE"))
  return n
