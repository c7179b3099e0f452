"""Which iterations may run at once, and which reads must not see the kernel's own writes.

Decision kernel-loops gives a kernel's loops (RANGEs, and SPECIALs outermost) one meaning:
the body runs once per point in iteration order, and a read sees what earlier iterations
stored only through an AFTER that lists the loop (the accumulator form). The compiled
program keeps that meaning in two ways:

  * an axis runs in parallel (GLOBAL, LOCAL, THREAD work items or threads, SPECIALs as
    OpenCL work items) or has its iterations copied or reordered (UPCAST, UNROLL) only
    when `conflict_free` proves that no two iterations touch the same element with at
    least one write, and no read carries a value from one iteration to the next;
  * a read of storage the kernel writes, which the reference orders before those writes
    (it is not ordered after them through AFTER), must not see them: `hazards`
    finds the reads that might, and compiler/passes/snapshots.py points them at a copy of the storage
    made before the kernel (as rangeify does for tensor STOREs).

The proofs are about element indices. Two accesses of one storage are *separated* over
axis r when some dimension d indexes both as k*r + rest with the same k != 0, rest not
depending on r, and either the two rests' intervals lie closer together than |k| (then
iterations r = v1 != v2 give indices apart), or the rests are the same terms and the
index is a mixed-radix number with r one of its digits (out[r0*16 + r2] separates r0
and r2). Every index used is an exact linear form (its mathematical value fits its
dtype: nothing wraps).
"""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np
from tinyspec.uop import UOp, toposort, fold_up
from tinyspec.tables import tables
from tinyspec.props import props
from tinyspec.compiler.analysis.symbolic import exact_linear, linear_interval, linear
from tinyspec.compiler.analysis.axes import carried, open_ranges
from tinyspec.dtypes import dtype as _dt

WRITES = tables().write_ops   # STORE, ATOMICADD (ops.yaml `storage: writes`)


@dataclass(eq=False)
class Access:
  node: UOp             # the INDEX (or the storage itself, for a ()-shaped one)
  storage: UOp          # the PARAM or BUFFER it reaches through AFTERs
  index: tuple          # the index nodes, one per dimension (() for a ()-shaped storage)
  write: bool
  after: tuple = ()     # the AFTERs its storage expression goes through (reads)


def _strip(u: UOp) -> tuple[UOp, tuple]:
  afters = []
  while u.op == "AFTER": afters.append(u); u = u.src[0]
  return u, tuple(afters)


def _storage(u: UOp):
  """The storage node a storage expression reaches, or None (a computed value)."""
  base, _ = _strip(u)
  if base.op == "PARAM" and len(base.src) != 3: return base
  if base.op == "BUFFER": return base
  return None


def accesses(sink: UOp) -> list[Access]:
  """Every element access of the kernel: writes (STORE/ATOMICADD targets) and reads
  (an INDEX of storage, or a ()-shaped storage, used as a value)."""
  nodes = toposort(sink)
  out: list[Access] = []
  for u in nodes:
    if u.op in WRITES:
      t, _ = _strip(u.src[0])
      if t.op == "INDEX" and (s := _storage(t.src[0])) is not None: out.append(Access(u, s, tuple(t.src[1:]), True))
      elif (s := _storage(t)) is not None: out.append(Access(u, s, (), True))
  for u in nodes:
    if u.op == "AFTER": continue                 # a place and what orders it: its consumers read
    for k, s in enumerate(u.src):
      if k == 0 and (u.op in WRITES or u.op == "INDEX"): continue   # the place written or indexed
      base, afters = _strip(s)
      if base.op == "INDEX" and (st := _storage(base.src[0])) is not None:
        out.append(Access(base, st, tuple(base.src[1:]), False, afters + _strip(base.src[0])[1]))
      elif (st := _storage(s)) is not None and not props(st).shape:
        out.append(Access(s, st, (), False, afters))
  return _unique(out)


