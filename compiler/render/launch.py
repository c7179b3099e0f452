"""Launch layout: which ranges of a kernel run in parallel, and how.

On OpenCL the leading GLOBAL/THREAD/LOCAL ranges that hold every store, and the
GROUP_REDUCE ranges right inside them, are work-item ids (`work_items`); sibling
GROUP_REDUCE ranges (and a fused row kernel's output lane) share one id, a narrower one
running on the items below its bound (`_lanes`). On C the top-level THREAD or
GROUP_REDUCE loop runs in slices on threads (phase 0) and whatever follows it -- a group
reduction's combine -- once afterwards (phase 1; `thread_axis`). Explicit SPECIALs are
named here and sized per dimension (`special_dims`); each target turns them into loops
or launch sizes.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping
from tinyspec.uop import UOp
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.render.nodes import WRITES, is_reg, is_local_access, base_of, param_of



@dataclass(frozen=True)
class Launch:
  """How a kernel runs: OpenCL's launch sizes and which ranges are work-item ids (`ids`:
  range -> the builtin it is; `guarded`: lanes narrower than their work-group, run under
  if (id < bound)), or C's threaded axis (`thread`) and whether code follows it (`tail`)."""
  global_size: list = field(default_factory=list)
  local_size: list | None = None
  ids: Mapping = field(default_factory=lambda: MappingProxyType({}))
  guarded: frozenset = frozenset()
  thread: UOp | None = None
  tail: bool = False


