"""Derived properties of UOps built one at a time, checked node by node.

`UOp.props` (tinyspec.uop) re-validates everything below a node the first time it is
asked, which is right for a loaded graph but quadratic for a front end that asks after
every op of a long chain. `derive(u)` instead checks only the nodes below u that have no
properties yet, each against its sources' cached Views, and stores the result in the
UOp's `_props`, so building an n-op chain costs O(n).

Each node goes through the validator's steps, in the validator's order, using the
validator's own per-op pieces (arity, arg schema, level, source slots, op checks, derived
properties); tests/test_tensor.py holds the two to the same answers. Front-end graphs are
tensor-level programs, so the level of every node is "tensor".
"""
from __future__ import annotations
from tinyspec.tables import tables
from tinyspec.rules import RuleFail
from tinyspec.validate import View, _BIT, _arg_cache, _op_infos, _run_checks, _slot_errors

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
  """Check one UOp whose sources already have Views; return its View. The steps and their
  order are the validator's main loop, run on the validator's per-op info."""
  name, arg = u.op, u.arg
  info = _op_infos(tables(), _arg_cache).get(name)
  if info is None: raise GraphError(name, "graph.unknown_op", f"unknown op {name!r}")
  ns = len(u.src)
  if ns < info.min_src or ns > info.max_src:
    raise GraphError(name, "graph.arity", f"{name} takes {info.od.arity_text()}, got {ns} source{'s' if ns != 1 else ''}")
  err = info.null_arg_err if arg is None else _arg_cache.errors(info.od, arg)
  if err is not None: raise GraphError(name, "arg.schema", err)
  if _BIT[LEVEL] & info.off_levels:
    raise GraphError(name, "level.op", f"{name} may appear at level {', '.join(info.od.levels)}, not in a {LEVEL} graph")
  src = [s._props for s in u.src]
  if not info.slots_ok(src):
    for rule, msg in _slot_errors(info.od, name, src): raise GraphError(name, rule, msg)
  v = View(None, name, arg, src)
  if info.checks:   # the and-ed checks first, as the validator does; one by one only on a no
    try: good = info.checks_all(src, arg, name, LEVEL, v, None, None, None, None, None)
    except Exception: good = False
  if info.checks and not good:
    failed = []
    _run_checks(info.checks, src, arg, name, LEVEL, v, None, lambda i, op, rule, msg: failed.append((rule, msg)))
    if failed: raise GraphError(name, *failed[0])
  try:
    v.dtype, v.shape, v.device, v.addrspace, v.min_max, v.axis = dt, _, _, _, _, _ = info.derive(src, arg, name, LEVEL, v)
  except RuleFail as e: raise GraphError(name, e.rule, e.msg) from None
  if dt == "index":   # constant folding of shape operands, as the validator does
    if name == "CONST": v.value = arg["value"]
    elif name == "VCONST": v.value = tuple(arg["values"])
    elif name == "STACK" and all(s.value is not None and not isinstance(s.value, tuple) for s in src): v.value = tuple(s.value for s in src)
  return v
