"""Stage 1, callify: the tensor program becomes one stateless function.

FUNCTION (and CALL with a TUPLE body) is inlined by substituting each PARAM k of its
body with argument k; GETTUPLE of an inlined tuple picks the element. Nested bodies keep
their own PARAMs (a body's PARAMs are those `params_of` sees: it does not enter the body
of a nested FUNCTION or CALL). CALLs of kernels (SINK, PROGRAM bodies) stay: they are
already compiled units. The result has no FUNCTION, TUPLE or GETTUPLE left except under
kernel CALLs.
"""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.tables import tables
from tinyspec.compiler.errors import CompileError
from tinyspec.rewrite import Pat, Rule, RuleSet, graph_rewrite


def _is_inlinable(f: UOp) -> bool:
  """A FUNCTION or CALL whose body (ops.yaml `kind: body`) is a function's TUPLE, not a kernel."""
  slots = tables().body_slots(f.op)
  return bool(slots) and len(f.src) > slots[0] and f.src[slots[0]].op == "TUPLE"


def _param_to_arg(x: UOp, ctx: tuple):
  """PARAM slot k of the body -> argument k."""
  slot = x.arg["slot"]
  if slot >= len(ctx): raise CompileError("FUNCTION.param", f"PARAM slot {slot} has no argument", x)
  return ctx[slot]


BIND = RuleSet([Rule("bind_param", Pat("PARAM", name="x"), _param_to_arg)], "bind")


def _outside_bodies(u: UOp, k: int) -> bool:
  """Is source k of u outside a nested body (ops.yaml `kind: body`, which keeps its own PARAMs)?"""
  return k not in tables().body_slots(u.op)


def substitute_params(body: UOp, args: tuple) -> UOp:
  """body with its own PARAM slot k replaced by args[k]; the bodies (ops.yaml `kind: body`) of nested
  FUNCTIONs and CALLs are left alone."""
  return graph_rewrite(body, BIND, tuple(args), top_down=True, once=True, enter=_outside_bodies)


def _inline(f: UOp) -> UOp:
  """The TUPLE a FUNCTION (or CALL with a TUPLE body) evaluates to."""
  return substitute_params(f.src[0], f.src[1:])


def _gettuple(x: UOp, t: UOp):
  if t.op == "TUPLE": return t.src[x.arg]
  if _is_inlinable(t): return _inline(t).src[x.arg]
  return None


def _call_of_tuple(f: UOp):
  """A tuple value used as a whole (a root, or an argument) is its TUPLE."""
  return _inline(f) if _is_inlinable(f) else None


RULES = RuleSet([
  Rule("gettuple", Pat("GETTUPLE", (Pat.var("t"),), name="x"), _gettuple),
  Rule("inline_call", Pat(tuple(op for op in tables().ops if tables().body_slots(op)), name="f"), _call_of_tuple),
], "callify")


def callify(roots: list[UOp]) -> list[UOp]:
  """Inline every FUNCTION/CALL-of-TUPLE under roots."""
  return graph_rewrite(list(roots), RULES)
