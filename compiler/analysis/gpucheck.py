"""Static GPU checks: what a compiled OpenCL program asks of a GPU, read from its kernels
without running them (CI has no GPU; compile for a table-described one, compiler/device.py
table_device("h100"), and check there).

  launch_report(compiled, dev) -> [KernelLaunch per kernel]

Per kernel: the work-groups it launches, the work items in each, the bytes of local
memory it declares, and every global access (a read or write of a kernel argument) with
its derivative in the fastest work-item index: get_local_id(0) in a kernel with
work-groups, else get_global_id(0). Consecutive work items of a warp read consecutive
addresses (the access is coalesced) when that derivative is the access's own width in
elements (1 for a scalar, 4 for a float4); 0 is a broadcast (one address for the whole
warp, one transaction). Anything else -- a stride, or an index the fastest id enters
through a division, a modulo or a loaded value -- is reported as such.
Per kernel also the global bytes a work item's loads issue per float op it does
(`bytes_per_flop`) and whether the loop doing the multiplies reads only local memory
(`local_tiled`: the inputs were staged there, compiler/passes/tiles.py).
Per kernel also every access of local memory with its bank conflict: the passes a warp
needs through the banks (compiler/analysis/localbanks.py).
`problems(report, dev)` lists what a GPU would not like: a kernel doing much work on
fewer work-groups than compute units, work-groups narrower than a warp, local memory
over the device's, uncoalesced global accesses, bank conflicts in the loop doing the
multiplies (elsewhere a staged tile's row pitch may trade a 2-way conflict on the copy
for conflict-free reads: compiler/passes/tiles.py), and races between the work items on local
memory (a missing BARRIER: compiler/analysis/localrace.py).
"""
from __future__ import annotations
from dataclasses import dataclass, field
from tinyspec.tables import tables
from tinyspec.uop import UOp, toposort
from tinyspec.props import props
from tinyspec.compiler.analysis.symbolic import linear
from tinyspec.compiler.render import launch_size
from tinyspec.compiler.analysis.localrace import local_races
from tinyspec.compiler.analysis.localbanks import bank_conflicts
from tinyspec.dtypes import dtype as _dt

WRITES = tables().write_ops   # STORE, ATOMICADD (ops.yaml `storage: writes`)


@dataclass
class Access:
  param: int           # the kernel argument's slot
  store: bool
  width: int           # elements per access (a vector load/store: its lanes)
  stride: int | None   # derivative of the element index in the fastest work-item id (None: not linear in it)

  @property
  def coalesced(self) -> bool:
    return self.stride in (0, self.width)


@dataclass
class KernelLaunch:
  name: str
  groups: int                  # work-groups launched
  group_items: int             # work items per work-group (0: the device picks)
  local_bytes: int             # __local memory declared
  iterations: int              # work items x the loop trips around the deepest global access (an estimate of the work)
  accesses: list = field(default_factory=list)
  races: list = field(default_factory=list)   # races on local memory (compiler/analysis/localrace.py)
  global_read_bytes: int = 0   # bytes a work item's global loads issue (loop trips counted; caches not)
  flops: int = 0               # float multiplies and adds a work item does (a multiply-add counts 2)
  hot_global_loads: int = 0    # global loads inside the loop that holds the most multiplies (0: it reads only local memory/registers)
  local_accesses: list = field(default_factory=list)   # localbanks.LocalAccess per access of local memory
  hot_trips: int = 0           # the trips of the loop that holds the most multiplies (0: no float multiply)

  @property
  def bytes_per_flop(self) -> float | None:
    """Global bytes read per float op: what a work item issues, not what reaches DRAM."""
    return self.global_read_bytes / self.flops if self.flops else None

  @property
  def local_tiled(self) -> bool:
    """The multiply loop reads only local memory (a staged tile: compiler/passes/tiles.py)."""
    return self.local_bytes > 0 and self.flops > 0 and self.hot_global_loads == 0

  @property
  def items(self) -> int: return self.groups * max(1, self.group_items)


def _fastest(ks) -> UOp | None:
  ids = ks.work_ids
  return ids.get("get_local_id(0)") if "get_local_id(0)" in ids else ids.get("get_global_id(0)")


def _derivative(index: UOp, fastest: UOp | None) -> int | None:
  if fastest is None: return 0
  if fastest not in toposort(index): return 0
  lf = linear(index, 64)
  if lf is None or fastest not in lf[0]: return None
  if any(t is not fastest and fastest in toposort(t) for t in lf[0]): return None   # also inside a DIV/MOD/load
  return lf[0][fastest]


def _flat_derivative(index: UOp, fastest: UOp | None) -> int | None:
  """The derivative of INDEX(PARAM, i...)'s row-major element offset."""
  idx = list(index.src[1:])
  shape = tuple(props(index.src[0]).shape or ())
  if len(idx) == 1: strides = [1]
  elif len(shape) == len(idx):
    strides, step = [], 1
    for d in reversed(shape): strides.append(step); step *= d
    strides.reverse()
  else: return None
  total = 0
  for i, st in zip(idx, strides):
    d = _derivative(i, fastest)
    if d is None: return None
    total += d * st
  return total


