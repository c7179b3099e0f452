"""Driving the tiers: broadcasting, chunking, the cascade tier 1 -> tier 2 -> exact.

Every element is decided independently of the others (no tier looks at its
neighbours), so a result does not depend on the array it came in, its shape, or the
chunking: computing an array at once or element by element gives the same bits.
"""
from __future__ import annotations
from collections import Counter
import math
import numpy as np
from .rounding import Format, decide, get_format

# elements per pass: keeps the temporaries of a tier (32 KiB each) in cache (measured on
# 33K float32 arguments: 2^12 two to three times faster than 2^14)
CHUNK = 1 << 12

STATS: Counter = Counter()   # (function, stage) -> elements decided there; see stats()


def stats() -> dict:
  """How many elements each stage decided since the last reset_stats(): keys are
  (function, "tier1" | "tier2" | "exact")."""
  return dict(STATS)


def reset_stats() -> None:
  STATS.clear()


def elementwise(kernel):
  """Wrap kernel(*flat float64 arrays, Format) -> flat float64 into the public form:
  any array-likes, broadcast together, any shape (0-d included), a format name, no
  floating-point warnings escaping."""
  def wrapper(*args, fmt):
    f = get_format(fmt)
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64) for a in args])
    shape = arrays[0].shape
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    with np.errstate(all="ignore"):
      out = kernel(*flat, f)
    return out.reshape(shape)
  wrapper.__name__, wrapper.__doc__ = kernel.__name__, kernel.__doc__
  return wrapper


def tier(approx):
  """The tier of an approximation approx(*args) -> (hi, lo, k, err): the exact value is
  within err of (hi + lo) 2^k, err in the units of hi (see rounding.decide)."""
  def run(*args):
    *xs, f = args
    hi, lo, k, err = approx(*xs)
    return decide(hi, lo, k, err, f)
  run.__name__ = f"tier_{approx.__name__}"
  return run


def solve(name: str, args: list[np.ndarray], f: Format, tiers, fallback) -> np.ndarray:
  """The correctly rounded values for the elements of args (flat, equal length).

  Each tier is tier(*args, f) -> (rounded, ok). Tier 1 (plain float64) is skipped for
  float64, whose results it cannot decide, and for the elements whose first argument it
  was not written for (see fits_tier1). The elements no tier decided go one by one to
  fallback(*python floats, f), the exact mpmath evaluation."""
  stages = list(zip(("tier1", "tier2"), tiers))[0 if f.p < 53 else 1:]
  out = np.empty(args[0].size)
  for start in range(0, out.size, CHUNK):
    part = [a[start:start + CHUNK] for a in args]
    out[start:start + CHUNK] = _solve_chunk(name, part, f, stages, fallback)
  return out


def fits_tier1(x):
  """Tier 1 assumes arguments of at most 24 significant bits below 2^128 in magnitude
  (every value of float32, bfloat16, float16): its products with short table values
  are then exact and its Payne-Hanek window short. Anything else (out of the callers'
  contract) is still correctly rounded, by tier 2."""
  return ((x.view(np.uint64) & np.uint64((1 << 29) - 1)) == 0) & (np.abs(x) < TWO128)


TWO128 = math.ldexp(1.0, 128)


def _solve_chunk(name, part, f, stages, fallback):
  """Each stage runs on the elements the previous ones left (the first on the whole
  chunk, without gathering, unless some do not fit tier 1); the rest go to the
  fallback."""
  n = part[0].size
  res, todo = np.empty(n), np.arange(n)
  for stage, run in stages:
    skipped = np.empty(0, dtype=todo.dtype)
    if stage == "tier1":
      fits = fits_tier1(part[0])
      if not fits.all(): todo, skipped = np.flatnonzero(fits), np.flatnonzero(~fits)
    if todo.size == n:
      res, ok = run(*part, f)
      todo = np.flatnonzero(~ok)
    else:
      rounded, ok = run(*[a[todo] for a in part], f)
      res[todo[ok]] = rounded[ok]
      todo = todo[~ok]
    STATS[name, stage] += int(np.count_nonzero(ok))
    todo = np.concatenate([todo, skipped])
    if not todo.size: break
  for i in todo:
    res[i] = fallback(*[float(a[i]) for a in part], f)
  STATS[name, "exact"] += int(todo.size)
  return res


def by_case(ordinary, fn, special, *args):
  """fn(*args) where ordinary, special(*args) elsewhere, each computed only on its own
  elements (no gather nor scatter when every element is ordinary, the common case)."""
  if ordinary.all(): return fn(*args)
  out = np.empty(args[0].shape)
  out[~ordinary] = special(*[a[~ordinary] for a in args])
  if ordinary.any(): out[ordinary] = fn(*[a[ordinary] for a in args])
  return out