class LaunchLayout:
  """The layout half of a Renderer: computes a Launch from the kernel's facts (self.facts)
  and writes nothing."""

  def special_dims(self, specials) -> dict[int, dict]:
    """dimension -> {kind letter: bound} of the SPECIALs."""
    dims: dict[int, dict] = {}
    for u in specials:
      kind, d = u.arg["name"][0], int(u.arg["name"][-1])
      b = self.bound(u)
      if kind in dims.setdefault(d, {}): raise CompileError("compile.form", f"two SPECIALs of kind {kind} on dimension {d}", u)
      dims[d][kind] = b
    return dims

  def bound(self, r: UOp):
    b = r.src[0]
    if b.op == "CONST": return int(b.arg["value"])
    if b.op == "PARAM" and b in self.facts.params and len(b.src) == 3: return ("param", self.facts.params[b])
    raise CompileError("compile.form", "a parallel axis needs a constant or PARAM bound", r)

  def work_items(self, instrs):
    """OpenCL: the leading ranges of the outermost nest that are GLOBAL, THREAD or LOCAL
    and hold every store become work-item ids, with the GROUP_REDUCE ranges opened right
    inside them (their ENDs come before a BARRIER: every work item reaches it). Without
    LOCAL/GROUP_REDUCE axes: up to 3 get_global_id dimensions, innermost first, the
    device picks the workgroups. With them: GLOBAL/THREAD axis d is get_group_id(d) and
    LOCAL/GROUP_REDUCE axis d get_local_id(d)."""
    prefix = self._parallel_prefix(instrs, ("GLOBAL", "THREAD", "LOCAL"))
    at, groups, guarded = self._lanes(instrs, prefix)
    ids: dict[UOp, str] = {}
    if groups and at < len(prefix):   # a fused row kernel: the output axis's lane shares the reduces' id
      lane = prefix[at]
      if lane.arg.get("type") == "LOCAL" and isinstance(self.bound(lane), int) and self.bound(lane) <= self.bound(groups[0]):
        groups.append(lane)
        if self.bound(lane) < self.bound(groups[0]): guarded = guarded | {lane}
      prefix = prefix[:at]
    glob = [r for r in prefix if r.arg.get("type") != "LOCAL"]
    loc = [r for r in prefix if r.arg.get("type") == "LOCAL"] + groups[:1]
    if not loc or len(glob) > 3 or len(loc) > 3:
      work = prefix[-3:]
      for d, r in enumerate(reversed(work)): ids[r] = f"get_global_id({d})"
      return Launch([self.bound(r) for r in reversed(work)], None, MappingProxyType(ids), guarded)
    glob, loc = glob[::-1], loc[::-1]            # dimension 0 is the innermost
    gsize, lsize = [], []
    for d in range(max(len(glob), len(loc))):
      g = glob[d] if d < len(glob) else None
      l = loc[d] if d < len(loc) else None
      if g is not None: ids[g] = f"get_group_id({d})"
      if l is not None:
        for x in (groups if groups and l is groups[0] else [l]): ids[x] = f"get_local_id({d})"
      gb, lb = (self.bound(g) if g is not None else 1), (self.bound(l) if l is not None else 1)
      gsize.append([gb, lb]); lsize.append(lb)
    return Launch(gsize, lsize, MappingProxyType(ids), guarded)

  def _lanes(self, instrs, prefix: list):
    """(depth d, ranges, guarded): the GROUP_REDUCE ranges opened directly inside prefix[:d], at the
    smallest such d. They are siblings (each closed before the next opens, a BARRIER
    between them), so they share one work-item id: the work-group runs them one after the
    other, every item taking its lane in each (a fused row kernel: compiler/passes/heuristics.py
    _gpu_rows). The widest sets the work-group's size; a narrower one (a step of a tree
    combine, compiler/passes/expand.py) runs on the items below its bound (`guarded`)."""
    open_, found = [], []
    for u in instrs:
      if u.op == "RANGE":
        d = len(open_)
        if u.arg.get("type") == "GROUP_REDUCE" and self._bound_ok(u) and d <= len(prefix) and open_ == prefix[:d]: found.append((d, u))
        open_.append(u)
      elif u.op == "END": open_.pop()
    if not found: return len(prefix), [], frozenset()
    at = min(d for d, _ in found)
    lanes = [u for d, u in found if d == at and isinstance(self.bound(u), int)] or [next(u for d, u in found if d == at)]
    width = max(lanes, key=lambda u: self.bound(u) if isinstance(self.bound(u), int) else 0)
    guarded = frozenset(u for u in lanes if u is not width and self.bound(u) != self.bound(width))
    return at, [width] + [u for u in lanes if u is not width], guarded

  def _parallel_prefix(self, instrs, kinds) -> list:
    """The leading ranges of the outermost nest with a type in `kinds`, when every store
    to memory (not a REG accumulator, not a LOCAL buffer) is inside all of them."""
    stores_depth, open_ = [], []
    for u in instrs:
      if u.op == "RANGE": open_.append(u)
      elif u.op == "END": open_.pop()
      elif u.op in WRITES and not is_reg(u.src[0]) and not is_local_access(u.src[0]): stores_depth.append(list(open_))
    cands, depth = [], 0
    for u in instrs:
      if u.op == "RANGE":
        if depth == len(cands) and u.arg.get("type") in kinds and self._bound_ok(u): cands.append(u)
        depth += 1
      elif u.op == "END": depth -= 1
    if not cands or any(st[:len(cands)] != cands for st in stores_depth): return []
    return cands

  def thread_axis(self, instrs):
    """C: the top-level THREAD or GROUP_REDUCE loop whose slices [tlo, thi) run on
    threads (phase 0), and whether code follows it (the tail: phase 1, run once after
    every slice). It qualifies when nothing before it loops or writes memory or reads a
    buffer the kernel writes, every store is inside it or in the tail, and the tail
    reads no accumulator the loop updates (LOCAL buffers are the loop's way out)."""
    depth, start = 0, None
    for k, u in enumerate(instrs):
      if u.op == "RANGE":
        if depth == 0 and u.arg.get("type") in ("THREAD", "GROUP_REDUCE") and self._bound_ok(u): start = k
        break
    if start is None: return None, False
    r = instrs[start]
    stop = next(k for k, u in enumerate(instrs) if u.op == "END" and u.src[1] is r)
    written = set()
    for u in instrs:
      if u.op in WRITES:
        written.add(param_of(u.src[0]))
    for u in instrs[:start]:
      if u.op in WRITES and not is_reg(u.src[0]): return None, False
      if u.op == "INDEX" and u.src[0] in written and self.facts.used_as_value(u): return None, False   # a read of what the loop may write
      if u.op == "PARAM" and u in written and self.facts.used_as_value(u): return None, False
    loop_regs = {base_of(u.src[0]) for u in instrs[start:stop] if u.op == "STORE" and is_reg(u.src[0])}
    tail = [u for u in instrs[stop + 1:] if u.op not in ("SINK", "GROUP", "CONST", "VCONST", "PARAM", "BARRIER")]
    for u in tail:
      if any(s.op == "AFTER" and base_of(s) in loop_regs for s in u.src): return None, False
    return r, bool(tail)

  def _bound_ok(self, r: UOp) -> bool:
    b = r.src[0]
    return b.op == "CONST" or (b.op == "PARAM" and len(b.src) == 3)