def _unique(acc: list[Access]) -> list[Access]:
  seen, out = set(), []
  for a in acc:
    key = (id(a.node), a.write)
    if key not in seen: seen.add(key); out.append(a)
  return out


# ------------------------------------------------------------------ separation
def _depends(u: UOp, r: UOp, memo: dict) -> bool:
  return fold_up(u, memo, lambda x, below: x is r or any(below))


def _radix_separated(k: int, rest: dict, dc: int, r: UOp) -> bool:
  """Indices k*r + rest + c_a and k*r + rest + c_b (the same terms, constants dc apart) at
  two points with different r: the terms smaller than |k| span less than |k| - |dc|, and
  every larger coefficient is a multiple of |k| times r's number of values, so equal
  indices would need equal r (a mixed-radix number has one digit r)."""
  small = {t: v for t, v in rest.items() if abs(v) < abs(k)}
  iv = linear_interval(small, 0)
  rlo, rhi = props(r).min_max
  m = abs(k) * (rhi - rlo + 1)
  if iv is not None and iv[1] - iv[0] + abs(dc) < abs(k) and all(v % m == 0 for t, v in rest.items() if t not in small): return True
  return dc == 0 and _superincreasing({**rest, r: k})


def _superincreasing(terms: dict) -> bool:
  """Is sum(c * t) one-to-one in the terms' values? It is when, by |c|, every coefficient
  exceeds what all smaller ones can add up to over their intervals: two different value
  tuples differ in a largest term, whose step no smaller terms make up. (A tile with
  padded rows, t0 * (R1 + pad) + t1, is such a number, though not a dense mixed radix.)"""
  span = 0
  for t, c in sorted(terms.items(), key=lambda tc: abs(tc[1])):
    lo, hi = props(t).min_max
    if not isinstance(lo, int) or not isinstance(hi, int) or abs(c) <= span: return False
    span += abs(c) * (hi - lo)
  return True


def _digit_separated(k: int, ra: dict, rb: dict, dc: int, r: UOp) -> bool:
  """k*r + ra + c_a and k*r + rb + c_b with every other coefficient (of either) a multiple
  of m = |k| times r's number of values and c_a = c_b (mod m): modulo m both indices are
  k*r + c, which differs for different r (the rests may be any terms: a LOCAL tile
  written by one set of work items and read by another, split by the same lane digit)."""
  rlo, rhi = props(r).min_max
  m = abs(k) * (rhi - rlo + 1)
  return dc % m == 0 and all(v % m == 0 for v in (*ra.values(), *rb.values()))


def separated(a: Access, b: Access, r: UOp, memo: dict | None = None) -> bool:
  """Do iterations r = v1 != v2 of a and b (the other loops anywhere) always touch
  different elements? Some dimension indexes both as k*r + rest (the same k != 0, the
  rests not depending on r, nothing wrapping), and either the rests are the same terms
  in mixed radix below and above r (_radix_separated), or their intervals lie closer
  together than |k|."""
  memo = {} if memo is None else memo
  for i, j in zip(a.index, b.index):
    fa, fb = exact_linear(i), exact_linear(j)
    if fa is None or fb is None: continue
    (ta, ca), (tb, cb) = fa, fb
    k = ta.get(r, 0)
    if k == 0 or tb.get(r, 0) != k: continue
    ra = {t: v for t, v in ta.items() if t is not r}
    rb = {t: v for t, v in tb.items() if t is not r}
    if any(_depends(t, r, memo) for t in (*ra, *rb)): continue
    if ra == rb and _radix_separated(k, ra, ca - cb, r): return True
    if _digit_separated(k, ra, rb, ca - cb, r): return True
    iva, ivb = linear_interval(ra, ca), linear_interval(rb, cb)
    if iva is not None and ivb is not None and max(iva[1] - ivb[0], ivb[1] - iva[0]) < abs(k): return True
  return False


