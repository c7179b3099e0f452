"""Derived properties of UOps the compiler builds, computed incrementally.

`UOp.props` validates the whole subgraph below a node each time it meets a node with no
properties yet; the compiler builds nodes one at a time (the simplifier asks for the
min_max of every index expression it creates), so that would be quadratic. `props(u)`
computes a node's View from its sources' Views with the same compiled derive rules
(spec/derived.yaml via tinyspec.tables) and caches it on the UOp, so each node costs one
rule evaluation. Op checks are not run here: every stage's output is validated as a
whole by tinyspec.validate.
"""
from __future__ import annotations
from tinyspec.tables import tables
from tinyspec.validate import View, fold_value
from tinyspec.uop import UOp
from tinyspec.rules import RuleFail
from tinyspec.compiler.errors import CompileError
from tinyspec.dtypes import dtype as _dt


def props(u: UOp) -> View:
  """The View (dtype, shape, device, addrspace, min_max, axis, value) of u."""
  v = u._props
  if v is not None: return v
  ops = tables().ops
  stack = [u]
  while stack:
    x = stack[-1]
    if x._props is not None: stack.pop(); continue
    missing = [s for s in x.src if s._props is None]
    if missing: stack.extend(missing); continue
    stack.pop()
    x._props = _derive(x, ops)
  return u._props


def _derive(x: UOp, ops) -> View:
  od = ops.get(x.op)
  if od is None: raise CompileError("graph.unknown_op", f"unknown op {x.op!r}", x)
  src = [s._props for s in x.src]
  v = View(-1, x.op, x.arg, src)
  try:
    f_dt, f_sh, f_dev, f_as, f_mm, f_ax = od.derive
    lvl = "kernel"
    v.dtype = dt = f_dt(src, x.arg, x.op, lvl, v, None, None, None, None, None)
    v.shape = sh = f_sh(src, x.arg, x.op, lvl, v, dt, None, None, None, None)
    v.device = dev = f_dev(src, x.arg, x.op, lvl, v, dt, sh, None, None, None)
    v.addrspace = asp = f_as(src, x.arg, x.op, lvl, v, dt, sh, dev, None, None)
    v.min_max = mm = f_mm(src, x.arg, x.op, lvl, v, dt, sh, dev, asp, None)
    v.axis = f_ax(src, x.arg, x.op, lvl, v, dt, sh, dev, asp, mm)
  except RuleFail as e:
    raise CompileError(e.rule, f"{x.op}: {e.msg}", x) from None
  if dt == "index": v.value = fold_value(od.fold, x.arg, src)   # shape operands fold by the op's `fold:`, as in the validator
  return v


def dtype_of(u: UOp): return props(u).dtype
def shape_of(u: UOp): return props(u).shape
def min_max(u: UOp): return props(u).min_max


# ------------------------------------------------------------------ small constructors
class LiteralRange(ValueError):
  """The compiler tried to make an integer constant its dtype cannot hold: a bug of the
  stage that asked (a rewrite must reduce its constants into the dtype or decline)."""


def const(value, dtype: str) -> UOp:
  """A CONST node; Python bools/ints/floats are normalised to the dtype's kind so that
  equal constants are the same hash-consed node. An integer outside the dtype's range
  raises LiteralRange: no stage may write a literal the type cannot hold (C would
  truncate it silently)."""
  d = _dt(dtype)
  if d.cls == "bool": value = bool(value)
  elif d.cls == "float":
    if isinstance(value, str): pass
    else:
      value = float(value)
      if value != value: value = "nan"
      elif value in (float("inf"), float("-inf")): value = "inf" if value > 0 else "-inf"
  else:
    value = int(value)
    if not d.min <= value <= d.max: raise LiteralRange(f"the constant {value} is not a value of {dtype} [{d.min}, {d.max}]")
  return UOp("CONST", (), {"value": value, "dtype": dtype})


def shape_operand(dims) -> UOp:
  """The index VCONST that spells a shape."""
  return UOp("VCONST", (), {"values": [int(d) for d in dims], "dtype": "index"})


def const_value(u: UOp):
  """The value of a CONST node, or None."""
  if u.op != "CONST": return None
  return u.arg["value"]
