"""Queries about a kernel's axes (its RANGEs): which there are, their types and sizes,
the loop nest they form, and which nodes run inside or depend on which. Shared by the
OptOps (optimize.py), the heuristics, BEAM, expand and the device rewrites; rewrites
live in those modules, never here."""
from __future__ import annotations
from tinyspec.uop import UOp, toposort, fold_up
from tinyspec.props import props
from tinyspec.tables import tables

PARALLEL = ("GLOBAL", "LOCAL", "THREAD")
REORDERING = ("UPCAST", "UNROLL", "GROUP_REDUCE")   # types whose iterations do not run in loop order
WORKGROUP = ("LOCAL", "GROUP_REDUCE")                # types NOLOCALS forbids


def ranges(sink: UOp) -> list[UOp]:
  """The kernel's axes: its RANGEs in id order."""
  return sorted((u for u in toposort(sink) if u.op == "RANGE"), key=lambda r: r.arg["id"])


def axis_type(r: UOp) -> str: return r.arg.get("type", "LOOP")


def size(r: UOp):
  """The constant size of range r, or None when it is symbolic."""
  return int(props(r.src[0]).value) if r.src[0].op == "CONST" else None


def output_nest(sink: UOp):
  """(END, its ranges) when the kernel is one loop nest of stores whose every store
  writes INDEX(out, ranges in order...) with each of the nest's ranges exactly once;
  else None."""
  if len(sink.src) != 1 or sink.src[0].op != "END": return None
  end = sink.src[0]
  rs = list(end.src[1:])
  stores = [end.src[0]] if end.src[0].op == "STORE" else list(end.src[0].src) if end.src[0].op == "GROUP" else []
  if not stores or not all(s.op == "STORE" for s in stores): return None
  for s in stores:
    dst = s.src[0]
    if dst.op != "INDEX" or dst.src[0].op != "PARAM": return None
    used = [i for i in dst.src[1:] if i.op == "RANGE"]
    if sorted(used, key=id) != sorted(rs, key=id) or not all(i.op in ("RANGE", "CONST") for i in dst.src[1:]): return None
  return end, rs


# ------------------------------------------------------------------ where a range is used
def closers(sink: UOp, r: UOp) -> list[UOp]:
  """The ENDs and REDUCEs that list r among their ranges."""
  return [u for u in toposort(sink) if u.op in ("END", "REDUCE") and r in u.src[1:]]


def carried(sink: UOp, r: UOp) -> bool:
  """Does a loop-carried read (AFTER listing r, or a CAST of it: an accumulator read
  inside r) depend on r?"""
  def listed(d: UOp) -> bool:
    while d.op in ("CAST", "BITCAST") and d.src: d = d.src[0]
    return d is r
  return any(u.op == "AFTER" and any(listed(d) for d in u.src[1:]) for u in toposort(sink))


def ranges_open(x: UOp, below: list, closers: tuple = ("END", "REDUCE")) -> frozenset:
  """The RANGEs x runs inside of, given those of its sources: theirs, plus x if it is a
  RANGE, less those x closes when it is one of `closers`."""
  s = frozenset().union(*below) if below else frozenset()
  if x.op == "RANGE": return s | {x}
  if x.op in closers: return s - set(x.src[1:])
  return s


def open_ranges(u: UOp, memo: dict) -> frozenset:
  """The RANGEs u runs inside of: those it depends on, less the ones an END or REDUCE
  below it closes (memo: answers so far; stops at known nodes)."""
  return fold_up(u, memo, ranges_open)


def depends(u: UOp, r: UOp, memo: dict) -> bool:
  """Does u depend on r? (memo: answers so far, for the same r; stops at known nodes)"""
  return fold_up(u, memo, lambda x, below: x is r or any(below))


def top_nest(sink: UOp):
  """(END, its ranges) of a kernel that is one loop nest (one END under the SINK)."""
  if len(sink.src) != 1 or sink.src[0].op != "END": return None
  return sink.src[0], list(sink.src[0].src[1:])


def reorderable(red: UOp) -> bool:
  """May the REDUCE's elements combine in any order? ops.yaml reduce_ops `reorders`
  (decision reduce-empty: a float MUL keeps its order)."""
  return tables().reduce_reorders(red.arg["op"], props(red).dtype)
