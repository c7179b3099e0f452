"""The `tolerances:` table of ops.yaml, as functions: how far a float result may lie from
the reference evaluator's, and on which inputs that bound holds.

  ulp_distance(a, b)          elementwise distance in representable values of a's dtype
  tolerance(op, dtype, decomposed=False) -> (ulp, domain expression or None)
  in_domain(op, dtype, inputs, decomposed=False) -> bool mask
  within_tolerance(op, dtype, got, want, inputs, decomposed=False) -> bool mask

and how a message shows a float that differs: show_value(v, with_bits) (1.0009765625 (0x3c01)),
apart(got, want) (", 1 ulp apart"), bits(x) (the bit patterns).
"""
from __future__ import annotations
import math
import numpy as np
from tinyspec.dtypes import dtype as _dtype
from tinyspec.tables import tables
from tinyspec.intervals import is_float_type

_INT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def _ordinal(x: np.ndarray) -> np.ndarray:
  """Floats mapped onto integers in order, neighbours 1 apart, +0 and -0 both 0."""
  w = x.dtype.itemsize
  i = x.view(_INT[w]).astype(np.int64)
  return np.where(i < 0, -(i & np.int64((1 << (8 * w - 1)) - 1)), i)


def ulp_distance(a, b) -> np.ndarray:
  """How many representable values of the (float) dtype lie between a and b, elementwise:
  0 for equal values (+0 and -0 included) and for two NaNs, inf where one is NaN."""
  a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
  if a.dtype != b.dtype: raise TypeError(f"ulp_distance of {a.dtype} and {b.dtype}")
  oa, ob = _ordinal(np.array(a, order="C")), _ordinal(np.array(b, order="C"))   # (ascontiguousarray makes a ()-shaped array (1,))
  with np.errstate(over="ignore"):
    d = np.abs(oa.astype(np.float64) - ob.astype(np.float64))
    exact = np.abs(oa - ob).astype(np.float64)   # exact where it does not overflow
  d = np.where(d < 2.0 ** 52, exact, d)
  na, nb = np.isnan(a), np.isnan(b)
  return np.where(na & nb, 0.0, np.where(na | nb, np.inf, d))


def _as_f64(inputs: list) -> list[np.ndarray]:
  with np.errstate(invalid="ignore", over="ignore"):
    return list(np.broadcast_arrays(*[np.asarray(x).astype(np.float64) for x in inputs]))


def _normal_range(dt: str) -> tuple[float, float]:
  """The smallest and largest normal magnitudes of float dtype dt."""
  return _dtype(dt).normal_range


def _pick(v, dt: str):
  return v.get(dt) if isinstance(v, dict) else v


PROFILES = ("strict", "portable")


def tolerance(op: str, dt: str, decomposed: bool = False, profile: str = "strict") -> tuple[float, str | None]:
  """(ulp bound, domain expression or None) for op's float results of dtype dt;
  `decomposed` asks for the bound its decomposition meets; profile `portable` for the
  looser `portable_ulp` (never tighter than `ulp`)."""
  tol = tables().tolerances
  t = tol.get(op, tol.get("default", {"ulp": 0}))
  ulp, dom = _pick(t.get("ulp", 0), dt), _pick(t.get("domain"), dt)
  if ulp is None: raise KeyError(f"tolerances.{op} gives no ulp for {dt}")
  if profile == "portable": ulp = max(ulp, _pick(t.get("portable_ulp", ulp), dt) or 0)
  if decomposed and "decomposed_ulp" in t:
    ulp = max(_pick(t["decomposed_ulp"], dt), ulp if profile == "portable" else 0)
    dom = _pick(t.get("decomposed_domain", t.get("domain")), dt)
  return float(ulp), dom


def in_domain(op: str, dt: str, inputs: list, decomposed: bool = False) -> np.ndarray:
  """Mask of the elements (inputs broadcast together) inside the op's domain."""
  _, dom = tolerance(op, dt, decomposed)
  xs = _as_f64(inputs)
  if dom is None: return np.ones(xs[0].shape, bool)
  tiny, big = _normal_range(dt)
  def normal(x): return (np.abs(x) >= tiny) & (np.abs(x) <= big)
  names = [s.name for s in tables().ops[op].slots][:len(xs)]
  env = {"abs": np.abs, "log2": np.log2, "isfinite": np.isfinite, "trunc": np.trunc, "normal": normal, **dict(zip(names, xs))}
  with np.errstate(all="ignore"):
    m = eval(compile(dom, f"tolerances.{op}.domain", "eval"), {"__builtins__": {}}, env)  # noqa: S307 (trusted table)
  return np.broadcast_to(np.asarray(m, bool), xs[0].shape)


def within_tolerance(op: str, dt: str, got, want, inputs: list, decomposed: bool = False) -> np.ndarray:
  """Mask of the elements where `got` is acceptable against the reference `want`: within
  the ulp bound inside the domain, exactly equal wherever an operand is NaN or ±inf, and
  anything elsewhere outside the domain."""
  ulp, _ = tolerance(op, dt, decomposed)
  dist = ulp_distance(got, want)
  xs = _as_f64(inputs) if inputs else []
  special = np.zeros(dist.shape, bool)
  for x in xs: special |= ~np.isfinite(np.broadcast_to(x, dist.shape))
  inside = in_domain(op, dt, inputs, decomposed) if inputs else np.ones(dist.shape, bool)
  return np.where(special, dist == 0, ~inside | (dist <= ulp))


# ------------------------------------------------------------------ showing a float
def bits(x: np.ndarray) -> np.ndarray:
  """The bit patterns of a float array (as unsigned integers of its width)."""
  return np.array(x, order="C").view(np.dtype(f"uint{x.dtype.itemsize * 8}"))


def show_value(v, with_bits: bool = False) -> str:
  """A value as text; a float's shortest repr (-0.0 kept), with `with_bits` its bit pattern
  in hex too: 1.0009765625 (0x3c01)."""
  v = np.asarray(v)
  if is_float_type(v.dtype):
    f = float(v)
    text = ("-0.0" if math.copysign(1, f) < 0 else "0.0") if f == 0 else repr(f)
    return f"{text} (0x{int(bits(v.reshape(1))[0]):0{2 * v.dtype.itemsize}x})" if with_bits else text
  return str(v.item())


def apart(got, want) -> str:
  """`, N ulp apart` for two floats of one dtype (nothing where one is NaN: no distance)."""
  want = np.asarray(want)
  d = float(ulp_distance(np.asarray(got).astype(want.dtype).reshape(1), want.reshape(1))[0])
  if math.isinf(d): return ""
  return f", {int(d)} ulp apart" if d < 2.0 ** 53 else f", {d:.3g} ulp apart"
