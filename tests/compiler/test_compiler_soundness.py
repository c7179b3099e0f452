"""The five classes of unsound kernels of issue 12, each from a minimal graph
(tests/compiler/soundness_cases.py), on c and opencl: the compiled result is the reference's, or
the same refusal with the same rule id; on c, built with AddressSanitizer and
UndefinedBehaviorSanitizer in a child process, no kernel touches memory it does not own
or does anything undefined. Where the fix is a decision of the compiler (an axis kept
serial, a snapshot taken, a check before launch) a test says so directly.
"""
from __future__ import annotations
import os
import subprocess
import sys
from pathlib import Path
import pytest
from tinyspec.compiler import compile_graph, CompileError
from soundness_cases import CASES, agree
from targets import TARGETS
from test_compiler_asan import _libasan

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_agrees_with_the_reference(name, target):
  assert agree(name, target) is None


def test_the_literal_is_not_folded():
  """(x // 100) // 100 in int8 stays two divisions: 10000 is no int8 literal."""
  from soundness_cases import literal
  g, _ = literal()
  src = compile_graph(g, "c").source()
  assert "10000" not in src and src.count("idiv_int8(") >= 2


def test_the_wrapping_gate_fact_keeps_the_guard():
  from soundness_cases import gate_wrap
  g, _ = gate_wrap("store")
  src = compile_graph(g, "c").source()
  assert "< 0)" in src   # the store's guard 0 <= x + 1: 127 + 1 is -128, not 128


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("value,rule", [(10 ** 8, "PARAM.bounds"), (-1, "PARAM.bounds"), (0, "PARAM.bounds"), (5, "PARAM.bounds")])
def test_sizes_are_checked_before_anything_runs(value, rule, target):
  from soundness_cases import sizes
  for through_call in (False, True):
    g, inputs = sizes(value, through_call)
    c = compile_graph(g, target, keep_stages=False)
    with pytest.raises(ValueError) as e:
      c.executable().bind(inputs)          # binding alone refuses: nothing is launched
    assert e.value.rule == rule
    if value >= 1: assert "[1, 4]" in str(e.value)   # the kernel's bounds, tighter than the CALL's outer PARAM


def test_a_missing_size_is_refused_like_the_reference():
  from soundness_cases import sizes
  g, inputs = sizes(3)
  del inputs["param2"]
  with pytest.raises(ValueError) as e:
    compile_graph(g, "c").run(inputs)
  assert e.value.rule == "eval.input"


@pytest.mark.parametrize("axis", ["THREAD", "GLOBAL", "LOCAL", "UPCAST"])
def test_a_conflicting_axis_is_not_parallel(axis):
  """The graph's own parallel type on an axis whose iterations write one element is
  dropped (LOOP: in order); C then runs no thread slices, OpenCL one work item."""
  from soundness_cases import parallel
  from tinyspec.compiler.passes.optimize import initial_types
  from tinyspec.compiler.analysis.axes import ranges, axis_type
  g, _ = parallel(axis)
  sink = g.root_uops()[0]
  assert [axis_type(r) for r in ranges(sink)] == [axis]
  assert [axis_type(r) for r in ranges(initial_types(sink))] == ["LOOP"]
  assert compile_graph(g, "c").sources[-1].thread is None


@pytest.mark.parametrize("kind", ["THREAD", "GLOBAL", "LOCAL", "UPCAST", "UNROLL"])
def test_a_user_optop_that_would_race_is_refused(kind):
  from soundness_cases import parallel
  g, _ = parallel("LOOP", 64)
  with pytest.raises(CompileError) as e:
    compile_graph(g, "c", {"user_kernel": [["SPLIT", 0, [4, kind]]]})
  assert e.value.rule in ("opt.parallel", "opt.carried", "opt.split_from")


def test_the_loop_carried_read_reads_a_snapshot():
  """A read of what the kernel writes, not ordered after the store, reads a copy taken
  before the kernel: a second kernel (the copy) runs first."""
  from soundness_cases import parallel
  g, _ = parallel("LOOP")
  c = compile_graph(g, "c")
  assert [k.name for k in c.schedule.kernels] == ["snapshot_user_kernel_0", "user_kernel"]
  assert c.run({})["param0"].tolist() == [1]


