"""Symbolic shapes of a realize with a bound Variable (`Variable("i", 1, 10).bind(3)`).

tinygrad's tensor graph then holds dims that are UOps over the variable, and the variable
as bound: AFTER(var, STORE(var, CONST v)) (tinygrad's `UOp.bind`). The spec has no symbolic
shape at tensor level (a shape operand is a constant index vector; a symbolic size is a
kernel's PARAM), so such a dim is imported as the number tinygrad ran with: the dim with
every bound variable replaced by its value. A dim over an unbound variable has no number
and stays symbolic (the importer reports it).
"""
from __future__ import annotations


def bound_value(u) -> int | None:
  """The integer a dim u (an int, or a tinygrad UOp over bound Variables) is at the values
  they are bound to; None where u holds anything else."""
  if isinstance(u, int): return u
  if not any(x.is_bound_var for x in u.toposort()): return None
  try:
    free, values = u.unbind_all()
    v = free.sym_infer({var.expr: int(x) for var, x in values.items()})
  except Exception:   # noqa: BLE001 (an unbound variable, or not an integer expression: no number)
    return None
  return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def bound_dims(u) -> tuple[int, ...] | None:
  """UOp u's shape as integers, a symbolic dim at its bound value; None where a dim has no
  number (or u has no shape)."""
  try: dims = tuple(u.shape)
  except Exception: return None   # noqa: BLE001 (shapeless)
  out = tuple(bound_value(d) for d in dims)
  return None if None in out else out


def with_bound_params(fn):
  """FUNCTION fn with each variable PARAM of its body (a symbolic size: ALU address space)
  whose argument is a dim over bound variables replaced by that argument, as calling it
  does; fn itself where there is none. The body's dims over them then have numbers (their
  bound values). Nested FUNCTION and CALL bodies keep their own PARAMs."""
  body, args = fn.src[0], fn.src[1:]
  order = list(body.toposort(enter_calls=False))   # a nested FUNCTION's or CALL's body binds its own PARAMs
  subs = {p: args[p.arg.slot] for p in order if _is_variable_param(p) and 0 <= p.arg.slot < len(args)
          and bound_value(args[p.arg.slot]) is not None}
  if not subs: return fn
  new: dict = {}
  for v in order:
    if v in subs: new[v] = subs[v]
    else: new[v] = v.replace(src=tuple(new.get(s, s) for s in v.src)) if v.src else v
  return fn.replace(src=(new[body], *args))


def _is_variable_param(u) -> bool:
  a = u.arg
  return u.op.name == "PARAM" and getattr(a, "addrspace", None) is not None and a.addrspace.name == "ALU" and a.vmin_vmax is not None

