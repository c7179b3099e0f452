"""compiler.supported_ops, and float behaviour the targets must keep: no flushing of
subnormals, no contraction of a*b+c into a fused multiply-add."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.tables import tables
from tinyspec.dtypes import DTYPES
from tinyspec.compiler import compile_graph, supported_ops
from tinyspec.compiler.literals import shape_operand as S

from targets import TARGETS


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_supported_ops(target):
  T = tables()
  s = supported_ops(target)
  for op, levels in s.items():
    assert levels and levels <= set(T.ops[op].levels), op       # only levels the tables allow
    assert not T.ops[op].untrusted, op
  for op, od in T.ops.items():
    if od.category in ("elementwise", "decomposed", "movement"): assert "tensor" in s.get(op, ()), op
    if od.category in ("elementwise", "decomposed") : assert {"kernel", "program"} <= s[op], op
  for op in ("RANGE", "END", "STORE", "INDEX", "LOAD", "AFTER", "IF", "ENDIF", "SPECIAL", "ATOMICADD", "LINEAR"):
    assert op in s, op
  with pytest.raises(KeyError):
    supported_ops("cuda")


def _buf(slot, dt): return UOp("BUFFER", (S((4,)),), {"slot": slot, "dtype": dt, "device": "CPU"})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_subnormals_are_not_flushed(target, dt):
  a, b = _buf(0, dt), _buf(1, dt)
  tiny = np.finfo(np.dtype(dt)).smallest_subnormal
  x = {"buf0": np.array([tiny, 3 * tiny, -tiny, 1e-3], dt), "buf1": np.array([1.0, 0.5, 2.0, 1e-36 if dt == "float32" else 1e-306], dt)}
  got = compile_graph([UOp("MUL", (a, b)), UOp("ADD", (a, a))], target).run(x)
  assert got["out0"].tolist() == (x["buf0"] * x["buf1"]).tolist()
  assert got["out1"].tolist() == (x["buf0"] + x["buf0"]).tolist()
  assert got["out0"][0] != 0 and got["out1"][1] != 0


@pytest.mark.parametrize("target", TARGETS)
def test_mulacc_is_not_fused(target):
  """a*b+c rounds twice (MULACC, and MUL then ADD): a fused multiply-add would round once."""
  a, b, c = _buf(0, "float32"), _buf(1, "float32"), _buf(2, "float32")
  e = np.float32(2.0 ** -13)
  x = {"buf0": np.full(4, 1 + e, np.float32), "buf1": np.full(4, 1 - e, np.float32), "buf2": np.full(4, -1.0, np.float32)}
  out = compile_graph([UOp("MULACC", (a, b, c)), UOp("ADD", (UOp("MUL", (a, b)), c))], target).run(x)
  twice = np.float32(np.float32(x["buf0"][0] * x["buf1"][0]) + np.float32(-1.0))   # 1 - 2^-26 rounds to 1: 0, fused: -2^-26
  assert out["out0"].tolist() == out["out1"].tolist() == [float(twice)] * 4 == [0.0] * 4


@pytest.mark.parametrize("target", ["c", "opencl"])
@pytest.mark.parametrize("dt", [n for n, d in DTYPES.items() if d.c is None or d.cl is None])
def test_a_dtype_without_a_target_type_is_refused_by_name(target, dt):
  # the float8 dtypes (spec/dtypes.yaml `c`/`cl` null): refused before any pass, as a buffer, a CAST's target or a value
  from tinyspec.compiler.errors import CompileError
  graphs = [[UOp("CAST", (_buf(0, dt),), "float32")], [UOp("CAST", (_buf(0, "float32"),), dt)],
            [UOp("ADD", (UOp("CAST", (_buf(0, "float32"),), dt),) * 2)]]
  for roots in graphs:
    with pytest.raises(CompileError) as e: compile_graph(roots, target)
    assert e.value.rule == "compile.unsupported" and f"dtype {dt} has no {target} type" in str(e.value), str(e.value)


def test_the_float8_dtypes_have_no_target_type():
  # an adversary for the test above: it must have dtypes to refuse
  assert {"float8_e4m3", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"} <= {n for n, d in DTYPES.items() if d.c is None}
