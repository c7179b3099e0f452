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
from tinyspec.compiler.props import CompileError
from tinyspec.compiler.rewrite import Pat, Matcher, graph_rewrite


def _is_inlinable(f: UOp) -> bool:
  """A FUNCTION or CALL whose body (ops.yaml `kind: body`) is a function's TUPLE, not a kernel."""
  slots = tables().body_slots(f.op)
  return bool(slots) and len(f.src) > slots[0] and f.src[slots[0]].op == "TUPLE"


def substitute_params(body: UOp, args: tuple) -> UOp:
  """body with its own PARAM slot k replaced by args[k]; the bodies (ops.yaml `kind: body`) of nested
  FUNCTIONs and CALLs are left alone."""
  memo: dict[UOp, UOp] = {}
  stack = [(body, False)]
  while stack:
    u, done = stack.pop()
    if u in memo: continue
    if u.op == "PARAM":
      slot = u.arg["slot"]
      if slot >= len(args): raise CompileError("FUNCTION.param", f"PARAM slot {slot} has no argument", u)
      memo[u] = args[slot]; continue
    slots = tables().body_slots(u.op)   # a nested body keeps its own PARAMs
    kids = tuple(s for k, s in enumerate(u.src) if k not in slots) if slots else u.src
    if not done:
      stack.append((u, True))
      stack.extend((s, False) for s in reversed(kids) if s not in memo)
      continue
    new = tuple(memo[s] for s in kids)
    if slots:
      rest = iter(new)
      new = tuple(s if k in slots else next(rest) for k, s in enumerate(u.src))
    memo[u] = u if all(a is b for a, b in zip(new, u.src)) else u.replace(src=new)
  return memo[body]


def _inline(f: UOp) -> UOp:
  """The TUPLE a FUNCTION (or CALL with a TUPLE body) evaluates to."""
  return substitute_params(f.src[0], f.src[1:])


def _gettuple(x: UOp, t: UOp):
  if t.op == "TUPLE": return t.src[x.arg]
  if _is_inlinable(t): return _inline(t).src[x.arg]
  return None


RULES = Matcher([
  (Pat("GETTUPLE", (Pat.var("t"),), name="x"), _gettuple),
  # a tuple value used as a whole (a root, or an argument) is its TUPLE
  (Pat(tuple(op for op in tables().ops if tables().body_slots(op)), name="f"), lambda f: _inline(f) if _is_inlinable(f) else None),
])


def callify(roots: list[UOp]) -> list[UOp]:
  """Inline every FUNCTION/CALL-of-TUPLE under roots."""
  return graph_rewrite(list(roots), RULES)
