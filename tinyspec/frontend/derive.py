"""Derived properties of UOps built one at a time, checked node by node.

The front end asks for the properties of every node it builds, right away, so that a bad
reshape fails at the line that wrote it. `derive(u)` is the validator's incremental
derivation (tinyspec.validate.derive_uop): only nodes without properties are checked,
each against its sources' cached Views with the validator's own per-node pipeline, so
building an n-op chain costs O(n). Front-end graphs are tensor-level programs.
"""
from __future__ import annotations
from tinyspec.props import View, DerivationError
from tinyspec.validate import derive_uop

LEVEL = "tensor"


class GraphError(ValueError):
  """A node the front end built breaks a rule of the tables."""
  def __init__(self, op: str, rule: str, msg: str):
    super().__init__(f"{op}: {msg} [{rule}]")
    self.op, self.rule, self.msg = op, rule, msg


def derive(u) -> View:
  """The View (dtype, shape, device, addrspace, min_max, axis) of u; raises GraphError
  naming the first rule a new node breaks."""
  if u._checked: return u._props
  try:
    return derive_uop(u, level=LEVEL)
  except DerivationError as e:
    d = e.diagnostics[0]
    raise GraphError(d.op or u.op, d.rule, d.message) from None