def _commute(a: Access, b: Access) -> bool:
  """Integer atomic adds commute exactly (modular): their order changes no bit."""
  return a.node.op == b.node.op == "ATOMICADD" and _dt(props(a.storage).dtype).is_int


def runs_in(a: Access, r: UOp, memo: dict) -> bool:
  """Does access a run inside loop r (r is open at it, or at what orders it; every
  access runs inside a SPECIAL)? memo: open_ranges answers so far."""
  return r.op == "SPECIAL" or any(r in open_ranges(u, memo) for u in (a.node,) + a.after)


def conflict_free(sink: UOp, r: UOp, acc: list[Access] | None = None, workgroups: bool = False) -> bool:
  """No two iterations of axis r (a RANGE or SPECIAL) touch one element with at least
  one write (integer atomic adds aside: they commute), none reads what another stored,
  and no access outside the loop touches an element one inside writes (or writes one
  an iteration reads): r may run in parallel or reordered. `workgroups`: the axes run as
  OpenCL work-groups and work items (LOCAL storage is a work-group's own, a BARRIER
  synchronizes its work items); C runs them as loops and threads sharing one scratch."""
  if carried(sink, r): return False
  acc = accesses(sink) if acc is None else acc
  written = {a.storage for a in acc if a.write}
  memo, opened, below = {}, {}, {}
  for s in written:
    group = [a for a in acc if a.storage is s]
    local = props(s).addrspace == "LOCAL"
    if local and workgroups and _group_axis(r): continue      # every work-group has LOCAL storage of its own
    for n, a in enumerate(group):
      for b in group[n:]:
        if not (a.write or b.write) or _commute(a, b): continue
        ia, ib = runs_in(a, r, opened), runs_in(b, r, opened)
        if local and _ordered_pair(a, b, ia, ib, r, below, workgroups): continue
        if ia and ib and not separated(a, b, r, memo): return False
        if ia != ib and not _disjoint(a, b): return False
  return True


def _group_axis(r: UOp) -> bool:
  """Does r number work-groups (a GLOBAL or THREAD axis, a gidx/tidx SPECIAL)?"""
  return (r.op == "RANGE" and r.arg.get("type") in ("GLOBAL", "THREAD")) or (r.op == "SPECIAL" and r.arg["name"][0] in "gt")


def _item_axis(r: UOp) -> bool:
  """Does r number a work-group's work items (a LOCAL axis, a lidx SPECIAL)?"""
  return (r.op == "RANGE" and r.arg.get("type") == "LOCAL") or (r.op == "SPECIAL" and r.arg["name"].startswith("lidx"))


def _barrier_between(first: UOp, then: UOp, below: dict) -> bool:
  """Does a BARRIER over node `first` lie among the sources (past src[0]) of node `then`
  (an AFTER, a STORE)? Then every work item of the group runs first before any runs then."""
  for b in below.setdefault(then, set(toposort(list(then.src[1:])))):
    if b.op == "BARRIER" and first in below.setdefault(b, set(toposort(b))): return True
  return False


def _through_barrier(a: Access, w: Access, below: dict) -> bool:
  """Is read a ordered after write w through a BARRIER (an AFTER of a BARRIER over w)?"""
  return any(_barrier_between(w.node, x, below) for x in a.after)


def _ordered_pair(a: Access, b: Access, ia: bool, ib: bool, r: UOp, below: dict, workgroups: bool) -> bool:
  """LOCAL storage: a read ordered after a write (through AFTER) sees it whatever the order
  of r's iterations when only one of them runs in r (the write completes first), or when
  r numbers work items and a BARRIER orders them (every item's store, then every read).
  Reads in later iterations of other loops are hazards()'s business."""
  rd, wr = (a, b) if b.write and not a.write else (b, a) if a.write and not b.write else (None, None)
  if rd is None or not _ordered_after(rd, wr, below): return False
  return ia != ib or (workgroups and _item_axis(r) and _through_barrier(rd, wr, below))


