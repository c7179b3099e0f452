"""Derived properties of UOps built one at a time, checked node by node.

`UOp.props` (tinyspec.uop) re-validates everything below a node the first time it is
asked, which is right for a loaded graph but quadratic for a front end that asks after
every op of a long chain. `derive(u)` instead checks only the nodes below u that have no
properties yet, each against its sources' cached Views, and stores the result in the
UOp's `_props`, so building an n-op chain costs O(n).

Each node goes through the validator's steps, in the validator's order, using the same
table objects (arity, arg schema, source slots, level, op checks, derived properties);
tests/test_tensor_derive.py holds the two to the same answers. Front-end graphs are
tensor-level programs, so the level of every node is "tensor".
"""
from __future__ import annotations
from tinyspec.tables import tables
from tinyspec.rules import RuleFail
from tinyspec.validate import View, _arg_cache, _slot_plan

LEVEL = "tensor"


class GraphError(ValueError):
  """A node the front end built breaks a rule of the tables."""
  def __init__(self, op: str, rule: str, msg: str):
    super().__init__(f"{op}: {msg} [{rule}]")
    self.op, self.rule, self.msg = op, rule, msg


def derive(u) -> View:
  """The View (dtype, shape, device, addrspace, min_max, axis) of u; raises GraphError."""
  if u._props is not None: return u._props
  if all(s._props is not None for s in u.src):   # the common case: one new node
    u._props = check_node(u)
    return u._props
  # iterative post-order over the nodes that still lack properties
  stack, order, seen = [(u, False)], [], set()
  while stack:
    x, done = stack.pop()
    if done: order.append(x); continue
    if id(x) in seen or x._props is not None: continue
    seen.add(id(x))
    stack.append((x, True))
    stack.extend((s, False) for s in x.src if s._props is None and id(s) not in seen)
  for x in order:
    if x._props is None: x._props = check_node(x)
  return u._props


def check_node(u) -> View:
  """Check one UOp whose sources already have Views; return its View."""
  name, arg = u.op, u.arg
  od = tables().ops.get(name)
  if od is None: raise GraphError(name, "graph.unknown_op", f"unknown op {name!r}")
  ns = len(u.src)
  if ns < od.min_src or ns > od.max_src:
    raise GraphError(name, "graph.arity", f"{name} takes {od.arity_text()}, got {ns} source{'s' if ns != 1 else ''}")
  err = _arg_cache.errors(od, arg)
  if err is not None: raise GraphError(name, "arg.schema", err)
  if LEVEL not in od.levels:
    raise GraphError(name, "level.op", f"{name} may appear at level {', '.join(od.levels)}, not in a {LEVEL} graph")
  src = [s._props for s in u.src]
  _check_slots(od, name, src)
  v = View(None, name, arg, src)
  for chk in od.checks:
    try:
      good = chk.fn(src, arg, name, LEVEL, v, None, None, None, None, None)
    except RuleFail as e: raise GraphError(name, e.rule, e.msg) from None
    except Exception as e: raise GraphError(name, chk.rule, f"{chk.msg} ({type(e).__name__}: {e})") from None
    if not good: raise GraphError(name, chk.rule, chk.msg)
  try:
    f_dt, f_sh, f_dev, f_as, f_mm, f_ax = od.derive
    v.dtype = dt = f_dt(src, arg, name, LEVEL, v, None, None, None, None, None)
    v.shape = sh = f_sh(src, arg, name, LEVEL, v, dt, None, None, None, None)
    v.device = dev = f_dev(src, arg, name, LEVEL, v, dt, sh, None, None, None)
    v.addrspace = asp = f_as(src, arg, name, LEVEL, v, dt, sh, dev, None, None)
    v.min_max = mm = f_mm(src, arg, name, LEVEL, v, dt, sh, dev, asp, None)
    v.axis = f_ax(src, arg, name, LEVEL, v, dt, sh, dev, asp, mm)
  except RuleFail as e: raise GraphError(name, e.rule, e.msg) from None
  if dt == "index":   # constant folding of shape operands, as the validator does
    if name == "CONST": v.value = arg["value"]
    elif name == "VCONST": v.value = tuple(arg["values"])
    elif name == "STACK" and all(s.value is not None and not isinstance(s.value, tuple) for s in src): v.value = tuple(s.value for s in src)
  return v


def _check_slots(od, name, src) -> None:
  by_name: dict = {}
  plan = _slot_plan(od)
  for k, s in enumerate(src):
    sname, kind, allowed, same = plan[k] if k < len(plan) else plan[-1]
    by_name.setdefault(sname, s)
    if kind == "any": continue
    if kind in ("value", "shape") and (s.dtype == "void" or isinstance(s.dtype, tuple)):
      raise GraphError(name, "slot.kind", f"source {k} ({sname}) must be a value, {s.op} is {'void' if s.dtype == 'void' else 'a tuple'}")
    if kind == "range" and s.op != "RANGE":
      raise GraphError(name, "slot.kind", f"source {k} ({sname}) must be a RANGE, not {s.op}")
    if kind == "void" and s.dtype != "void":
      raise GraphError(name, "slot.kind", f"source {k} ({sname}) must be a side effect (void), not {s.op} of dtype {s.dtype}")
    if kind == "shape" and (s.dtype != "index" or len(s.shape) > 1):
      raise GraphError(name, "shape.operand", f"source {k} ({sname}) must be an index shape operand, {s.op} is {s.dtype} with shape {s.shape}")
    if allowed is not None and s.dtype not in allowed:
      raise GraphError(name, "dtype.allowed", f"source {k} ({sname}) has dtype {s.dtype}, {name} takes {od.slot_for(k).dtype}")
    if same is not None and (other := by_name.get(same)) is not None and other.dtype != s.dtype:
      raise GraphError(name, "dtype.match", f"source {k} ({sname}) has dtype {s.dtype}, it must match {same} ({other.dtype})")
