"""AxisTypes and OptOps: legal opts keep the results, illegal ones are refused with the
rule id of the table they break; THREAD axes run on threads on the C target."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.uop import UOp
from compiler import compile_graph, CompileError
from compiler.check import compare_outputs
from compiler.optimize import ranges
from compiler.props import shape_operand as S
from refimpl import evaluate

try:
  from compiler.runtime.opencl import device as _cl_device
  _cl_device()
  HAVE_CL = True
except Exception:
  HAVE_CL = False
TARGETS = ["c", pytest.param("opencl", marks=pytest.mark.skipif(not HAVE_CL, reason="no OpenCL device"))]

A = UOp("BUFFER", (S((64, 48)),), {"slot": 0, "dtype": "float32", "device": "CPU"})
SUMSQ = UOp("REDUCE", (UOp("MUL", (A, A)),), {"op": "ADD", "axes": [1]})
X = {"buf0": np.random.default_rng(1).integers(-4, 5, (64, 48)).astype(np.float32)}   # integer values: sums exact in any order


def test_initial_axis_types():
  """Output axes of an independent loop nest are GLOBAL, reduce axes REDUCE."""
  c = compile_graph([SUMSQ], "c")
  before = [u for u in c.stages["rangeify"].uops() if u.op == "RANGE"]
  after = [u for u in c.stages["optimize"].uops() if u.op == "RANGE"]
  assert sorted(r.arg["type"] for r in before) == ["LOOP", "REDUCE"]
  assert sorted(r.arg["type"] for r in after) == ["GLOBAL", "REDUCE"]


LEGAL = [
  [["SPLIT", 0, [4, "THREAD"]]],                              # THREAD splits from GLOBAL, outer
  [["SPLIT", 0, [4, "UPCAST"]]],                              # UPCAST from GLOBAL, inner, expanded
  [["SPLIT", 1, [4, "UNROLL"]]],                              # UNROLL from REDUCE, expanded
  [["SPLIT", 0, [8, "THREAD"]], ["SPLIT", 1, [6, "UNROLL"]], ["SPLIT", 2, [2, "UPCAST"]]],
  [["SPLIT", 0, [4, "LOCAL"]]],
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("opts", LEGAL, ids=lambda o: "+".join(f"{x[0]}{x[2][1] if len(x) > 2 and isinstance(x[2], list) else ''}" for x in o))
def test_legal_opts_keep_results(opts, target):
  c = compile_graph([SUMSQ], target, opts)
  assert not compare_outputs(c.run(X), evaluate([SUMSQ], X))


def test_upcast_and_unroll_are_expanded():
  """An UPCAST/UNROLL axis is not a loop any more: its copies are inline."""
  plain = compile_graph([SUMSQ], "c").sources[0].source
  unrolled = compile_graph([SUMSQ], "c", [["SPLIT", 1, [4, "UNROLL"]]]).sources[0].source
  assert unrolled.count("for (") == plain.count("for (")
  assert unrolled.count("p1[") == 4 * plain.count("p1[")
  assert "< 12;" in unrolled                                   # 48 / 4 iterations left


@pytest.mark.parametrize("opts, rule", [
  ([["SPLIT", 1, [4, "THREAD"]]], "opt.split_from"),          # THREAD splits only from GLOBAL: not a reduce axis
  ([["SPLIT", 0, [4, "UNROLL"]]], "opt.split_from"),          # UNROLL splits only from REDUCE/GROUP_REDUCE
  ([["SPLIT", 0, [4, "GLOBAL"]]], "opt.split_from"),          # GLOBAL splits from nothing
  ([["SPLIT", 0, [5, "UPCAST"]]], "opt.divisible"),
  ([["SPLIT", 0, [4, "THREAD", False]]], "opt.direction"),    # THREAD goes outer
  ([["SPLIT", 7, [4, "UPCAST"]]], "opt.axis"),
  ([["NOLOCALS"], ["SPLIT", 0, [4, "LOCAL"]]], "opt.unsupported"),
  ([["SPLIT", 0, [4, "UPCAST"]], ["TC", 0, None]], "opt.first"),
  ([["TC", 0, None]], "opt.unsupported"),
  ([["WARP9", 0, None]], "opt.unsupported"),
])
def test_illegal_opts_are_refused_with_a_rule(opts, rule):
  with pytest.raises(CompileError) as e:
    compile_graph([SUMSQ], "c", opts)
  assert e.value.rule == rule
  from compiler.tables import render_tables
  assert rule in render_tables()["rules"]                     # every refusal's rule is in the catalogue


def test_thread_axis_runs_on_threads():
  """The THREAD axis becomes [tlo, thi) slices; results equal at any thread count."""
  c = compile_graph([SUMSQ], "c", [["SPLIT", 0, [8, "THREAD"]]])
  ks = c.sources[0]
  assert ks.thread == 8 and "r0 = tlo; r0 < thi" in ks.source
  want = evaluate([SUMSQ], X)
  ex = c.executable()
  for threads in (1, 2, 3, 8):
    assert not compare_outputs(ex.run(X, threads=threads), want)


def test_opts_per_kernel_by_name():
  c = compile_graph([SUMSQ], "c", {"r_64_1": [["SPLIT", 0, [4, "UPCAST"]]]})
  assert not compare_outputs(c.run(X), evaluate([SUMSQ], X))
  assert c.sources[0].source.count("p1[") == 4
