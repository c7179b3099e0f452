"""Stage 7, memory plan: intermediate buffers whose lifetimes do not overlap share storage.

A buffer rangeify added lives from the first kernel that touches it to the last (to the
end of the program when it holds a root's value). Buffers are placed in one arena,
largest first, each at the lowest aligned offset free during its whole lifetime
(first-fit over the live intervals). The plan is data on the schedule
(`meta["memory"]`): slot -> (offset, nbytes), plus the arena size; the graph itself does
not change, so the stage's graph evaluates exactly like the previous one.
"""
from __future__ import annotations
from tinyspec.props import props
from tinyspec.compiler.schedule import Schedule
from tinyspec.dtypes import dtype as _dt

ALIGN = 256


def _nbytes(u) -> int:
  p = props(u)
  n = 1
  for d in p.shape: n *= d
  return n * _dt(p.dtype).itemsize


def plan(s: Schedule, align: int = ALIGN) -> dict:
  live: dict = {}
  for i, k in enumerate(s.kernels):
    for a in k.args:
      if a in s.intermediates:
        lo, hi = live.get(a, (i, i))
        live[a] = (min(lo, i), max(hi, i))
  end = len(s.kernels)
  for o in s.outputs:
    if o.kind == "value" and o.storage in live: live[o.storage] = (live[o.storage][0], end)
  placed: list[tuple[int, int, int, int]] = []     # (start, end, offset, size)
  out = {}
  for buf in sorted(live, key=lambda b: (-_nbytes(b), b.arg["slot"])):
    lo, hi = live[buf]
    size = max(_nbytes(buf), 1)
    busy = sorted((o, o + n) for (a, b, o, n) in placed if not (b < lo or hi < a))
    off = 0
    for o0, o1 in busy:
      if off + size <= o0: break
      off = max(off, -(-o1 // align) * align)
    placed.append((lo, hi, off, size))
    out[buf.arg["slot"]] = (off, size)
  total = max((o + n for (_, _, o, n) in placed), default=0)
  naive = sum(-(-max(_nbytes(b), 1) // align) * align for b in live)
  return {"buffers": out, "arena": total, "unshared": naive}
