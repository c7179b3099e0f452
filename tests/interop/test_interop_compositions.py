"""The campaign's Tensor-API compositions (interop/compositions.py, compositions.yaml): the
documented meanings evaluated on special values, the judgement of tinygrad's values, and a
real finding on tinygrad sorted by the ledger's classes, or, with its entry hidden, reported
new with a tinygrad-only repro that fails under plain python. Adversaries: a planted wrong
value must be found, a planted right one must not, a meaning that leaves a value free must not
make a finding.

The tinygrad runs are skipped without tinygrad; they run on CPU where clang is installed,
else PYTHON."""
import math
import random
import shutil
import numpy as np
import pytest
from tinyspec.interop import compositions as C
from tinyspec.interop import hunt

DEVICE = "CPU" if shutil.which("clang") else "PYTHON"
INF, NAN = math.inf, math.nan


def _meaning(name, x, y=None):
  return C.meaning(C.table()["compositions"][name], x, y)


def test_every_composition_has_a_call_a_meaning_dtypes_and_a_form():
  for name, c in C.table()["compositions"].items():
    assert {"call", "meaning", "dtypes", "doc"} <= set(c), name
    assert c.get("form", "elementwise") in ("elementwise", "binary", "row", "scan"), name
    assert all(dt in C.table()["special"] for dt in c["dtypes"]), name


@pytest.mark.parametrize("name,x,want", [
  ("relu6", INF, 6), ("relu6", -INF, 0), ("hardswish", INF, INF), ("softplus", INF, INF), ("softplus", -INF, 0.0),
  ("logsigmoid", -INF, -INF), ("atan", INF, math.pi / 2), ("asinh", -INF, -INF), ("round", 8388609.0, 8388609.0),
  ("round", 2.5, 2.0), ("erf", -INF, -1.0), ("elu", -INF, -1.0), ("cosh", 89.0, math.cosh(89.0)), ("reciprocal", -0.0, -INF),
])
def test_meanings_at_special_values(name, x, want):
  got = float(_meaning(name, x))
  assert got == want or abs(got - want) <= 1e-12 * abs(want), (name, x, got, want)


def test_meanings_where_the_definition_itself_is_undefined_are_nan():
  """silu(-inf) = -inf * sigmoid(-inf) = -inf * 0: the documented formula has no value there,
  so tinygrad's NaN is not a finding; relu(nan) is NaN (torch, numpy)."""
  assert math.isnan(float(_meaning("silu", -INF))) and math.isnan(float(_meaning("softsign", INF)))
  assert math.isnan(_meaning("relu", NAN))


def test_row_meanings_and_exact_sums():
  assert _meaning("logsumexp", [-INF, -INF]) == -INF
  assert float(_meaning("logsumexp", [3.4e38, 1.0])) == pytest.approx(3.4e38)   # no intermediate overflow
  assert [float(v) for v in _meaning("logcumsumexp", [-INF, -INF, 0.0])] == [-INF, -INF, 0.0]
  assert _meaning("sum", [1e20, 1.0, -1e20]) == 1.0                            # exact, then rounded once
  assert _meaning("cumsum", [1, 2, 3]) == [1, 3, 6] and _meaning("argmax", [1.0, 3.0, 3.0]) == 1


def test_pow_meaning_is_python_s_and_c99_s():
  assert _meaning("pow", 1.0, INF) == 1.0 and _meaning("pow", -1.0, -INF) == 1.0 and _meaning("pow", 1.0, NAN) == 1.0
  assert _meaning("pow", -0.0, -1.0) == -INF and _meaning("pow", 0.0, -2.0) == INF and math.isnan(_meaning("pow", -8.0, 1 / 3))
  assert _meaning("pow", 3, 4) == 81 and _meaning("pow", -2.0, 2.0**32) == INF


def test_integer_results_wrap_to_the_result_dtype_and_free_values_are_free():
  case = C.Case("abs", "int8", np.array([-128, 5], np.int8))
  want, free = C.expected(case, np.dtype(np.int8))
  assert want.tolist() == [-128, 5] and not free.any()
  case = C.Case("copysign", "float32", np.array([-2.0, 3.0], np.float32), np.array([NAN, -1.0], np.float32))
  want, free = C.expected(case, np.dtype(np.float32))
  assert free.tolist() == [True, False] and want[1] == -3.0   # NaN's sign bit is no operation's: any result
  assert C.difference(np.array([7.0, -3.0], np.float32), want, "float32", None, free) is None


