"""compiler/analysis/localrace.py evaluates index arithmetic through the reference's own units
(refimpl/alu.py): its IDIV floors and its MOD takes the divisor's sign, as the spec and the
rendered kernels do (a table of its own once truncated them: IDIV(-7, 2) = -3)."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.tables import tables
from tinyspec.compiler.analysis.localrace import _eval
from tinyspec.refimpl.alu import alu, has_alu


def _c(v, dt="index"): return UOp("CONST", (), {"value": int(v), "dtype": dt})


@pytest.mark.parametrize("op,a,b,want", [("IDIV", -7, 2, -4), ("MOD", -7, 3, 2), ("MOD", 7, -3, -2), ("IDIV", 7, 0, 0), ("MOD", 7, 0, 7)])
def test_negative_division_follows_the_spec(op, a, b, want):
  assert int(_eval(UOp(op, (_c(a), _c(b))), {}, {})) == want
  assert int(alu(op, "index", np.int64(a), np.int64(b))) == want


def test_every_index_op_agrees_with_the_reference_evaluator():
  from tinyspec.graph import Graph, Node
  from tinyspec.refimpl import evaluate
  from tinyspec.validate import validate
  rng = np.random.default_rng(0)
  xs, ys = rng.integers(-50, 50, 64), rng.integers(-9, 9, 64)
  binary = [n for n, o in tables().ops.items() if has_alu(n) and len(o.slots) == 2 and o.family in ("binary",)]
  assert {"ADD", "MUL", "IDIV", "MOD", "MAX"} <= set(binary)
  checked = set()
  for op in binary:
    for a, b in zip(xs[:16], ys[:16]):
      g = Graph([Node("CONST", (), {"value": int(a), "dtype": "int32"}), Node("CONST", (), {"value": int(b), "dtype": "int32"}), Node(op, [0, 1])])
      if not validate(g).ok: break        # an op of floats only (DIV)
      checked.add(op)
      want = int(np.asarray(evaluate(g, {})["out0"]))
      got = _eval(UOp(op, (_c(a, "int32"), _c(b, "int32"))), {}, {})
      assert got is not None and int(got) == want, (op, a, b)
  assert {"ADD", "MUL", "IDIV", "MOD", "MAX", "SUB"} <= checked
