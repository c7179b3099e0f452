"""What the renderer asks about a node of a linearized kernel: the storage an address is
into, the address space of a buffer, whether an address is read, and what the decide
stage (compiler/passes/decide.py) tagged it with."""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.tables import tables
from tinyspec.frozen import thaw
from tinyspec.props import props

WRITES = tables().write_ops   # STORE, ATOMICADD (ops.yaml `storage: writes`)
DECISIONS = ("contract", "stream")   # the tag keys the decide stage sets (and only it)


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



def value_uses(instrs) -> dict[UOp, bool]:
  """INDEX/AFTER node -> is it read as a value (used by something other than a STORE's or a
  LOAD's address, an IF/ENDIF, or an AFTER's buffer)?"""
  uses: dict[UOp, bool] = {}
  for u in instrs:
    for k, s in enumerate(u.src):
      if s.op not in ("INDEX", "AFTER"): continue
      as_addr = (u.op in WRITES and k == 0) or (u.op == "LOAD" and k == 0 and s.op == "INDEX") or u.op in ("IF", "ENDIF") or (u.op == "AFTER" and k == 0)
      uses[s] = uses.get(s, False) or not as_addr
  return uses


def decision(u: UOp, key: str):
  """What the decide stage tagged u with under `key` (None: nothing)."""
  t = thaw(u.tag) if u.tag is not None else None
  return t.get(key) if isinstance(t, dict) else None


def update_terms(u: UOp) -> list[UOp]:
  """The addends of an accumulator update (an ADD tree of one shape and dtype: UNROLL sums
  its lanes before adding them to the accumulator)."""
  terms, stack = [], [u]
  while stack:
    x = stack.pop()
    if x.op == u.op and props(x).shape == props(u).shape and props(x).dtype == props(u).dtype: stack.extend(reversed(x.src))
    else: terms.append(x)
  return terms
