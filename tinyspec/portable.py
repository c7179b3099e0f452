"""The `portable` conformance profile, read from the tables: the results other than the
canonical one that a backend may give (spec/ops.yaml `decisions: ... allowed:`, whose
header describes the entries), and the looser accuracy (`tolerances: ... portable_ulp`).

  entries(op, arg)                      the allowed entries that apply to an op node
  variants()                            the names of the reference's alternative semantics
  variant_scope(name)                   {op: result dtypes or None} a variant applies to
  alternatives(op, arg, dt, operands, want, bounds)
        -> (bounds, [alternative arrays], [variant names])  for one result of op

The profile is judged per element (conformance/run/compare.py): an element passes when it is
within its bound of the canonical result or of one of the alternatives; a bound of inf
allows any value there, a bound in (0, 1) two equal values of either sign of zero.
Nothing here names an op: every fact comes from the tables.
"""
from __future__ import annotations
from functools import lru_cache
import numpy as np
from tinyspec.dtypes import DTYPES
from tinyspec.tables import tables
from tinyspec.intervals import EXTENDED_FLOATS, is_float_type

ZERO_SIGN = 0.5   # a bound that lets +0 and -0 (ulp distance 0) match and nothing else
WIDE_VARIANT = "wide-intermediates"    # float16/bfloat16 results read unrounded (refimpl/widen.py) ...
WIDE_DECISION = "half-intermediates"   # ... as this decision allows: its `ops` may stay wide


@lru_cache(maxsize=None)
def _all_entries() -> tuple:
  out = []
  for key, d in tables().decisions.items():
    for e in d.get("allowed") or ():
      out.append((key, e))
  return tuple(out)


def entries(op: str, arg=None) -> list[tuple[str, dict]]:
  """(decision, entry) pairs that apply to a node of op with arg (REDUCE: by arg.op)."""
  rop = arg.get("op") if isinstance(arg, dict) else None
  return [(k, e) for k, e in _all_entries() if op in e.get("ops", ()) and (e.get("reduce") is None or rop in e["reduce"])]


def _variant(result) -> str | None:
  return result.get("variant") if isinstance(result, dict) else None


@lru_cache(maxsize=None)
def variants() -> frozenset:
  return frozenset(v for _, e in _all_entries() for r in e.get("results", ()) if (v := _variant(r)))


@lru_cache(maxsize=None)
def variant_scope(name: str) -> dict:
  """op -> the result dtypes (a frozenset, or None for all) the variant applies to."""
  out: dict = {}
  for _, e in _all_entries():
    if any(_variant(r) == name for r in e.get("results", ())):
      for op in e.get("ops", ()): out[op] = frozenset(e["dtypes"]) if e.get("dtypes") else None
  return out


def applies(name: str, op: str, dt) -> bool:
  scope = variant_scope(name)
  if op not in scope: return False
  return scope[op] is None or dt in scope[op]


# ------------------------------------------------------------------ where-expressions
def _as_math(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x)
  return x.astype(np.float32) if x.dtype in EXTENDED_FLOATS.values() else x


def _fits(dt: str):
  """fits(x): x (a float array: a truncated value) is a value of dtype dt; integer and
  bool arrays always fit (their casts wrap by decision, not by choice)."""
  d = DTYPES[dt]
  def fits(x):
    x = np.asarray(x)
    if d.cls == "float" or x.dtype.kind != "f": return np.ones(np.shape(x), bool)
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
      return np.isfinite(x) & (x >= float(d.min)) & (x <= float(d.max))
  return fits


def where_mask(e: dict, op: str, dt: str, operands: list, shape) -> np.ndarray:
  """The elements an entry covers: its `where` over the op's slot names (and, for a
  reduction, any covered element of the reduced ones)."""
  expr = e.get("where")
  if expr is None: return np.ones(shape, bool)
  names = [s.name for s in tables().ops[op].slots][:len(operands)]
  d = DTYPES[dt]
  env = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "abs": np.abs, "trunc": np.trunc,
         "width": 8 * d.itemsize, "dmin": d.min, "dmax": d.max, "fits": _fits(dt),
         "isfloat": lambda x: np.full(np.shape(x), is_float_type(np.asarray(x).dtype))}
  env.update({n: _as_math(x) for n, x in zip(names, operands)})
  with np.errstate(all="ignore"):
    m = np.asarray(eval(compile(expr, f"allowed.where of {op}", "eval"), {"__builtins__": {}}, env), bool)  # noqa: S307 (trusted table)
  return m


def alternatives(op: str, arg, dt: str, operands: list, want, bounds, reduced_axes: tuple = ()):
  """For one result of op (dtype dt) computed from `operands` (the values of its value
  sources, broadcast to the result's shape, or for a reduction the reduced operand with
  `reduced_axes`) whose canonical value is `want` with strict bounds `bounds` (a number
  or an array): (portable bounds array, [alternative arrays], [variant names]). The
  variants' results are the caller's to compute (they are whole-graph evaluations)."""
  want = np.asarray(want)
  b = np.array(np.broadcast_to(np.asarray(bounds, np.float64), want.shape))
  alts, names = [], []
  seen = {dt} | {np.asarray(x).dtype.name for x in operands}   # a comparison's entry names its operands' dtypes
  for _, e in entries(op, arg):
    if e.get("dtypes") and not seen & set(e["dtypes"]): continue
    try:
      mask = where_mask(e, op, dt, operands, want.shape)
      if reduced_axes: mask = np.logical_or.reduce(mask, axis=reduced_axes, keepdims=True) if mask.ndim else mask
      mask = np.broadcast_to(mask, want.shape)
    except (ValueError, TypeError, IndexError, NameError):   # operands that do not line up with the result (or are missing): the whole result
      mask = np.ones(want.shape, bool)
    if not mask.any() and e.get("where") is not None: continue
    slots = [s.name for s in tables().ops[op].slots][:len(operands)]
    for r in e.get("results", ()):
      v = _variant(r)
      if v is not None:
        if v not in names: names.append(v)
      elif r == "any": b[mask] = np.inf
      elif r == "zero": b[mask & (want == 0) & (b < ZERO_SIGN)] = ZERO_SIGN
      elif r == "nan":
        if is_float_type(want.dtype): alts.append(np.where(mask, np.asarray(np.nan, want.dtype), want))
      elif r in slots:
        x = np.asarray(operands[slots.index(r)])
        try: alts.append(np.where(mask, np.broadcast_to(x, want.shape).astype(want.dtype), want))
        except ValueError: pass
  return b, alts, names
