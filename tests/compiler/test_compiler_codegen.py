"""Kernel- and program-level codegen ops through both targets against refimpl: IF/ENDIF, BARRIER,
SPECIAL (work items; loops on C), ATOMICADD (a threaded histogram), CUSTOM (untrusted:
refused unless explicitly allowed)."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.graph import load_file
from tinyspec.conformance.corpus.rulecases import RULES_DIR
from tinyspec.compiler import compile_graph, CompileError
from tinyspec.compiler.check import compare_outputs
from tinyspec.compiler.literals import shape_operand as S, const
from tinyspec.refimpl import evaluate

from targets import TARGETS


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["IF", "ENDIF", "SPECIAL", "ATOMICADD", "BARRIER"])
def test_corpus_examples(op, target):
  g, _ = load_file(RULES_DIR / "ops" / op / "valid-example.json")
  want = evaluate(g, {})
  got = compile_graph(g, target).run({})
  assert not compare_outputs(got, want) and set(got) == set(want)


def histogram(dt: str, n: int = 1000, bins: int = 8):
  """hist[data[i]] += w for i < n, the loop a THREAD axis: many iterations hit one bin."""
  hist = UOp("PARAM", (S((bins,)),), {"slot": 0, "dtype": dt})
  data = UOp("PARAM", (S((n,)),), {"slot": 1, "dtype": "int32"})
  i = UOp("RANGE", (const(n, "index"),), {"id": 0, "type": "THREAD"})
  w = const(1 if dt.startswith(("int", "uint")) else 0.5, dt)
  add = UOp("ATOMICADD", (UOp("INDEX", (hist, UOp("CAST", (UOp("INDEX", (data, i)),), "index"))), w))
  return UOp("SINK", (UOp("END", (add, i)),))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", ["int32", "int64", "float32"])
def test_atomic_histogram(dt, target):
  """Integer atomic adds commute exactly, so the THREAD axis runs on threads; float ones
  round differently in another order, so that axis runs in order (compiler/analysis/parallel.py)."""
  k = histogram(dt)
  x = {"param1": np.random.default_rng(0).integers(0, 8, 1000).astype(np.int32), "param0": np.zeros(8, dt)}
  want = evaluate(k, x)
  c = compile_graph(k, target)
  if target == "c": assert c.sources[0].thread == (1000 if dt != "float32" else None) and "__atomic" in c.source()
  got = c.executable().run(x, threads=4) if target == "c" else c.run(x)
  assert not compare_outputs(got, want)
  assert got["param0"].sum() == (1000 if dt != "float32" else 500)


def test_custom_is_refused_unless_allowed():
  p = UOp("PARAM", (S((3,)),), {"slot": 0, "dtype": "int32"})
  i = UOp("RANGE", (const(3, "index"),), {"id": 0, "type": "LOOP"})
  v = UOp("CUSTOM", (i,), {"fmt": "(int)({0} * 7)", "dtype": "int32"})
  k = UOp("SINK", (UOp("END", (UOp("STORE", (UOp("INDEX", (p, i)), v)), i)),))
  with pytest.raises(CompileError) as e:
    compile_graph(k, "c")
  assert e.value.rule == "compile.untrusted"
  c = compile_graph(k, "c", allow_untrusted=True)
  assert "(int)(r0 * 7)" in c.source()
  assert c.run({})["param0"].tolist() == [0, 7, 14]


def test_render_cases_follow_the_device_kind():
  """A case with `kinds` applies only to devices of those kinds: float32 EXP2 is the
  vectorizable helper on CPUs (C and OpenCL, computing in double: the OpenCL kernel
  enables cl_khr_fp64), the OpenCL builtin on GPUs."""
  from tinyspec.compiler import render as R
  from tinyspec.compiler.literals import shape_operand
  x = UOp("BUFFER", (shape_operand((8,)),), {"slot": 0, "dtype": "float32", "device": "CPU"})
  e = UOp("EXP2", (UOp("INDEX", (UOp("PARAM", (shape_operand((8,)),), {"slot": 0, "dtype": "float32"}), UOp("CONST", (), {"value": 0, "dtype": "index"}))),))
  assert R.select_case(e, "opencl", "cpu")["code"].startswith("exp2_f32")
  assert R.select_case(e, "opencl", "gpu")["code"].startswith("exp2")
  assert not R.select_case(e, "opencl", "gpu")["code"].startswith("exp2_f32")
  assert R.select_case(e, "c", "cpu")["code"].startswith("exp2_f32")
  src = compile_graph([UOp("EXP2", (x,))], "opencl", keep_stages=False).sources[0]   # no device needed to render
  from tinyspec.compiler.device import device
  if device("opencl").kind == "cpu": assert "exp2_f32(" in src.source and src.fp64
  else: assert "exp2_f32(" not in src.source