# ------------------------------------------------------------------ reads of what the kernel writes
def _ordered_after(a: Access, w: Access, below: dict) -> bool:
  """Is read a ordered after write w through one of its AFTERs?"""
  return any(w.node in below.setdefault(x, set(toposort(list(x.src[1:])))) for x in a.after)


def _loops(sink: UOp) -> list[UOp]:
  return [u for u in toposort(sink) if u.op in ("RANGE", "SPECIAL")]


def _disjoint(a: Access, b: Access) -> bool:
  """Never the same element: some dimension's index intervals do not meet."""
  for i, j in zip(a.index, b.index):
    (alo, ahi), (blo, bhi) = props(i).min_max, props(j).min_max
    if ahi < blo or bhi < alo: return True
  return False


def _feeds(a: Access, w: Access, below: dict) -> bool:
  """Is read a part of write w's value or gate (so, in one iteration, before it)?"""
  return a.node in below.setdefault(w.node, set(toposort(list(w.node.src[1:]))))


def _staged_step(a: Access, after: list, r: UOp, below: dict, opened: dict) -> bool:
  """A read of a LOCAL tile in loop r (a staged reduce step, compiler/passes/tiles.py) sees only
  this iteration's writes when: every work item runs r alike (its bound is a constant),
  the writes it is ordered after rewrite, at each point of r, every element of the tile
  exactly once between them (so earlier iterations' values are gone: _covers), and a
  BARRIER inside r is ordered after the read (every work item has read before any item
  writes the next iteration's tile)."""
  if r.op != "RANGE" or r.src[0].op != "CONST": return False
  if not any(b.op == "BARRIER" and r in open_ranges(b, opened) and a.node in below.setdefault(b, set(toposort(b)))
             for b in _barriers_of(r, below, opened)): return False
  ws = [w for w in after if w.storage is a.storage]
  return _covers(ws, a)


def _barriers_of(r: UOp, below: dict, opened: dict) -> list:
  """The BARRIERs whose ENDs close loop r (in the bodies of r's ENDs)."""
  key = ("barriers", r)
  if key not in below:
    below[key] = [b for e in _ends_of(r, below) for b in toposort(e.src[0]) if b.op == "BARRIER"]
  return below[key]


def _ends_of(r: UOp, below: dict) -> list:
  return below.get(("ends", r), [])


def _covers(ws: list, a: Access) -> bool:
  """Do the writes ws, over the work items (LOCAL axes, lidx SPECIALs) and their vector
  lanes, write each element of a's 1-d storage at most once and every element the read a
  can touch (a tile whose rows are padded has elements nobody writes or reads)?"""
  shape = props(a.storage).shape
  if len(shape) != 1 or len(a.index) != 1: return False
  n = int(shape[0])
  vals = []
  for w in ws:
    if len(w.index) != 1 or len(w.node.src) != 2: return False    # a gated write may skip elements
    v = _points(w.index[0], n, _item_axis)
    if v is None: return False
    vals.append(v)
  got = np.sort(np.concatenate(vals)) if vals else np.array([], dtype=np.int64)
  if got.size == 0 or np.any(got[1:] == got[:-1]) or got[0] < 0 or got[-1] >= n: return False   # each element once, in bounds
  lo, hi = props(a.index[0]).min_max
  if not (0 <= lo and hi < n): return False
  if got.size == n: return True
  reads = _points(a.index[0], n, lambda t: True, distinct=True)      # every value the read's loops and items give it
  return reads is not None and bool(np.all(np.isin(reads, got)))


def _points(index: UOp, n: int, enumerable, distinct: bool = False) -> "np.ndarray | None":
  """The values of a linear index at every point of its `enumerable` RANGEs (constant
  bounds) and vector lanes (VCONST), a value per point (distinct: each value once), or
  None (another term, or more than 4n points)."""
  lf = linear(index, 32)
  if lf is None: return None
  v = np.array([lf[1]], dtype=np.int64)
  for t, k in lf[0].items():
    if t.op == "VCONST": tv = np.array([int(x) for x in t.arg["values"]], dtype=np.int64)
    elif t.op in ("RANGE", "SPECIAL") and enumerable(t) and t.src[0].op == "CONST": tv = np.arange(int(t.src[0].arg["value"]), dtype=np.int64)
    else: return None
    v = (v[:, None] + k * tv[None, :]).ravel()
    if distinct: v = np.unique(v)
    if v.size > 4 * n: return None
  return v


