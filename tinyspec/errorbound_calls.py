"""The kernels a graph CALLs, which tinyspec/errorbound.py leaves as they are.

A tensor-level graph may CALL a kernel (a SINK or PROGRAM in the CALL's body slot: a
custom kernel of tinygrad's Tensor.custom_kernel): the kernel runs on the CALL's arguments,
its PARAMs standing for them. The shadow rewrite gives every buffer it sees stored into a
shadow buffer of a new slot; inside a called kernel that buffer is a PARAM, and a shadow
PARAM there would be a slot the CALL has no argument for (rule FUNCTION.param). So a called
kernel is not shadowed: its stores are what its arguments hold after the CALL, and what
reads them gets the bound the arguments' storage has.
"""
from __future__ import annotations


def called_kernels(g, T) -> set:
  """The nodes of every kernel a CALL's body slot holds (the SINK or PROGRAM and what only
  it reaches: a node also used outside, a shared constant, is not one)."""
  inside: set = set()
  for n in g.nodes:
    od = T.ops.get(n.op)
    for k in (od.body_slots if od else ()):
      if g.nodes[n.src[k]].op not in ("SINK", "PROGRAM"): continue
      stack = [n.src[k]]
      while stack:
        j = stack.pop()
        if j not in inside: inside.add(j); stack += list(g.nodes[j].src)
  users: list[set] = [set() for _ in g.nodes]
  for i, n in enumerate(g.nodes):
    for j in n.src: users[j].add(i)
  return {j for j in inside if g.nodes[j].op in ("SINK", "PROGRAM") or users[j] <= inside}
