"""The schedule: what rangeify produces and the later stages refine.

A Schedule is a list of kernel calls in execution order plus how the program's outputs
are read back. Its graph form (`Schedule.graph()`) is a tensor-level graph:

    CALL(SINK-kernel, arg0, arg1, ...)      kernel PARAM slot k is bound to arg k
    arg = BUFFER | AFTER(BUFFER, CALL...)   AFTER orders the call after the writers
                                            (and, for a written buffer, the readers) before it
    root k = AFTER(BUFFER, CALL) for a value root (out{k} is that buffer's contents),
             SINK(CALL...) for a void root

so the reference evaluator runs it and the validator checks it like any other graph.
Storage is BUFFER (the program's own and the intermediates rangeify adds), top-level
PARAM, BUFFER_VIEW, or a VCONST/BINARY holding constant data.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from tinyspec.uop import UOp
from tinyspec.graph import Graph
from tinyspec.intervals import np_dtype
from tinyspec.props import props


@dataclass
class Kernel:
  sink: UOp                      # kernel-level SINK over PARAMs (or, after linearize, a LINEAR)
  args: list[UOp]                # storage bound to PARAM slot k
  writes: set[int] = field(default_factory=set)   # PARAM slots the kernel stores to
  name: str = "kernel"
  program: object = None         # filled by the later stages (linear program, source text)

  def reads(self) -> set[int]:
    return set(range(len(self.args))) - self.writes


@dataclass
class Output:
  kind: str                      # "value": storage holds output `name`; "void": the root is side effects
  storage: UOp | None = None
  name: str | None = None        # out{k}, or out{k}.{j} for element j of a tuple root


@dataclass
class Schedule:
  kernels: list[Kernel]
  outputs: list[Output]
  intermediates: set = field(default_factory=set)   # storage UOps rangeify added
  meta: dict = field(default_factory=dict)

  def free_slot(self) -> int:
    """A BUFFER slot no kernel argument or intermediate uses (for buffers a pass adds)."""
    used = [_base(u).arg["slot"] for k in self.kernels for u in k.args if _base(u).op == "BUFFER"]
    used += [_base(o.storage).arg["slot"] for o in self.outputs if o.storage is not None and _base(o.storage).op == "BUFFER"]
    return max(used + [u.arg["slot"] for u in self.intermediates if u.op == "BUFFER"] + [-1]) + 1

  def graph(self, body=lambda k: k.sink) -> Graph:
    """The tensor-level graph of the schedule; `body(kernel)` is what each CALL calls."""
    last_write: dict[UOp, UOp] = {}      # keyed by the storage under any views: a view's write is its base's
    readers: dict[UOp, list[UOp]] = {}
    calls: list[UOp] = []
    for k in self.kernels:
      args = []
      for slot, s in enumerate(k.args):
        b = _base(s)
        deps = [last_write[b]] if b in last_write else []
        if slot in k.writes: deps += [c for c in readers.get(b, []) if c not in deps]
        args.append(UOp("AFTER", (s, *deps)) if deps else s)
      call = UOp("CALL", (body(k), *args))
      calls.append(call)
      for slot, s in enumerate(k.args):
        if slot in k.writes: last_write[_base(s)], readers[_base(s)] = call, []
        else: readers.setdefault(_base(s), []).append(call)
    roots, tuples = [], {}
    for o in self.outputs:
      if o.kind == "value":
        b = _base(o.storage)
        v = UOp("AFTER", (o.storage, last_write[b])) if b in last_write else o.storage
        if o.name and "." in o.name:   # element of a tuple root: the root is the TUPLE of them
          k = o.name.split(".")[0]
          if k not in tuples: tuples[k] = len(roots); roots.append([])
          roots[tuples[k]].append(v)
        else: roots.append(v)
      else:
        roots.append(UOp("SINK", tuple(calls)) if calls else UOp("SINK", ()))
    roots = [UOp("TUPLE", tuple(r)) if isinstance(r, list) else r for r in roots]
    return Graph.from_uops(*roots, level="tensor")


def _base(storage: UOp) -> UOp:
  while storage.op == "BUFFER_VIEW": storage = storage.src[0]
  return storage


def extent(storage: UOp) -> tuple | None:
  """(the storage under any BUFFER_VIEWs, first byte, end byte) of a kernel argument, or
  None for one that is no memory (a size passed by value)."""
  if storage.op == "CONST" or (storage.op == "PARAM" and len(storage.src) == 3): return None
  pr = props(storage)
  n = np_dtype(pr.dtype).itemsize
  for d in pr.shape: n *= d
  offset = 0
  while storage.op == "BUFFER_VIEW":
    offset += storage.arg["offset"]
    storage = storage.src[0]
  return storage, offset, offset + n


def overlap(a: UOp, b: UOp) -> bool:
  """Do kernel arguments a and b share some byte of memory (one storage, or views of it)?"""
  ea, eb = extent(a), extent(b)
  return ea is not None and eb is not None and ea[0] is eb[0] and ea[1] < eb[2] and eb[1] < ea[2]
