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
from tinyspec.uop import UOp, toposort
from tinyspec.compiler.props import props, const, shape_operand, CompileError
from tinyspec.compiler.schedule import Kernel, Schedule, extent, overlap
from tinyspec.compiler.analysis.parallel import hazards, WRITES


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


def _read_from(sink: UOp, reads: set, old: UOp, new: UOp) -> UOp:
  """The kernel with the read positions whose storage expression is one of `reads`
  (the INDEX, or the storage itself) reading `new`; the same nodes where they are
  written (a STORE's target) are left alone."""
  memo: dict[UOp, UOp] = {}
  def base(s: UOp) -> UOp:
    while s.op == "AFTER": s = s.src[0]
    return s
  for u in toposort(sink):
    src = [memo[s] for s in u.src]
    if u.op != "AFTER":
      for k, s in enumerate(u.src):
        if k == 0 and (u.op in WRITES or u.op == "INDEX"): continue
        if base(s) in reads: src[k] = _redirect(src[k], old, new)
    memo[u] = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=tuple(src))
  return memo[sink]


def separate_aliases(s: Schedule) -> Schedule:
  """Kernels whose written arguments overlap another argument (module doc): snapshots of
  the read-only slots that overlap what they write, private copies of written slots
  that overlap each other."""
  out: list[Kernel] = []
  for k in s.kernels:
    a = k.args
    private = sorted(w for w in k.writes if any(overlap(a[w], a[j]) for j in k.writes if j != w))
    snapshot = [j for j in range(len(a)) if j not in k.writes and any(overlap(a[j], a[w]) for w in k.writes if w not in private)]
    if not private and not snapshot: out.append(k); continue
    args, after = list(k.args), []
    for j in private + snapshot:
      pr = props(args[j])
      copy = UOp("BUFFER", (shape_operand(pr.shape),), {"slot": s.free_slot(), "dtype": pr.dtype, "device": _device(extent(args[j])[0])})
      s.intermediates.add(copy)
      name = f"{'private' if j in private else 'snapshot'}_{k.name}_{j}"
      out.append(Kernel(copy_kernel(tuple(pr.shape), pr.dtype, name), [copy, args[j]], {0}, name))
      if j in private: after.append(Kernel(copy_kernel(tuple(pr.shape), pr.dtype, f"{name}_out"), [args[j], copy], {0}, f"{name}_out"))
      args[j] = copy
    out.append(Kernel(k.sink, args, set(k.writes), k.name))
    out.extend(after)    # written back in slot order: where they overlap the last slot's contents stay, as in the reference
  return Schedule(out, s.outputs, s.intermediates, dict(s.meta))


def separate_reads(s: Schedule) -> Schedule:
  """Every kernel's hazardous reads (see the module doc) read a snapshot instead; aliased
  arguments first get their copies (separate_aliases)."""
  s = separate_aliases(s)
  out: list[Kernel] = []
  for k in s.kernels:
    if k.sink.op != "SINK": out.append(k); continue
    risky, bad = hazards(k.sink)
    if bad:
      raise CompileError("compile.order", f"kernel {k.name}: a read of the storage it writes is ordered after some of its stores "
                         "but may see another iteration's (or an unordered) store of its element: the loops cannot give it the value "
                         "decision kernel-loops says", bad[0].node)
    if not risky: out.append(k); continue
    sink, args = k.sink, list(k.args)
    for p in dict.fromkeys(a.storage for a in risky):
      if p.op != "PARAM":
        raise CompileError("compile.order", f"kernel {k.name}: a read of a {props(p).addrspace} buffer may see a store of another "
                           "iteration that decision kernel-loops says it does not see", p)
      pr = props(p)
      snap = UOp("BUFFER", (shape_operand(pr.shape),), {"slot": s.free_slot(), "dtype": pr.dtype, "device": _device(args[p.arg["slot"]])})
      s.intermediates.add(snap)
      out.append(Kernel(copy_kernel(tuple(pr.shape), pr.dtype, f"snapshot_{k.name}_{p.arg['slot']}"), [snap, args[p.arg["slot"]]], {0},
                        f"snapshot_{k.name}_{p.arg['slot']}"))
      q = UOp("PARAM", (shape_operand(pr.shape),), {"slot": len(args), "dtype": pr.dtype})
      sink = _read_from(sink, {a.node for a in risky if a.storage is p}, p, q)
      args.append(snap)
    out.append(Kernel(sink, args, set(k.writes), k.name))
  return Schedule(out, s.outputs, s.intermediates, dict(s.meta))


def _device(storage: UOp):
  d = props(storage).device
  return d if d is not None else "CPU"