def hazards(sink: UOp) -> tuple[list[Access], list[Access]]:
  """(plain, ordered): the reads of storage the kernel writes that the compiled loops
  might give another value than decision kernel-loops says.
  A read sees the stores it is ordered after through AFTER: at its own point of the
  loops it runs in, and at every point of a loop its AFTER lists (carried) or that it
  runs outside of; other stores not at all (the storage as before the kernel). The
  loops read memory as it is, so a write w of the read's storage is harmless when
    * it never touches the read's element (some dimension's intervals do not meet), or
    * the read is ordered after it and either reads the element w writes, w being
      ungated (so this point's w overwrote whatever other iterations of w wrote), or over
      every loop both run in that the AFTER does not list, other iterations of w never
      touch the read's element (separated), or
    * the read is not ordered after it but feeds it (so runs first in one iteration), and
      over every loop w runs in, the read's AFTER lists the loop (it sees the earlier
      iterations' stores: the accumulator form), or an ungated write of the read's
      element that the read is ordered after runs in the loop (each iteration overwrites
      what earlier ones wrote: an accumulator reset per output), or the two share their
      index, separated over the loop (no other iteration writes the element).
  `plain` lists hazardous reads ordered after no write of their storage (a snapshot of
  the storage taken before the kernel gives their value), `ordered` the others."""
  acc = accesses(sink)
  writes = [a for a in acc if a.write]
  loops = _loops(sink)
  below: dict = {}
  for e in toposort(sink):
    if e.op == "END":
      for r in e.src[1:]: below.setdefault(("ends", r), []).append(e)
  memo: dict = {}
  opened: dict = {}
  def inside(x: Access, r) -> bool: return runs_in(x, r, opened)
  plain, ordered = [], []
  for a in acc:
    if a.write: continue
    ws = [w for w in writes if w.storage is a.storage]
    if not ws: continue
    after = [w for w in ws if _ordered_after(a, w, below)]
    listed = {d for x in a.after for d in x.src[1:]}
    if any(b.op == "BARRIER" for x in a.after for b in below.setdefault(x, set(toposort(list(x.src[1:]))))):
      listed |= {r for r in loops if _item_axis(r)}   # a BARRIER shows every work item's stores
    local = props(a.storage).addrspace == "LOCAL"
    masks = [w for w in after if w.index == a.index and len(w.node.src) == 2]   # ungated writes of the read's element it is ordered after
    def harmless(w: Access) -> bool:
      if _disjoint(a, w): return True
      w_loops = [r for r in loops if inside(w, r) and not (local and _group_axis(r))]   # (each work-group has LOCAL storage of its own)
      if w in after and a.index == w.index and len(w.node.src) == 2: return True   # this point's w overwrote what others wrote
      if w in after: return all(r in listed or not inside(a, r) or separated(a, w, r, memo.setdefault(("s", r), {})) or
                                (local and _staged_step(a, after, r, below, opened)) for r in w_loops)
      # a later step's write of a work-group's LOCAL storage, reached from the read only
      # through a BARRIER, in no loop around them both: it runs after the read, everywhere
      if local and _barrier_between(a.node, w.node, below) and not any(inside(a, r) for r in w_loops): return True
      return _feeds(a, w, below) and all(r in listed or any(inside(m, r) for m in masks) or
                                         (a.index == w.index and separated(w, w, r, memo.setdefault(("s", r), {}))) for r in w_loops)
    if not all(harmless(w) for w in ws): (ordered if after else plain).append(a)
  return plain, ordered