def test_work_items_across_a_barrier_that_conflict_are_refused_on_c():
  from tinyspec.refimpl.build import Builder
  b = Builder()
  L = 4
  out = b.param((L,), "int32", 0)
  loc = b.buffer((L,), "int32", 0, addrspace="LOCAL")
  l = b.add("SPECIAL", b.const(L, "index"), arg={"name": "lidx0"})
  s1 = b.STORE(b.INDEX(loc, l), b.CAST(l, arg="int32"))
  rd = b.INDEX(b.AFTER(loc, b.BARRIER(s1)), b.MOD(b.ADD(l, b.const(1, "index")), b.const(L, "index")))
  b.SINK(b.STORE(b.INDEX(out, l), rd))
  with pytest.raises(CompileError) as e:
    compile_graph(b.graph(), "c")
  assert e.value.rule == "opt.parallel"


CHILD = r'''
import sys
from soundness_cases import CASES, agree
bad = [(n, m) for n in sorted(CASES) if (m := agree(n, "c")) is not None]
assert not bad, bad
print("sanitizers-clean")
'''


@pytest.mark.skipif(_libasan() is None, reason="no GCC AddressSanitizer runtime to preload")
def test_no_sanitizer_report(tmp_path):
  env = dict(os.environ, LD_PRELOAD=_libasan(), ASAN_OPTIONS="detect_leaks=0:halt_on_error=0",
             UBSAN_OPTIONS="print_stacktrace=0", TINYSPEC_CACHE=str(tmp_path),
             TINYSPEC_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -fno-wrapv",
             PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "compiler"), str(ROOT / "tests" / "support"), str(ROOT)]))
  r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-4000:]
  assert r.returncode == 0 and "sanitizers-clean" in r.stdout, r.stderr[-4000:]


def test_an_ordered_read_the_loops_cannot_reproduce_is_refused():
  """out[r] = 1, then a read ordered after that store (AFTER) of out[r - 1], which the
  previous iteration wrote: decision kernel-loops shows it only this iteration's store,
  the compiled loop would see the previous one's. Refused (compile.order), not miscompiled."""
  from tinyspec.refimpl.build import Builder
  from tinyspec.refimpl import evaluate
  b = Builder()
  n = 8
  out = b.param((n,), "int32", 0); res = b.param((n,), "int32", 1)
  r = b.range(n, 0)
  st = b.STORE(b.INDEX(out, r), b.const(1, "int32"))
  prev = b.MOD(b.ADD(r, b.const(n - 1, "index")), b.const(n, "index"))
  rd = b.INDEX(b.AFTER(out, st), prev)
  b.SINK(b.END(b.GROUP(st, b.STORE(b.INDEX(res, r), rd)), r))
  g = b.graph()
  assert evaluate(g, {})["param1"].tolist() == [0] * n
  for target in ("c", "opencl"):
    with pytest.raises(CompileError) as e:
      compile_graph(g, target)
    assert e.value.rule == "compile.order"


def test_a_linear_keeps_no_unproved_parallel_axis():
  """A program-level LINEAR with a THREAD loop whose stores collide (out[r % 3] = r, last
  write wins) runs the loop in order."""
  from tinyspec.uop import UOp
  from tinyspec.graph import Graph
  from tinyspec.refimpl import evaluate
  from tinyspec.compiler.literals import const, shape_operand as S
  from tinyspec.compiler.passes.linearize import linearize
  out = UOp("PARAM", (S((3,)),), {"slot": 0, "dtype": "int32"})
  r = UOp("RANGE", (const(4096, "index"),), {"id": 0, "type": "THREAD"})
  st = UOp("STORE", (UOp("INDEX", (out, UOp("MOD", (r, const(3, "index"))))), UOp("CAST", (r,), "int32")))
  g = Graph.from_uops(linearize(UOp("SINK", (UOp("END", (st, r)),))), level="program")
  want = evaluate(g, {})["param0"]
  c = compile_graph(g, "c")
  assert c.sources[0].thread is None
  assert c.run({})["param0"].tolist() == want.tolist() == [4095, 4093, 4094]
