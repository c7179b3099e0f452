"""AxisTypes and OptOps: legal opts keep the results, illegal ones are refused with the
rule id of the table they break; THREAD and GROUP_REDUCE axes run on threads on the C
target, LOCAL and GROUP_REDUCE axes as workgroups on OpenCL; PADTO masks what it adds."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.compiler import compile_graph, CompileError
from tinyspec.compiler.check import compare_outputs
from tinyspec.compiler.literals import shape_operand as S
from tinyspec.refimpl import evaluate

from targets import TARGETS, needs_cl

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
  assert "< 12LL;" in unrolled                                   # 48 / 4 iterations left


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
  ([["SPLIT", 0, [4, "GROUP_REDUCE"]]], "opt.split_from"),     # GROUP_REDUCE splits a REDUCE axis only
  ([["SPLIT", 1, [4, "UNROLL", True]]], "opt.direction"),     # UNROLL goes inner
  ([["SPLIT", 1, [4, "LOCAL"]]], "opt.split_from"),           # LOCAL from GLOBAL/LOOP, not REDUCE
  ([["NOLOCALS"], ["SPLIT", 1, [4, "GROUP_REDUCE"]]], "opt.unsupported"),   # GROUP_REDUCE needs workgroup memory
  ([["SWAP", 0, 1]], "opt.axis"),                             # the reduce axis is not in the output nest
  ([["PADTO", 0, 0]], "opt.divisible"),
  ([["SPLIT", 0, ["4", "UPCAST"]]], "opt.divisible"),
  ([["SPLIT", 0, [4, "SIDEWAYS"]]], "opt.split_from"),
])
def test_illegal_opts_are_refused_with_a_rule(opts, rule):
  with pytest.raises(CompileError) as e:
    compile_graph([SUMSQ], "c", opts)
  assert e.value.rule == rule
  from tinyspec.compiler.rendertables import render_tables
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
  assert c.sources[0].body.count("p1[") == 4     # (the kernel; a guarded fused variant has its own function)


def test_tc_refusal_says_why():
  with pytest.raises(CompileError) as e:
    compile_graph([SUMSQ], "c", [["TC", 1, [0, 0, 0]]])
  assert "matrix units" in e.value.msg


def accumulator_kernel():
  """A hand-written running sum: out[0] = sum of x over a REDUCE-typed loop whose
  accumulator is read through AFTER(acc, init, r) -- a loop-carried value."""
  from tinyspec.compiler.literals import const
  out = UOp("PARAM", (S((1,)),), {"slot": 0, "dtype": "float32"})
  x = UOp("PARAM", (S((8,)),), {"slot": 1, "dtype": "float32"})
  acc = UOp("BUFFER", (S(()),), {"slot": 0, "dtype": "float32", "device": "REG", "addrspace": "REG"})
  r = UOp("RANGE", (const(8, "index"),), {"id": 0, "type": "REDUCE"})
  init = UOp("STORE", (acc, const(0.0, "float32")))
  cur = UOp("AFTER", (acc, init, r))
  loop = UOp("END", (UOp("STORE", (acc, UOp("ADD", (cur, UOp("INDEX", (x, r)))))), r))
  st = UOp("STORE", (UOp("INDEX", (out, const(0, "index"))), UOp("AFTER", (acc, loop))))
  return UOp("SINK", (st,))


@pytest.mark.parametrize("opt", [["SPLIT", 0, [2, "UNROLL"]], ["PADTO", 0, 16]])
def test_loop_carried_axis_refuses_reordering(opt):
  with pytest.raises(CompileError) as e:
    compile_graph(accumulator_kernel(), "c", [opt])
  assert e.value.rule == "opt.carried"


def test_workgroup_larger_than_the_device_is_refused():
  from dataclasses import replace
  from tinyspec.compiler.device import device
  from tinyspec.compiler.passes.optimize import apply_opts, initial_types
  from tinyspec.compiler.passes import callify, rangeify
  k = rangeify.rangeify(callify.callify([SUMSQ])).kernels[0]
  small = replace(device("c"), max_local=16)
  with pytest.raises(CompileError) as e:
    apply_opts(initial_types(k.sink), [["SPLIT", 0, [32, "LOCAL"]]], "opencl", small)
  assert e.value.rule == "opt.unsupported" and "16" in e.value.msg


ODD = UOp("BUFFER", (S((10, 7)),), {"slot": 0, "dtype": "float32", "device": "CPU"})
ODD_X = {"buf0": np.random.default_rng(2).integers(-4, 5, (10, 7)).astype(np.float32)}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("red", ["ADD", "MAX"])
def test_padto_masks_the_added_iterations(target, red):
  """10 rows padded to 12 and UPCAST by 4, 7 columns padded to 8 and UNROLLed by 4: the
  extra rows store nothing, the extra columns reduce as the identity."""
  g = [UOp("REDUCE", (UOp("MUL", (ODD, ODD)),), {"op": red, "axes": [1]})]
  opts = [["PADTO", 0, 4], ["SPLIT", 0, [4, "UPCAST"]], ["PADTO", 1, 8], ["SPLIT", 1, [4, "UNROLL"]]]
  c = compile_graph(g, target, opts)
  sizes = sorted(u.src[0].arg["value"] for u in c.stages["optimize"].uops() if u.op == "RANGE")
  # 3 x 4 rows, 2 x 4 columns; layout.pad_outputs: the (10, 7) input is first copied into
  # a zero-padded (12, 8) one (its (10, 7) box, then the zeros: 2 rows of 8, 10 rows of 1),
  # the padded rows stored into a (12, 1) buffer and its first 10 rows copied to the (10, 1) output
  assert sizes == [1, 1, 2, 2, 3, 4, 4, 7, 8, 10, 10]
  name = c.schedule.kernels[2].name
  assert [k.name for k in c.schedule.kernels] == [f"{name}_pad0", f"{name}_pad0_edge", name, f"{name}_unpad0"]
  assert not compare_outputs(c.run(ODD_X), evaluate(g, ODD_X))


def test_padto_of_an_output_axis_gates_its_stores():
  g = [UOp("ADD", (ODD, ODD))]
  c = compile_graph(g, "c", [["PADTO", 0, 8]])
  sizes = sorted(u.src[0].arg["value"] for u in c.stages["optimize"].uops() if u.op == "RANGE")
  assert sizes == [7, 16]
  assert not compare_outputs(c.run(ODD_X), evaluate(g, ODD_X))


def test_group_reduce_runs_on_threads_in_two_phases():
  """C: the group axis's slices run on threads (phase 0) and write their partials to
  scratch; phase 1 combines them. Any thread count gives the same sum."""
  s = UOp("REDUCE", (UOp("MUL", (A, A)),), {"op": "ADD", "axes": [0, 1]})
  c = compile_graph([s], "c", [["SPLIT", 0, [8, "GROUP_REDUCE", True]], ["SPLIT", 1, [4, "UNROLL"]]])
  ks = c.sources[0]
  assert ks.thread == 8 and ks.tail and ks.scratch == [8 * 4] and "if (phase == 0)" in ks.source
  want = evaluate([s], X)
  ex = c.executable()
  for threads in (1, 2, 3, 8):
    assert not compare_outputs(ex.run(X, threads=threads), want)


@needs_cl
def test_group_reduce_and_local_are_workgroups_on_opencl():
  c = compile_graph([SUMSQ], "opencl", [["SPLIT", 0, [4, "LOCAL"]], ["SPLIT", 1, [8, "GROUP_REDUCE", True]]])
  ks = c.sources[0]
  assert sorted(ks.local_size) == [4, 8] and "__local float" in ks.source and "barrier(" in ks.source
  assert ks.source.count("get_local_id(") == 2 and ks.source.count("get_group_id(") == 1
  assert not compare_outputs(c.run(X), evaluate([SUMSQ], X))


def test_swap_exchanges_the_loop_order():
  g = [UOp("ADD", (A, A))]
  plain = compile_graph(g, "c", []).sources[0].source
  swapped = compile_graph(g, "c", [["SWAP", 0, 1]]).sources[0].source
  assert plain.index("< 64LL;") < plain.index("< 48LL;") and swapped.index("< 48LL;") < swapped.index("< 64LL;")
  assert not compare_outputs(compile_graph(g, "c", [["SWAP", 0, 1]]).run(X), evaluate(g, X))


def test_upcast_of_a_contiguous_axis_is_a_vector():
  g = [UOp("MUL", (A, A))]
  for target, typ, load in (("c", "floatx8", "vload_floatx8("), ("opencl", "float8", "vload8(")):
    src = compile_graph(g, target, [["SPLIT", 1, [8, "UPCAST"]]]).sources[0].source
    assert typ in src and load in src
  assert not compare_outputs(compile_graph(g, "c", [["SPLIT", 1, [8, "UPCAST"]]]).run(X), evaluate(g, X))


@pytest.mark.parametrize("dt, red, want", [("int32", "ADD", 1), ("float32", "MAX", 1.0), ("int32", "MAX", 1)])
def test_unrolled_reductions_survive_the_c_compiler(dt, red, want):
  """Two accumulators of a short reduction: GCC 12.2 miscompiles such loops when the
  accumulator's chain changes sign (PR 107212); render.yaml keeps each chain in one
  signedness. Found by the OptOp property test."""
  a = UOp("BUFFER", (S((8,)),), {"slot": 0, "dtype": dt, "device": "CPU"})
  b = UOp("BUFFER", (S((8,)),), {"slot": 1, "dtype": dt, "device": "CPU"})
  x = {"buf0": np.array([2, 1, 0, -2, -1, -3, -3, -3], dt), "buf1": np.array([-2, 2, 1, 3, 0, 1, 3, 2], dt) if red == "ADD" else np.array([-1, -3, -3, -3, -3, -3, -3, -3], dt)}
  g = [UOp("REDUCE", (UOp("ADD", (a, b)),), {"op": red, "axes": [0]})]
  got = compile_graph(g, "c", [["SPLIT", 0, [2, "UNROLL"]]]).run(x)
  assert got["out0"] == want and not compare_outputs(got, evaluate(g, x))


def test_float_products_keep_their_order():
  """Only float ADD may reassociate (decision reduce-empty): UNROLL and GROUP_REDUCE,
  which make independent partial products, are refused for a float MUL reduction and
  allowed for an integer one."""
  f = UOp("REDUCE", (A,), {"op": "MUL", "axes": [1]})
  for kind in ("UNROLL", "GROUP_REDUCE"):
    with pytest.raises(CompileError) as e:
      compile_graph([f], "c", [["SPLIT", 1, [4, kind]]])
    assert e.value.rule == "opt.order"
  i = UOp("REDUCE", (UOp("CAST", (A,), "int32"),), {"op": "MUL", "axes": [1]})
  c = compile_graph([i], "c", [["SPLIT", 1, [4, "UNROLL"]]])
  assert not compare_outputs(c.run(X), evaluate([i], X))