def _loop_trips(lin: UOp, u: UOp, ids) -> int:
  """The product of the constant trip counts of the loops open at instruction u."""
  open_: list = []
  for x in lin.src:
    if x is u: break
    if x.op == "RANGE" and x.src[0].op == "CONST" and x not in ids: open_.append(x)
    elif x.op == "END":
      for r in x.src[1:]:
        if r in open_: open_.remove(r)
  n = 1
  for r in open_:
    if r not in lin.src: continue
    n *= max(1, int(r.src[0].arg["value"]))
  return n


def kernel_launch(ks, lin: UOp, warp: int = 1) -> KernelLaunch:
  gsize = [launch_size(g, {}) for g in ks.global_size] if ks.global_size else [1]
  lsize = [launch_size(l, {}) for l in ks.local_size] if ks.local_size else None
  items_total = 1
  for g in gsize: items_total *= g
  if lsize:
    per = 1
    for l in lsize: per *= l
    groups = max(1, items_total // max(1, per))
  else:
    per, groups = 0, items_total
  local_bytes = 0
  for u in lin.src:
    if u.op == "BUFFER" and props(u).addrspace == "LOCAL":
      n = 1
      for d in props(u).shape: n *= d
      local_bytes += n * _dt(props(u).dtype).itemsize
  fastest = _fastest(ks)
  lanes = ks.work_lanes.get("get_local_id(0)", []) if fastest is not None and "get_local_id(0)" in ks.work_ids else []
  users: dict = {}
  for u in lin.src:
    for k, s in enumerate(u.src):
      if s.op == "INDEX": users.setdefault(s, []).append((u, k))
  acc, trips = [], 1
  ids = set(ks.work_ids.values()) | {r for rs in ks.work_lanes.values() for r in rs}   # work-item ranges: not loops
  loads = []                  # (trips, bytes) per global load
  for u in lin.src:
    if u.op != "INDEX" or u.src[0].op != "PARAM": continue
    store = any(x.op in WRITES and k == 0 for x, k in users.get(u, []))
    width = _lanes(u)
    mine = next((r for r in lanes if r in toposort(u)), fastest)   # the sibling lane this access runs in
    acc.append(Access(u.src[0].arg["slot"], store, int(width), _flat_derivative(u, mine)))
    t = _loop_trips(lin, u, ids)
    trips = max(trips, t)
    if not store: loads.append((t, int(width) * _dt(props(u.src[0]).dtype).itemsize))
  muls = [(_loop_trips(lin, u, ids), _lanes(u)) for u in lin.src if u.op == "MUL" and _dt(props(u).dtype).cls == "float"]
  hot = max((t for t, _ in muls), default=None)
  banks = bank_conflicts(ks, lin, warp)
  for b in banks: b.trips = _loop_trips(lin, b.node, ids)
  return KernelLaunch(ks.name, groups, per, local_bytes, items_total * trips, acc,
                      global_read_bytes=sum(t * b for t, b in loads), flops=2 * sum(t * w for t, w in muls),
                      hot_global_loads=sum(1 for t, _ in loads if t == hot) if hot is not None else 0,
                      races=local_races(ks, lin), local_accesses=banks, hot_trips=hot or 0)


def _lanes(u: UOp) -> int:
  shp = props(u).shape or ()
  return int(shp[-1]) if shp else 1


def launch_report(compiled, dev=None) -> list:
  """A KernelLaunch per kernel of an OpenCL Compiled, in execution order."""
  if compiled.target != "opencl": raise ValueError("launch_report reads OpenCL programs")
  warp = dev.warp if dev is not None else 1
  return [kernel_launch(ks, lin, warp) for ks, lin in zip(compiled.sources, compiled.linear)]


def problems(report: list, dev, busy: int = 1 << 20) -> list[str]:
  """What a GPU `dev` would not like in the launches of `report`. A kernel of at least
  `busy` iterations must give every compute unit a work-group (the small second kernel
  of a split reduce need not)."""
  out = []
  for k in report:
    if k.iterations >= busy:
      if k.groups < dev.threads: out.append(f"{k.name}: {k.groups} work-groups for {dev.threads} compute units")
      if k.group_items == 0: out.append(f"{k.name}: no work-group size (the driver picks)")
    if k.group_items and dev.warp > 1 and k.group_items < dev.warp and k.iterations >= busy:
      out.append(f"{k.name}: work-groups of {k.group_items} items, narrower than a warp of {dev.warp}")
    if dev.max_local and k.group_items > dev.max_local: out.append(f"{k.name}: {k.group_items} items per work-group > {dev.max_local}")
    if dev.local_mem and k.local_bytes > dev.local_mem: out.append(f"{k.name}: {k.local_bytes} bytes of local memory > {dev.local_mem}")
    out += k.races
    for b in k.local_accesses:
      if k.hot_trips and b.trips == k.hot_trips and (b.ways is None or b.ways > 1):
        what = "an address the check cannot follow" if b.ways is None else f"a {b.ways}-way bank conflict"
        out.append(f"{k.name}: {'store to' if b.store else 'load of'} local l{b.buffer} ({b.width} wide) in the multiply loop has {what}")
    for a in k.accesses:
      if not a.coalesced:
        what = "not linear in" if a.stride is None else f"stride {a.stride} elements in"
        out.append(f"{k.name}: {'store to' if a.store else 'load of'} p{a.param} ({a.width} wide) is {what} the fastest work-item id")
  return out
