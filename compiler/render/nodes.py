"""What the renderer asks about a node of a linearized kernel: the storage an address is
into, and the address space of a buffer."""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.tables import tables
from tinyspec.compiler.props import props


def base_of(u: UOp) -> UOp:
  while u.op == "AFTER": u = u.src[0]
  return u


def is_reg(u: UOp) -> bool:
  u = base_of(u)
  return u.op == "BUFFER" and props(u).addrspace == "REG"


def reads_acc(u: UOp, acc: UOp) -> bool:
  """Is u the running value of REG accumulator acc (a read of it)?"""
  if base_of(u) is acc: return True
  return u.op in ("LOAD", "INDEX") and bool(u.src) and base_of(u.src[0]) is acc


def is_local(u: UOp) -> bool:
  return u.op == "BUFFER" and props(u).addrspace == "LOCAL"


def is_local_access(u: UOp) -> bool:
  """An element of a LOCAL buffer (INDEX of one, through AFTERs)."""
  u = base_of(u)
  return u.op == "INDEX" and is_local(base_of(u.src[0]))


def param_of(u: UOp) -> UOp:
  """The PARAM (or other base) an address is into: through INDEX and AFTER (ops.yaml
  `storage: through`)."""
  while u.op in tables().through_ops: u = u.src[0]
  return u


def numel(shape) -> int:
  n = 1
  for d in shape: n *= d
  return n

