"""A node's derived properties: the one derivation, spec/derived.yaml's rules run over the
sources' properties.

  View                    a node as the rules see it: op, arg, sources' Views, and its
                          dtype, shape, device, addrspace, min_max, axis (and `value`, the
                          constant an index node folds to)
  derive_into(v, od, src, level)   sets v's properties by op `od`'s compiled rules (one call,
                          `Op.derive_all`) and folds an index constant by its `fold:` key;
                          raises rules.RuleFail where a rule refuses the node
  props(u)                a UOp's View, derived incrementally: each node below u that has none
                          yet costs one derive_into over its sources' Views (cached on the UOp)

The validator (tinyspec/validate.py) checks a node's rules (arity, arg schema, level,
slots, op checks, declared dtype/shape) and derives its properties through derive_into;
props(u) derives without those checks, for graphs that are valid by construction (a
compiler stage's output is validated as a whole after the stage). `UOp.props` is props.
The level a node is used at reaches the rules, but no derived.yaml rule's value depends
on it (only `call_axis` reads it, to hand it to the body's rules), so props(u) derives at
kernel level whatever the graph's level.
"""
from __future__ import annotations
from tinyspec.tables import tables, PROPS
from tinyspec.rules import RuleFail
from tinyspec.diagnostics import Diagnostic


class View:
  """A node as the rules see it: its inputs and its derived properties."""
  __slots__ = ("index", "op", "arg", "src", "dtype", "shape", "device", "addrspace", "min_max", "axis", "value")

  def __init__(self, index, op, arg, src):
    self.index, self.op, self.arg, self.src = index, op, arg, src
    self.dtype = self.shape = self.device = self.addrspace = self.min_max = self.axis = self.value = None

  @property
  def slot(self): return self.arg["slot"]

  def props(self) -> dict:
    return {p: getattr(self, p) for p in PROPS}

  def __repr__(self):
    return f"<node {self.index} {self.op} {self.dtype} {self.shape}>"


class DerivationError(ValueError):
  """A node whose properties cannot be derived (or, from the validator's derive_uop, that
  breaks a rule); `diagnostics` say which rules it breaks, `node` is the UOp when one
  node is to blame."""
  def __init__(self, diagnostics: list[Diagnostic], node=None):
    super().__init__("invalid graph:\n" + "\n".join(d.format() for d in diagnostics[:20]))
    self.diagnostics, self.node = diagnostics, node


# ------------------------------------------------------------------ constant folding
# Shape operands must be constants: an `index` node of an op with a `fold:` key in ops.yaml
# carries the dims it holds in View.value (read by shape_value()).
def _fold_value(arg, src): return arg["value"]
def _fold_values(arg, src): return tuple(arg["values"])
def _fold_stack(arg, src):
  if all(s.value is not None and type(s.value) is not tuple for s in src): return tuple(s.value for s in src)
  return None


FOLDS = {"value": _fold_value, "values": _fold_values, "stack": _fold_stack}


def fold_value(fold: str | None, arg, src):
  """The constant an `index` node folds to, by its op's `fold:` form (ops.yaml): arg.value,
  the tuple arg.values, or the tuple of its sources' folded scalars; None when the op does
  not fold or a source is not constant."""
  return None if fold is None else FOLDS[fold](arg, src)


# ------------------------------------------------------------------ the derivation
def derive_into(v: View, derive, fold, src: list, level: str) -> View:
  """Set v's properties (v.op, v.arg, v.src set): `derive` is the op's `derive_all` (its six
  derived.yaml rules as one function), `fold` its FOLDS entry or None. Raises RuleFail
  where a rule refuses the node."""
  v.dtype, v.shape, v.device, v.addrspace, v.min_max, v.axis = derive(src, v.arg, v.op, level, v)
  if fold is not None and v.dtype == "index": v.value = fold(v.arg, src)
  return v


def props(u) -> View:
  """The View of UOp u (cached in u._props), derived from its sources' Views; only nodes
  without one are derived, each once, sources first (iterative). Raises DerivationError
  naming the node, its op and the rule when an op is unknown or a derived.yaml rule
  refuses a node; nothing is stored for that node or those above it."""
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


def _derive(x, ops) -> View:
  od = ops.get(x.op)
  if od is None: raise _refusal(x, "graph.unknown_op", f"unknown op {x.op!r}")
  src = [s._props for s in x.src]
  try: return derive_into(View(-1, x.op, x.arg, src), od.derive_all, FOLDS[od.fold] if od.fold else None, src, "kernel")
  except RuleFail as e: raise _refusal(x, e.rule, f"{x.op}: {e.msg}") from None


def _refusal(x, rule: str, msg: str) -> DerivationError:
  """The error naming node x (the UOp, kept on the error), its op (in the message: a UOp
  has no index to print) and the rule."""
  return DerivationError([Diagnostic("<uop>", None, x.op, rule, msg)], x)
