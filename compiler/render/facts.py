"""What the renderer knows about a linearized kernel before it prints a line: one pass over
the LINEAR, then read-only while the kernel is printed (the launch layout, the memory
accesses and the instructions all read these facts; none of them writes them)."""
from __future__ import annotations
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.props import props
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.render.nodes import WRITES, base_of, decision, is_local, is_reg, param_of, value_uses


@dataclass(frozen=True)
class KernelFacts:
  instrs: tuple                  # the LINEAR's instructions, in order
  params: Mapping                # PARAM -> its slot (0..n-1)
  by_slot: tuple                 # slot -> PARAM
  writes: frozenset              # the PARAM slots the kernel stores to
  uses: Mapping                  # INDEX/AFTER -> is it read as a value (render/nodes.py value_uses)
  acc_updates: Mapping           # REG accumulator -> the values stored into it in its loop (not its initial value)
  acc_update_of: Mapping         # such a value -> its accumulator
  lane_index: frozenset          # vector integer values used only to address lanes of an INDEX
  reg_arrays: frozenset          # REG buffers read or written through INDEX: private arrays
  streamed: frozenset            # PARAMs the decide stage tagged for streaming stores
  locals: tuple                  # the LOCAL buffers, in order
  specials: tuple                # the SPECIALs, in order

  def used_as_value(self, u: UOp) -> bool: return self.uses.get(u, False)


def kernel_facts(linear: UOp) -> KernelFacts:
  instrs = tuple(linear.src)
  params = {u: u.arg["slot"] for u in instrs if u.op == "PARAM"}
  slots = sorted(params.values())
  if slots != list(range(len(slots))): raise CompileError("compile.form", f"kernel PARAM slots {slots} are not 0..n-1")
  writes = frozenset(t.arg["slot"] for u in instrs if u.op in WRITES and (t := param_of(u.src[0])).op == "PARAM")
  acc_updates: dict = {}
  for u in instrs:
    if u.op == "STORE" and is_reg(u.src[0]) and u.src[1].op not in ("CONST", "VCONST"):   # updates, not initial values
      acc_updates.setdefault(base_of(u.src[0]), []).append(u.src[1])
  return KernelFacts(
    instrs, MappingProxyType(params), tuple(sorted(params, key=params.__getitem__)), writes, MappingProxyType(value_uses(instrs)),
    MappingProxyType({b: tuple(vs) for b, vs in acc_updates.items()}), MappingProxyType({v: b for b, vs in acc_updates.items() for v in vs}),
    _lane_index(instrs),
    frozenset(base_of(u.src[0]) for u in instrs if u.op == "INDEX" and is_reg(u.src[0])),   # (tinygrad's accumulator BUFFER (n,) REG)
    frozenset(p for p in params if decision(p, "stream")),
    tuple(u for u in instrs if is_local(u) and u.op == "BUFFER"),
    tuple(u for u in instrs if u.op == "SPECIAL"))


def _lane_index(instrs: tuple) -> frozenset:
  """Vector integer values used only as the index of an INDEX (and to compute such): lanes of an address."""
  out: set = set()
  users: dict = {}
  for u in instrs:
    for k, x in enumerate(u.src): users.setdefault(x, []).append((u, k))
  for u in reversed(instrs):
    if props(u).shape and _dt(props(u).dtype).is_int and users.get(u) and \
       all((c.op == "INDEX" and k >= 1) or c in out for c, k in users[u]): out.add(u)
  return frozenset(out)
