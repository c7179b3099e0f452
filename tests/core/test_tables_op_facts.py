"""The op facts of spec/ops.yaml that Python used to hold: `reduce_ops:` (REDUCE's fold op,
identity and which orders are allowed) and the ops' `commutes:` classes. Each fact is
checked against what the reference evaluator and the compiled C kernels actually do, and
a table that gets them wrong in form is refused when it loads."""
from __future__ import annotations
import math
import re
import numpy as np
import pytest
from tinyspec.tables import tables, Tables
from tinyspec.uop import UOp
from tinyspec.refimpl import evaluate
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.numeric import NP
from tinyspec.dtypes import DTYPES
from tinyspec import spec

T = tables()
# one dtype per class a reduce accepts (bool only where the validator lets the op reduce bools)
CLASS_DTYPES = {"float": ["float32", "float16", "float64"], "int": ["int8", "int64"], "uint": ["uint16"], "bool": ["bool"]}


def _empty_cases():
  for op in T.reduce_ops:
    for cls, dts in CLASS_DTYPES.items():
      if cls == "bool" and op != "MAX": continue      # REDUCE's dtype.allowed: ADD and MUL reduce numbers
      for dt in dts: yield op, dt


@pytest.mark.parametrize("op,dt", list(_empty_cases()))
def test_an_empty_reduction_is_the_tables_identity_in_the_evaluator_and_on_c(op, dt):
  from tinyspec.compiler import compile_graph
  want = T.reduce_identity(op, dt)
  bld = Builder()
  bld.REDUCE(bld.buffer((3, 0), dt, 0), arg={"op": op, "axes": [1]})
  got = evaluate(bld.graph())["out0"]
  assert got.dtype == NP[dt] and got.shape == (3, 1)
  assert all((v == want) or (math.isnan(want) if isinstance(want, float) else False) for v in got.ravel().tolist()), (op, dt, got, want)
  assert not np.signbit(got.astype(np.float64)).any() or want < 0        # ADD's identity is +0.0, not -0.0
  c = compile_graph(bld.graph(), "c").run({})["out0"]
  assert c.tobytes() == got.tobytes(), (op, dt, c, got)


def test_the_identities_say_what_decision_reduce_empty_says():
  assert T.reduce_identity("ADD", "float32") == 0 and T.reduce_identity("MUL", "int32") == 1
  assert T.reduce_identity("MAX", "float16") == -math.inf and T.reduce_identity("MAX", "bool") is False
  assert T.reduce_identity("MAX", "int16") == DTYPES["int16"].min and T.reduce_identity("MAX", "uint8") == 0


def test_reorders_is_what_the_compiler_obeys():
  """A float MUL reduction keeps its order: the compiler refuses to unroll it; the table's
  `reorders` is the only place that says so (flip it and the compiler would reorder)."""
  from tinyspec.compiler.analysis.axes import reorderable
  assert not T.reduce_reorders("MUL", "float32") and T.reduce_reorders("MUL", "int32")
  assert T.reduce_reorders("ADD", "float32") and T.reduce_reorders("MAX", "float64")
  buf = UOp("BUFFER", (UOp("VCONST", (), {"values": [8], "dtype": "index"}),), {"slot": 0, "dtype": "float32", "device": "CPU"})
  r = UOp("RANGE", (UOp("CONST", (), {"value": 8, "dtype": "index"}),), {"id": 0, "type": "REDUCE"})
  red = UOp("REDUCE", (UOp("INDEX", (buf, r)), r), {"op": "MUL"})
  assert not reorderable(red)
  assert reorderable(red.replace(arg={"op": "ADD"}))


# ------------------------------------------------------------------ commutes: true where the table says so
EDGES = {"int": [0, 1, -1, 5, -128, 127], "uint": [0, 1, 7, 255], "bool": [False, True]}
CLASS_OF = {"int": "int8", "uint": "uint8", "bool": "bool"}


def _commute_cases():
  for name, op in T.ops.items():
    for cls in sorted(op.commutes & set(CLASS_OF)):
      yield name, cls


@pytest.mark.parametrize("name,cls", list(_commute_cases()))
def test_commutes_is_true_bit_for_bit(name, cls):
  dt = CLASS_OF[cls]
  vals = EDGES[cls]
  a = np.array([x for x in vals for _ in vals], NP[dt]); b = np.array([y for _ in vals for y in vals], NP[dt])
  def run(x, y):
    bld = Builder()
    bld.add(name, bld.buffer((len(x),), dt, 0), bld.buffer((len(y),), dt, 1))
    return evaluate(bld.graph(), {0: x, 1: y})["out0"]
  assert run(a, b).tobytes() == run(b, a).tobytes()     # an op that refuses the class fails here: the table lists it wrongly


def test_float_max_does_not_commute_so_the_table_does_not_say_it_does():
  """MAX's NaN rule looks at the order (decision max-nan): listing float would let the
  simplifier swap a float MAX's operands and change its result."""
  bld = Builder()
  bld.MAX(bld.const(math.nan, "float32"), bld.const(1.0, "float32"))
  bld2 = Builder()
  bld2.MAX(bld2.const(1.0, "float32"), bld2.const(math.nan, "float32"))
  assert evaluate(bld.graph())["out0"].tobytes() != evaluate(bld2.graph())["out0"].tobytes()
  assert "float" not in T.ops["MAX"].commutes


# ------------------------------------------------------------------ malformed tables are refused
def _mutated(tmp_path, old: str, new: str):
  text = spec.path("ops.yaml").read_text()
  assert re.search(old, text, re.M), old
  p = tmp_path / "ops.yaml"
  p.write_text(re.sub(old, new, text, count=1, flags=re.M))
  return Tables(ops_path=p)


@pytest.mark.parametrize("old,new,says", [
  (r"^  MUL: \{fold: MUL, .*\n", "", "are not the reduce ops"),
  (r"^  ADD: \{fold: ADD,", "  ADD: {fold: PLUS,", "is not an op of the table"),
  (r"reorders: \[int, uint, index\]\}", "reorders: [integer]}", "are not dtype classes"),
  (r"identity: \{float: \"-inf\", bool: false", "identity: {floats: \"-inf\", bool: false", "are not dtype classes"),
  (r"^    commutes: \[int, uint, index, bool\]", "    commutes: [ints]", "not dtype classes"),
])
def test_a_malformed_fact_is_refused_when_the_table_loads(tmp_path, old, new, says):
  with pytest.raises(ValueError, match=says):
    _mutated(tmp_path, old, new)


def test_which_ops_write_and_which_list_instructions_are_table_keys(tmp_path):
  """`storage: writes` (STORE, ATOMICADD) and a `kind: listing` slot (LINEAR) are what the
  compiler and the decompositions ask (tables().write_ops, listing_ops): a table that says
  otherwise is believed, a bad value refused."""
  assert T.write_ops == {"STORE", "ATOMICADD"} and T.listing_ops == {"LINEAR"}
  assert _mutated(tmp_path, r"^(  ATOMICADD:\n(?:    .*\n)*?)    storage: writes\n", r"\1").write_ops == {"STORE"}
  assert _mutated(tmp_path, r"kind: listing", "kind: any").listing_ops == frozenset()
  with pytest.raises(ValueError, match="true, through or writes"):
    _mutated(tmp_path, r"^    storage: writes$", "    storage: maybe")
