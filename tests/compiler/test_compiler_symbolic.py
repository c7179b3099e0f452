"""The symbolic simplifier: the folds the index arithmetic needs, and a property test that
it never changes a value (each random expression and its simplification, stored by a
kernel over all range values, evaluate equal in refimpl)."""
from __future__ import annotations
import numpy as np
from hypothesis import given, settings, strategies as st, HealthCheck
from tinyspec.uop import UOp
from tinyspec.props import props
from tinyspec.compiler.literals import const, shape_operand as S
from tinyspec.compiler.analysis.symbolic import simplify
from tinyspec.refimpl import evaluate


def rng(n, i): return UOp("RANGE", (const(n, "index"),), {"id": i, "type": "LOOP"})
def c(v): return const(v, "index")
def add(a, b): return UOp("ADD", (a, b))
def mul(a, b): return UOp("MUL", (a, b))
def div(a, b): return UOp("IDIV", (a, b))
def mod(a, b): return UOp("MOD", (a, b))


X, Y, Z = rng(5, 0), rng(4, 1), rng(3, 2)


def test_division_folds():
  assert simplify(div(add(mul(X, c(4)), Y), c(4))) is X                    # (x*4+y)//4 -> x, y in [0, 3]
  assert simplify(mod(add(mul(X, c(4)), Y), c(4))) is Y
  flat = add(add(mul(X, c(12)), mul(Y, c(3))), Z)                           # a row-major flatten, split again
  assert simplify(div(flat, c(12))) is X
  assert simplify(mod(div(flat, c(3)), c(4))) is Y
  assert simplify(mod(flat, c(3))) is Z
  assert simplify(div(div(flat, c(3)), c(4))) is X                         # floor(floor(a/3)/4) = floor(a/12)


def test_mod_and_compare_by_intervals():
  assert simplify(mod(Y, c(4))) is Y                                        # x % n -> x for x in [0, n-1]
  assert simplify(mod(Y, c(9))) is Y
  assert simplify(UOp("CMPLT", (X, c(5)))).arg["value"] is True
  assert simplify(UOp("CMPLT", (X, c(0)))).arg["value"] is False
  lt = simplify(UOp("CMPLT", (add(X, c(-1)), c(2))))                        # x - 1 < 2  ->  x < 3
  assert lt.op == "CMPLT" and lt.src[0] is X and lt.src[1].arg["value"] == 3


def test_constants_fold_and_reassociate():
  assert simplify(add(add(X, c(3)), c(-3))) is X
  s = simplify(add(mul(X, c(2)), mul(X, c(3))))
  assert s.op == "MUL" and s.src[0] is X and s.src[1].arg["value"] == 5
  assert simplify(mul(mul(X, c(2)), c(3))).src[1].arg["value"] == 6
  assert simplify(add(c(2), c(3))).arg["value"] == 5
  assert simplify(mul(X, c(0))).arg["value"] == 0
  assert simplify(div(c(-7), c(2))).arg["value"] == -4                     # floor division (decision idiv-mod)


def test_wrapping_arithmetic_is_not_divided():
  """An int8 sum that can wrap keeps its division: (x*64 + 64)//64 is not x + 1 when x*64 wraps."""
  p = UOp("PARAM", (S(()), const(0, "int8"), const(3, "int8")), {"slot": 0, "dtype": "int8"})
  e = div(add(mul(p, const(64, "int8")), const(64, "int8")), const(64, "int8"))
  assert simplify(e).op == "IDIV"


# ------------------------------------------------------------------ property: simplification keeps values
LEAVES = [X, Y, Z]


@st.composite
def exprs(draw, depth=0):
  if depth >= 4 or draw(st.integers(0, 3)) == 0:
    return draw(st.sampled_from(LEAVES + [c(draw(st.integers(-6, 12)))]))
  op = draw(st.sampled_from(["ADD", "MUL", "IDIV", "MOD", "MAX", "CMPLT"]))
  a = draw(exprs(depth=depth + 1))
  b = draw(exprs(depth=depth + 1)) if op in ("ADD", "MUL", "MAX") else c(draw(st.integers(-4, 9)))
  e = UOp(op, (a, b))
  return UOp("CAST", (e,), "index") if op == "CMPLT" else e


def _kernel(e):
  """out[x, y, z] = e (every RANGE value), as a kernel."""
  out = UOp("PARAM", (S((5, 4, 3)),), {"slot": 0, "dtype": "index"})
  return UOp("SINK", (UOp("END", (UOp("STORE", (UOp("INDEX", (out, X, Y, Z)), e)), X, Y, Z)),))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs())
def test_simplify_keeps_every_value(e):
  s = simplify(e)
  lo, hi = props(s).min_max
  want = evaluate(_kernel(e))["param0"]
  got = evaluate(_kernel(s))["param0"]
  assert np.array_equal(got, want), (e, s)
  assert want.min() >= props(e).min_max[0] and want.max() <= props(e).min_max[1]
  assert got.min() >= lo and got.max() <= hi
