"""The GPU tables' reductions at every work-group size, for the race hunts of
tests/compiler/test_compiler_gpu_races.py (compiler/analysis/localrace.py everywhere, Oclgrind's race
detector where it opens).

  row      x.sum(1) of rows of 2g int32, a work-group of g items per row (GROUP_REDUCE g):
           each item reduces two elements, the g partials combine as a tree
  fused    x - x.sum(1, keepdim=True): the fused row kernel (compiler/passes/rangeify.py
           _row_fused) with the heuristics' lanes (GROUP_REDUCE g, LOCAL g) for rows of 2g
  split    a long sum split over work-groups (compiler/passes/split.py), group_size g lanes per
           group (heuristics.gpu numbers patched; the table's device with 2 compute units
           and a warp of 1, so that groups narrower than a warp are made too)
A one-item tree step (every item running l[0] op= l[h]) races at g = 2^k + 1: 3, 5, 9,
..., 129, 257. `planted_tree_combine` puts it back, for the hunts to find.
"""
from __future__ import annotations
import dataclasses
import numpy as np
from tinyspec.tensor import Tensor

TABLES = ("h100", "a100", "mi250")
SIZES = range(1, 301)
ROWS = 3
KINDS = ("row", "fused", "split")


def program(kind: str, g: int, table: str):
  """(compiled program, inputs, expected outputs) of reduction `kind` with work-groups of g."""
  from tinyspec.compiler import compile_graph
  from tinyspec.compiler.device import table_device
  dev = table_device(table)
  if kind == "split":
    dev = dataclasses.replace(dev, threads=2, warp=1)     # (groups narrower than a warp too)
    xs = (np.arange(2 * 4 * g * 8) % 7 - 3).astype(np.int32)
    t = Tensor(xs).sum()
    with _numbers(group_size=g, group_min=1, min_work=1, split_min=len(xs), split_reduce={"opencl": 4}):
      c = compile_graph(t.graph(), "opencl", keep_stages=False, device=dev)
    return c, t.inputs(), {"out0": np.asarray(xs.sum(), np.int32)}
  xs = (np.arange(ROWS * 2 * g).reshape(ROWS, 2 * g) % 11 - 5).astype(np.int32)
  x = Tensor(xs)
  if kind == "row":
    c = compile_graph(x.sum(1).graph(), "opencl", opts=[["SPLIT", 1, [g, "GROUP_REDUCE"]]], keep_stages=False, device=dev)
    return c, x.inputs(), {"out0": xs.sum(1).astype(np.int32)}
  t = x - x.sum(1, keepdim=True)
  opts = [["SPLIT", 2, [g, "GROUP_REDUCE", False]], ["SPLIT", 1, [g, "LOCAL", False]], ["SWAP", 1, 4]]   # heuristics _gpu_rows
  c = compile_graph(t.graph(), "opencl", opts=opts, keep_stages=False, device=dev)
  return c, t.inputs(), {"out0": xs - xs.sum(1, keepdims=True)}


class _numbers:
  """heuristics.gpu numbers changed for a while (spec/render.yaml, as loaded)."""
  def __init__(self, **kw): self.kw, self.old = kw, {}

  def __enter__(self):
    from tinyspec.compiler.rendertables import render_tables
    self.H = render_tables()["heuristics"]["gpu"]
    self.old = {k: self.H.get(k) for k in self.kw}
    self.H.update(self.kw)

  def __exit__(self, *exc):
    for k, v in self.old.items():
      if v is None: self.H.pop(k, None)
      else: self.H[k] = v


def group_items(c) -> list:
  """The work-group sizes of the program's kernels that use local memory."""
  return [int(np.prod(ks.local_size)) for ks in c.sources if ks.local_size and "__local" in ks.body]


def races(c) -> list[str]:
  from tinyspec.compiler.analysis.localrace import local_races
  return [r for ks, lin in zip(c.sources, c.linear) for r in local_races(ks, lin)]


def planted_tree_combine(real):
  """compiler/passes/accumulate.py _tree_combine with its first step run even when it has one lane
  (n = 2^k + 1): that range of one is no range after simplification, so every work item
  runs l[base] = op(l[base], l[base + h])."""
  from tinyspec.uop import UOp
  from tinyspec.compiler.literals import const
  from tinyspec.compiler.analysis.symbolic import simplify
  from tinyspec.compiler.passes.readers import fold

  def combine(members, lbufs, bar, base, n, next_id):
    h = 1 << ((n - 1).bit_length() - 1) if n > 1 else 0
    if n > 2 and n - h == 1:
      t = UOp("RANGE", (const(1, "index"),), {"id": next_id, "type": "GROUP_REDUCE"})
      slot = simplify(UOp("ADD", (base, t)))
      steps = []
      for red, lbuf in zip(members, lbufs):
        cur = UOp("AFTER", (lbuf, bar))
        pair = UOp(fold(red.arg["op"]), (UOp("INDEX", (cur, slot)), UOp("INDEX", (cur, simplify(UOp("ADD", (slot, const(h, "index"))))))))
        steps.append(UOp("STORE", (UOp("INDEX", (cur, slot)), pair)))
      bar = UOp("BARRIER", (UOp("END", (steps[0] if len(steps) == 1 else UOp("GROUP", tuple(steps)), t)),))
      return real(members, lbufs, bar, base, h, next_id + 1)
    return real(members, lbufs, bar, base, n, next_id)
  return combine
