"""The decide stage (compiler/passes/decide.py) makes the choices the renderer used to make
while printing: which accumulator updates fuse, which only in a guarded variant, which
outputs stream. They are tags on the LINEAR, seen in the render stage's graph; the
renderer prints what they say and nothing else, and a tag the input brings decides nothing."""
from __future__ import annotations
from dataclasses import replace
import numpy as np
from tinyspec.uop import UOp
from tinyspec.graph import Node
from tinyspec.frozen import thaw
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.device import Device, table_device
from tinyspec.compiler.render import render
from tinyspec.compiler.render.nodes import decision

CPU = Device("c", "decide-cpu", "cpu", 2, 0, 0, False, 64, cache_bytes=32 << 20)


def gemm(m: int = 64, dtype=np.int16):
  """A gemm of float32 values converted from int16 (products provably bounded: the updates
  fuse) or read as float32 (only a scan at launch bounds them: guarded)."""
  a, b = (Tensor(np.ones((m, m), dtype)) for _ in range(2))
  if dtype != np.float32: a, b = a.cast("float32"), b.cast("float32")
  return (a.reshape(m, m, 1) * b.reshape(1, m, m)).sum(1).graph()


def _tags(g) -> list:
  return [thaw(n.tag) for n in g.nodes if n.tag is not None]


def test_the_decisions_are_tags_of_the_render_stage_graph():
  c = compile_graph(gemm(), "c", device=CPU)
  assert {"contract": "fused"} in _tags(c.stages["render"]) and "fma_" in c.source()
  big = Tensor(np.ones(1 << 12, np.float32))
  s = compile_graph((big + big).graph(), "c", device=replace(CPU, cache_bytes=1 << 10))   # an output past the cache: streamed
  assert {"stream": True} in _tags(s.stages["render"])
  g = compile_graph(gemm(1000, np.float32), "opencl", keep_stages=False, device=table_device("h100"))   # (not staged: its updates read global memory)
  assert g.sources[-1].guard is not None and any(decision(u, "contract") == "guarded" for u in g.linear[-1].src)


def _retagged(lin: UOp, key: str, value) -> UOp:
  """The LINEAR with every node that has `key` tagged so (or untagged: value None)."""
  from tinyspec.rewrite import rebuild
  def retag(u):
    if decision(u, key) is None: return None
    return u.replace(tag={key: value} if value is not None else None)
  return rebuild(lin, retag)


def test_the_renderer_prints_what_the_tags_say():
  """The same LINEAR rendered with its contract tags dropped has no fused multiply-add; with
  them it has: the renderer decides nothing of its own."""
  c = compile_graph(gemm(), "c", keep_stages=False, device=CPU)
  k = c.schedule.kernels[-1]
  lin = c.linear[-1]
  assert "fma_" in render(lin, k.name, "c").body
  assert "fma_" not in render(_retagged(lin, "contract", None), k.name, "c").body


def test_a_tag_the_input_brings_decides_nothing():
  """A kernel-level graph whose accumulator update claims {"contract": "fused"}: user
  kernels' accumulators never fuse (their REG buffers are theirs), and the tag is removed."""
  from tinyspec.refimpl.build import Builder
  b = Builder()
  out, x = b.param((1,), "float32", 0), b.param((8,), "float32", 1)
  acc = b.buffer((), "float32", 0, addrspace="REG", device="REG")
  r = b.range(8, 0, type="REDUCE")
  init = b.STORE(acc, b.const(0.0, "float32"))
  cur = b.AFTER(acc, init, r)
  prod = b.MUL(b.INDEX(x, r), b.INDEX(x, r))
  upd = b.add("ADD", cur, prod)
  b.nodes[upd] = Node("ADD", b.nodes[upd].src, None, tag={"contract": "fused"})   # the claim
  loop = b.END(b.STORE(acc, upd), r)
  b.SINK(b.STORE(b.INDEX(out, b.const(0, "index")), b.AFTER(acc, loop)))
  c = compile_graph(b.graph(), "c", device=CPU)
  assert "fma_" not in c.source()
  assert not any(isinstance(t, dict) and "contract" in t for t in _tags(c.stages["render"]))
  got = c.run({"param1": np.arange(8, dtype=np.float32)})["param0"]
  assert got.tolist() == [float(sum(i * i for i in range(8)))]
