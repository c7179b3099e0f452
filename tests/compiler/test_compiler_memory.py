"""Memory safety (every access proved in bounds or gated) and the memory plan."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.uop import UOp, toposort
from tinyspec.compiler import compile_graph
from tinyspec.compiler.check import compare_outputs
from tinyspec.compiler.literals import shape_operand as S, const
from tinyspec.compiler.analysis.bounds import missing, proved
from tinyspec.refimpl import evaluate

from targets import HAVE_CL, TARGETS


def buf(slot, shape, dt="float32", name=None):
  arg = {"slot": slot, "dtype": dt, "device": "CPU"}
  if name: arg["name"] = name
  return UOp("BUFFER", (S(shape),), arg)


def guards(src: str) -> int:
  """Bounds checks in a kernel's source: the renderer writes them as `0 <= i && i < n`."""
  return src.count("0 <= ")


@pytest.mark.parametrize("target", TARGETS)
def test_proved_in_bounds_kernel_has_no_guard(target):
  """Loop indices (and their movement-op arithmetic) are proved in bounds by min_max."""
  a, b = buf(0, (6, 8)), buf(1, (8, 6))
  out = UOp("ADD", (UOp("FLIP", (a,), [True, False]), UOp("PERMUTE", (b,), [1, 0])))
  c = compile_graph([out], target)
  src = c.sources[0].source
  assert guards(src) == 0 and "?" not in src.split("{", 1)[1].split("}")[-1] or guards(src) == 0
  x = {"buf0": np.arange(48, dtype=np.float32).reshape(6, 8), "buf1": np.arange(48, dtype=np.float32).reshape(8, 6)}
  assert not compare_outputs(c.run(x), evaluate([out], x))


@pytest.mark.parametrize("target", TARGETS)
def test_data_dependent_index_is_gated_and_behaves(target):
  """A gather with indices from data can go out of bounds: the read is gated (reads 0),
  and a scatter through such indices writes nothing out of range."""
  table, idx = buf(0, (5,), name="table"), buf(1, (6,), "int32", name="idx")
  gather = UOp("INDEX", (table, idx))
  dst = buf(2, (5,), name="dst")
  scatter = UOp("STORE", (UOp("INDEX", (dst, idx)), UOp("CAST", (idx,), "float32")))
  x = {"table": np.arange(10, 15, dtype=np.float32), "idx": np.array([0, 4, -1, 5, 1000000, -2147483648], np.int32),
       "dst": np.full(5, -1.0, np.float32)}
  for roots, expect, names in (([gather], {"out0": [10, 14, 0, 0, 0, 0]}, ("table", "idx")),
                               ([UOp("SINK", (scatter,))], {"dst": [0, -1, -1, -1, 4]}, ("idx", "dst"))):
    c = compile_graph(roots, target)
    assert "< 5" in c.source()                   # the bounds check of the data-dependent index
    xi = {k: x[k] for k in names}
    got = c.run(xi)
    assert not compare_outputs(got, evaluate(roots, xi))
    for k, v in expect.items(): assert got[k].tolist() == v


def test_every_unproved_access_is_gated_in_the_graph():
  """After rangeify, no kernel INDEX is left that intervals and its gate do not prove."""
  table, idx = buf(0, (5,)), buf(1, (6,), "int32")
  pad = UOp("PAD", (UOp("ADD", (table, const(1.0, "float32"))), S((2,)), S((9,))))
  c = compile_graph([UOp("INDEX", (table, idx)), pad], "c")
  for k in c.schedule.kernels:
    nodes = toposort(k.sink)
    users = {}
    for u in nodes:
      for j, s in enumerate(u.src): users.setdefault(s, []).append((u, j))
    for u in nodes:
      if u.op != "INDEX" or u.src[0].op != "PARAM": continue
      for user, j in users.get(u, []):
        gate = user.src[2] if user.op in ("LOAD", "STORE") and j == 0 and len(user.src) == 3 else None
        assert proved(u, gate), (k.name, user.op)


def test_ungated_out_of_bounds_kernel_is_guarded_by_the_renderer():
  """A hand-written kernel reading p[i + 2] for i < 4 from a 4-element PARAM: the
  reference reads 0 past the end (decision index-oob, gate or no gate); the compiler
  gates the read and gives the same."""
  p = UOp("PARAM", (S((4,)),), {"slot": 1, "dtype": "int32"})
  o = UOp("PARAM", (S((4,)),), {"slot": 0, "dtype": "int32"})
  i = UOp("RANGE", (const(4, "index"),), {"id": 0, "type": "LOOP"})
  k = UOp("SINK", (UOp("END", (UOp("STORE", (UOp("INDEX", (o, i)), UOp("INDEX", (p, UOp("ADD", (i, const(2, "index"))))))), i)),))
  x = {"param1": np.array([1, 2, 3, 4], np.int32)}
  assert evaluate(k, x)["param0"].tolist() == [3, 4, 0, 0]
  for target in ("c",) + (("opencl",) if HAVE_CL else ()):
    c = compile_graph([k], target)
    assert "< 4" in c.source()
    assert c.run(x)["param0"].tolist() == [3, 4, 0, 0]


def test_gate_facts_prove_padded_reads():
  """A PAD's validity mask proves its shifted read in bounds: no second guard."""
  a = buf(0, (5,))
  c = compile_graph([UOp("PAD", (a, S((3,)), S((10,))))], "c")
  src = c.sources[0].source
  assert guards(src) == 0 and "?" in src       # one mask (the PAD's), no bounds guard on top
  x = {"buf0": np.arange(1, 6, dtype=np.float32)}
  assert c.run(x)["out0"].tolist() == [0, 0, 0, 1, 2, 3, 4, 5, 0, 0]


def test_missing_clauses():
  p = UOp("PARAM", (S((4, 3)),), {"slot": 0, "dtype": "float32"})
  i = UOp("RANGE", (const(4, "index"),), {"id": 0, "type": "LOOP"})
  j = UOp("RANGE", (const(5, "index"),), {"id": 1, "type": "LOOP"})
  ix = UOp("INDEX", (p, i, j))
  m = missing(ix, None)
  assert len(m) == 1 and m[0].op == "CMPLT" and m[0].src[0] is j           # only j < 3 is unproved
  assert proved(ix, UOp("CMPLT", (j, const(3, "index"))))


# ------------------------------------------------------------------ memory plan
@pytest.mark.parametrize("target", TARGETS)
def test_memory_plan_shares_dead_intermediates(target):
  """A chain of realized intermediates: each dies when the next is made, so the arena
  is smaller than the buffers laid end to end, and the results do not change."""
  x = buf(0, (64,))
  v = x
  for _n in range(4):   # each step reads its input reversed: a fresh kernel and buffer each time
    v = UOp("CONTIGUOUS", (UOp("MUL", (UOp("FLIP", (v,), [True]), const(2.0, "float32"))),))
  c = compile_graph([v], target)
  plan = c.schedule.meta["memory"]
  assert len(plan["buffers"]) == 4
  assert plan["arena"] < plan["unshared"]
  offsets = {off for off, _ in plan["buffers"].values()}
  assert len(offsets) < 4                                                    # some buffers share storage
  data = {"buf0": np.arange(64, dtype=np.float32)}
  assert not compare_outputs(c.run(data), evaluate([v], data))
