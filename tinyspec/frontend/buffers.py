"""Front-end buffers: BUFFER nodes bound to NumPy data, and graphs exported with them.

A Tensor made from data is a BUFFER whose `tag` is a BufferId: a Python object, unique
to that buffer, that no graph file can hold (a file's tags are JSON). Hash-consing keys
UOps by their tag too, so a BUFFER loaded from a file is never the same UOp as a front-end
one, however equal their slot, dtype, device and shape; the data is kept per BufferId.

`export(roots)` gives what a file or a backend sees: the graph with the front-end BUFFERs
numbered 0, 1, 2... in graph order (skipping slots that other BUFFERs of the graph use)
and their tags dropped, and the inputs keyed by those numbers (`buf{slot}`: dispatch.input_name). The slots inside the UOps are just unique numbers; only export's matter.
"""
from __future__ import annotations
import itertools
import weakref
import numpy as np
from tinyspec.dispatch import input_name
from tinyspec.uop import UOp
from tinyspec.graph import Graph
from tinyspec.frozen import freeze, thaw
from tinyspec.intervals import np_dtype
from tinyspec.frontend.derive import derive

_ids = itertools.count()


class BufferId:
  """The identity of one front-end buffer (the tag of its BUFFER UOp)."""
  __slots__ = ("n", "__weakref__")

  def __init__(self, n: int): self.n = n
  def __repr__(self) -> str: return f"<front-end buffer {self.n}>"   # tells UOp keys apart (tinyspec.frozen.key)


_data: "weakref.WeakKeyDictionary[BufferId, np.ndarray]" = weakref.WeakKeyDictionary()   # freed with the BUFFER


def new_buffer(shape_operand: UOp, dtype: str, device, data: np.ndarray | None = None) -> UOp:
  """A fresh BUFFER (its own identity), bound to `data` if given."""
  n = next(_ids)
  u = UOp("BUFFER", (shape_operand,), {"slot": n, "dtype": dtype, "device": device}, tag=BufferId(n))
  if data is not None: _data[u.tag] = data
  return u


def is_frontend_buffer(u) -> bool:
  return isinstance(u.tag, BufferId)


def data_of(u: UOp) -> np.ndarray | None:
  """The data bound to a front-end BUFFER, else None."""
  return _data.get(u.tag) if isinstance(u.tag, BufferId) else None


def export(roots) -> tuple[Graph, dict]:
  """The graph of roots as a file holds it, and the inputs that evaluate it: the data of
  each front-end BUFFER (zeros for Tensor.empty), zeros for any other GLOBAL BUFFER."""
  g = Graph.from_uops(*roots)
  uops = g.uops()   # hash-consing hands back the very UOps of the graph, in node order
  taken = {n.arg["slot"] for n, u in zip(g.nodes, uops) if n.op == "BUFFER" and not is_frontend_buffer(u)}
  free = (k for k in itertools.count() if k not in taken)
  inputs = {}
  for n, u in zip(g.nodes, uops):
    if n.op != "BUFFER" or n.arg.get("addrspace", "GLOBAL") != "GLOBAL": continue
    data = data_of(u)
    if is_frontend_buffer(u):
      n.arg, n.tag = freeze({**thaw(n.arg), "slot": next(free)}), None
    if data is None: data = np.zeros(_shape(u), np_dtype(u.arg["dtype"]))
    inputs[input_name("BUFFER", n.arg)] = data
  return g, inputs


def _shape(u: UOp) -> tuple:
  return (u._props or derive(u)).shape
