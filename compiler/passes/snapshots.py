"""Reads of storage a kernel writes, made to mean what decision kernel-loops says.

A read that the graph does not order after a kernel's own stores (no AFTER names them)
sees the storage as it was before the kernel. The compiled loops read memory as it is
at that moment, so where a store of another iteration (or an unordered one of the same
iteration) may already have written the element (compiler/analysis/parallel.py `hazards`),
the read is pointed at a copy of the storage made just before the kernel by a copy
kernel of its own -- what rangeify does for a tensor STORE that reads its own target.
A read ordered after some stores that the loops cannot reproduce (`hazards`) is
refused (rule compile.order). Kernels rangeify builds have no such reads; the pass
matters for kernels the user writes (a kernel-level graph, the body of a CALL).

Aliased parameters are the same hazard between two PARAMs: a CALL may pass one buffer
(or overlapping views of one) to several slots, and a tensor STORE through a view may
read the buffer under it. The reference binds every PARAM to its argument's contents
at the call and writes each written PARAM back after the kernel, in slot order
(refimpl: copy in, copy out). So where a written argument's bytes overlap another
argument's (`separate_aliases`), a read-only slot reads a snapshot taken before the
kernel, and where two written slots overlap each gets a private copy (copied in before
the kernel, out after it, in slot order).
"""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.rewrite import Pat, Rule, RuleSet, graph_rewrite
from tinyspec.props import props
from tinyspec.compiler.literals import const, shape_operand
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.schedule import Kernel, Schedule, extent, overlap
from tinyspec.compiler.analysis.parallel import hazards, WRITES
from tinyspec.compiler.passes.steps import KernelRule, ScheduleContext, rewrite_schedule


def copy_kernel(shape: tuple, dtype: str, name: str) -> UOp:
  """SINK storing PARAM 1 into PARAM 0 element by element (both of shape, dtype)."""
  dst = UOp("PARAM", (shape_operand(shape),), {"slot": 0, "dtype": dtype})
  src = UOp("PARAM", (shape_operand(shape),), {"slot": 1, "dtype": dtype})
  rs = tuple(UOp("RANGE", (const(d, "index"),), {"id": k, "type": "LOOP"}) for k, d in enumerate(shape))
  if not rs: return UOp("SINK", (UOp("STORE", (dst, src)),), {"name": name})
  st = UOp("STORE", (UOp("INDEX", (dst, *rs)), UOp("INDEX", (src, *rs))))
  return UOp("SINK", (UOp("END", (st, *rs)),), {"name": name})


def _redirect(s: UOp, old: UOp, new: UOp) -> UOp:
  """Storage expression s (AFTERs around INDEX(AFTERs around old, i...), or around old)
  reading `new` instead of `old`."""
  if s is old: return new
  if s.op in ("AFTER", "INDEX"): return s.replace(src=(_redirect(s.src[0], old, new), *s.src[1:]))
  return s


def _base(s: UOp) -> UOp:
  while s.op == "AFTER": s = s.src[0]
  return s


def redirect_reads(x: UOp, ctx: dict):
  """The read positions of x whose storage expression is one of the hazardous reads (the
  INDEX, or the storage itself: ctx maps it to (old storage, its snapshot)) read the
  snapshot; the same nodes where they are written (a STORE's target) are left alone.
  (Top-down: the read is recognized as the graph has it.)"""
  if x.op == "AFTER": return None
  src = list(x.src)
  for k, s in enumerate(x.src):
    if k == 0 and (x.op in WRITES or x.op == "INDEX"): continue
    if (hit := ctx.get(_base(s))) is not None: src[k] = _redirect(s, *hit)
  return x.replace(src=tuple(src)) if any(a is not b for a, b in zip(src, x.src)) else None


READS = RuleSet([Rule("redirect_reads", Pat.var("x"), redirect_reads)], "hazard_reads")


def separate_aliases(k: Kernel, ctx: ScheduleContext):
  """A kernel whose written arguments overlap another argument (module doc): snapshots of
  the read-only slots that overlap what it writes, private copies of written slots that
  overlap each other; None when none do."""
  a = k.args
  private = sorted(w for w in k.writes if any(overlap(a[w], a[j]) for j in k.writes if j != w))
  snapshot = [j for j in range(len(a)) if j not in k.writes and any(overlap(a[j], a[w]) for w in k.writes if w not in private)]
  if not private and not snapshot: return None
  out: list[Kernel] = []
  args, after = list(k.args), []
  for j in private + snapshot:
    pr = props(args[j])
    copy = ctx.buffer(pr.shape, pr.dtype, _device(extent(args[j])[0]))
    name = f"{'private' if j in private else 'snapshot'}_{k.name}_{j}"
    out.append(Kernel(copy_kernel(tuple(pr.shape), pr.dtype, name), [copy, args[j]], {0}, name))
    if j in private: after.append(Kernel(copy_kernel(tuple(pr.shape), pr.dtype, f"{name}_out"), [args[j], copy], {0}, f"{name}_out"))
    args[j] = copy
  out.append(Kernel(k.sink, args, set(k.writes), k.name))
  return out + after    # written back in slot order: where they overlap the last slot's contents stay, as in the reference


def separate_reads(k: Kernel, ctx: ScheduleContext):
  """A kernel's hazardous reads (see the module doc) read a snapshot instead; None when it
  has none."""
  if k.sink.op != "SINK": return None
  risky, bad = hazards(k.sink)
  if bad:
    raise CompileError("compile.order", f"kernel {k.name}: a read of the storage it writes is ordered after some of its stores "
                       "but may see another iteration's (or an unordered) store of its element: the loops cannot give it the value "
                       "decision kernel-loops says", bad[0].node)
  if not risky: return None
  out: list[Kernel] = []
  args, reads = list(k.args), {}
  for p in dict.fromkeys(a.storage for a in risky):
    if p.op != "PARAM":
      raise CompileError("compile.order", f"kernel {k.name}: a read of a {props(p).addrspace} buffer may see a store of another "
                         "iteration that decision kernel-loops says it does not see", p)
    pr = props(p)
    snap = ctx.buffer(pr.shape, pr.dtype, _device(args[p.arg["slot"]]))
    name = f"snapshot_{k.name}_{p.arg['slot']}"
    out.append(Kernel(copy_kernel(tuple(pr.shape), pr.dtype, name), [snap, args[p.arg["slot"]]], {0}, name))
    q = UOp("PARAM", (shape_operand(pr.shape),), {"slot": len(args), "dtype": pr.dtype})
    reads.update({a.node: (p, q) for a in risky if a.storage is p})
    args.append(snap)
  out.append(Kernel(graph_rewrite(k.sink, READS, reads, top_down=True), args, set(k.writes), k.name))
  return out


ALIASES = (KernelRule("separate_aliases", separate_aliases),)
SNAPSHOTS = (KernelRule("separate_reads", separate_reads),)


def separate(s: Schedule) -> Schedule:
  """Every kernel's aliased arguments get their copies, then its hazardous reads read snapshots."""
  return rewrite_schedule(rewrite_schedule(s, ALIASES), SNAPSHOTS)


def _device(storage: UOp):
  d = props(storage).device
  return d if d is not None else "CPU"