def test_difference_kinds_and_tolerance():
  f32 = lambda *v: np.array(v, np.float32)
  assert C.difference(f32(NAN), f32(6.0), "float32") == ("nan", 0)
  assert C.difference(f32(0.0), f32(NAN), "float32") == ("not-nan", 0)
  assert C.difference(f32(-INF), f32(INF), "float32") == ("sign", 0)
  assert C.difference(f32(INF), f32(3e38), "float32") == ("overflow", 0)
  assert C.difference(f32(1.0, 2.0), f32(1.0, 2.5), "float32") == ("ulp", 1)
  assert C.difference(f32(1.0005), f32(1.0), "float32") is None                      # tinygrad's test_ops tolerance
  assert C.difference(np.array([80], np.int64), np.array([81], np.int64), "int64") == ("value", 0)


def test_draws_are_seeded_and_dense_in_special_values():
  a = C.draw_cases(np.random.default_rng(5), 12)
  b = C.draw_cases(np.random.default_rng(5), 12)
  assert [(c.name, c.dtype, c.x.tobytes()) for c in a] == [(c.name, c.dtype, c.x.tobytes()) for c in b]
  for c in a:
    if c.form == "elementwise" and c.x.dtype.kind == "f": assert np.isinf(c.x).any() and np.isnan(c.x).any()
    if c.form == "binary" and "args" in c.comp and c.x.dtype.kind != "f": assert (c.y != 0).all() or c.name not in ("mod", "floordiv")


def _relu6_case():
  return C.Case("relu6", "float32", np.array([INF, 7.0, -1.0], np.float32))


def test_a_planted_wrong_value_is_a_finding_and_a_right_one_is_not():
  assert C.judge(_relu6_case(), np.array([6.0, 6.0, 0.0], np.float32)) is None
  f = C.judge(_relu6_case(), np.array([6.0, 6.0, 0.5], np.float32))
  assert f is not None and f.kind == "ulp" and f.index == 2
  f = C.judge(_relu6_case(), "ValueError: planted")
  assert f.kind == "error:ValueError"


def test_relu6_of_inf_on_tinygrad_is_the_documented_bug_and_hidden_comes_back_new_with_a_repro(tmp_path, monkeypatch):
  """A real run: tinygrad's relu6(+inf) is NaN; triage names relu-difference-inf (class a). With
  that entry hidden the finding is new, and its repro.py (the element alone, tinygrad and
  numpy only) fails under plain python as the finding did."""
  pytest.importorskip("tinygrad")
  findings = C.check_cases([_relu6_case()], DEVICE, None)   # no out: judged and sorted, no repro
  assert len(findings) == 1
  f = findings[0]
  assert (f.kind, f.index, f.device) == ("nan", 0, DEVICE) and f.triage.bug == "relu-difference-inf" and f.triage.ledger_class == "bug"
  sigs = {k: v for k, v in hunt.signatures().items() if k != "relu-difference-inf"}
  monkeypatch.setattr(hunt, "signatures", lambda: sigs)
  v = C.triage(f, tmp_path / "hidden")
  assert v.kind == "new" and v.repro is not None, v.note
  text = v.repro.read_text()
  assert "x.relu6()" in text and "np.inf" in text and "import tinyspec" not in text
  from tinyspec.interop.repro import reproduces
  ok, out = reproduces(v.repro, DEVICE, "value")
  assert ok and "tinygrad bug:" in out


def test_a_crash_in_a_child_is_a_finding_of_that_case_and_the_rest_still_run(tmp_path, monkeypatch):
  """A child that dies inside one case (here a planted SIGSEGV) is that case's finding; the
  cases after it run in a new child."""
  pytest.importorskip("tinygrad")
  cases = [_relu6_case(), C.Case("relu", "float32", np.array([1.0, -1.0], np.float32))]
  monkeypatch.setattr(C, "CHILD", C.CHILD.replace('print(json.dumps({"begin": c["i"]}), flush=True)',
                                                  'print(json.dumps({"begin": c["i"]}), flush=True)\n  if c["i"] == 0: import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'))
  res = C.run_cases(cases, DEVICE)
  assert res[0] == "killed by SIGSEGV" and np.asarray(res[1]).tolist() == [1.0, 0.0]


def test_a_composition_turn_of_the_campaign(tmp_path, monkeypatch):
  """One campaign turn draws its cases from the campaign's rng and returns sorted findings."""
  pytest.importorskip("tinygrad")
  monkeypatch.setattr(C, "CASES_PER_TURN", 2)
  import time
  findings = C.composition_turn(DEVICE, random.Random(7), tmp_path, time.monotonic() + 600)
  assert all(f.triage is not None and f.device == DEVICE for f in findings)
  assert C.composition_turn(DEVICE, random.Random(7), tmp_path, time.monotonic() - 1) == []
