"""A tiny builder for graphs written by hand (kernels especially), in file order.

    b = Builder()
    n = b.const(1024, "index")
    i = b.RANGE(n, arg={"id": 0, "type": "LOOP"})
    x = b.param((1024,), "float32", 0)
    ...
    g = b.graph()           # roots default to the last node

Every method returns a node index; `b.OPNAME(*src, arg=...)` adds any op of the tables.
"""
from __future__ import annotations
from tinyspec.graph import Graph, Node
from tinyspec.tables import tables


class Builder:
  def __init__(self):
    self.nodes: list[Node] = []
    self._memo: dict = {}

  def add(self, op: str, *src: int, arg=None, name=None) -> int:
    if op not in tables().ops: raise KeyError(f"unknown op {op!r}")
    self.nodes.append(Node(op, list(src), arg, name=name))
    return len(self.nodes) - 1

  def __getattr__(self, op: str):
    if op.isupper(): return lambda *src, arg=None: self.add(op, *src, arg=arg)
    raise AttributeError(op)

  def const(self, value, dtype: str) -> int:
    key = ("c", repr(value), type(value).__name__, dtype)
    if key not in self._memo: self._memo[key] = self.add("CONST", arg={"value": value, "dtype": dtype})
    return self._memo[key]

  def vconst(self, values, dtype: str) -> int:
    return self.add("VCONST", arg={"values": list(values), "dtype": dtype})

  def shape(self, *dims: int) -> int:
    key = ("s",) + tuple(dims)
    if key not in self._memo: self._memo[key] = self.vconst(dims, "index")
    return self._memo[key]

  def buffer(self, shape, dtype: str, slot: int, device="CPU", addrspace=None, name=None) -> int:
    arg = {"slot": slot, "dtype": dtype, "device": list(device) if isinstance(device, tuple) else device}
    if addrspace: arg["addrspace"] = addrspace
    if name: arg["name"] = name
    return self.add("BUFFER", self.shape(*shape), arg=arg)

  def param(self, shape, dtype: str, slot: int, name=None, bounds=None, addrspace=None) -> int:
    arg = {"slot": slot, "dtype": dtype}
    if name: arg["name"] = name
    if addrspace: arg["addrspace"] = addrspace
    src = [self.shape(*shape)]
    if bounds is not None: src += [self.const(bounds[0], dtype), self.const(bounds[1], dtype)]
    return self.add("PARAM", *src, arg=arg)

  def range(self, n: int | None = None, id: int = 0, type: str = "LOOP", bound: int | None = None) -> int:
    """A RANGE over n iterations (a CONST bound), or over the value of node `bound`."""
    return self.add("RANGE", bound if bound is not None else self.const(n, "index"), arg={"id": id, "type": type})

  def graph(self, roots=None, level=None) -> Graph:
    return Graph(list(self.nodes), list(roots) if roots is not None else None, level)

