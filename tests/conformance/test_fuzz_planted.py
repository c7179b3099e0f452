"""The fuzzer finds simple bugs fast (issue 16): a truncating IDIV, a NaN-dropping MAX and
an off-by-one PAD (tests/support/planted.py) are each found within 200 examples at the default
settings, shrunk to a small case; the reference itself passes the same search; drawn
inputs are of useful size (not mostly empty or one element)."""
from __future__ import annotations
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, Phase, seed as hseed
from planted import PlantedBackend
from tinyspec.conformance.fuzz.driver import fuzz, foci, backend_strategy
from tinyspec.backends import get_backend, capabilities_of

BUDGET = 200


@pytest.mark.parametrize("op,dtypes", [("IDIV", "int"), ("MAX", "float"), ("PAD", None)])
def test_a_planted_bug_is_found_within_200_examples(op, dtypes):
  rep = fuzz(PlantedBackend(op), examples=BUDGET, seed=0, isolate=False, stages=False)
  mine = [f for f in rep.failures if f.op == op]
  assert mine, f"the planted {op} bug was not found in {rep.examples} examples: {[str(f) for f in rep.failures]}"
  assert all(f.op == op for f in rep.failures), [str(f) for f in rep.failures]   # nothing else is reported
  f = mine[0]
  assert f.prop == "values" and (dtypes is None or dtypes in f.dtype), str(f)
  if op == "MAX": assert "expected nan" in f.message, str(f)   # the NaN, not a signed zero
  case = f.case()   # shrunk to the op and its leaves (in a kernel: with the loop, loads and store)
  assert len(case.outputs) == 1 and len(case.graph.nodes) <= (6 if case.level == "tensor" else 14), case.graph.dumps()


def test_the_reference_passes_the_same_search():
  rep = fuzz("ref", examples=BUDGET, seed=0, isolate=False, stages=False)
  assert not rep.failures, [str(f) for f in rep.failures]


def test_every_op_and_dtype_class_gets_a_round():
  caps = capabilities_of(get_backend("ref"))
  plan = foci(caps, ("tensor",), 0)
  assert {(f.op, f.dtypes) for f in plan} == {(f.op, f.dtypes) for f in foci(caps, ("tensor",), 0)}   # seeded
  assert plan != foci(caps, ("tensor",), 1)
  assert {f.op for f in plan} >= {"IDIV", "MAX", "PAD"}
  assert any(f.op == "MAX" and "float32" in f.dtypes for f in plan)


def test_drawn_inputs_are_of_useful_size():
  caps = capabilities_of(get_backend("ref"))
  sizes = []

  @settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
  @hseed(0)
  @given(backend_strategy(caps, "tensor"))
  def draw(d): sizes.extend(v.size for v in d.inputs.values())
  draw()
  assert np.median(sizes) >= 6 and np.mean(np.array(sizes) <= 1) < 0.3, sorted(sizes)
