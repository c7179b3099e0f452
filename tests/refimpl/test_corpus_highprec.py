"""The corpus's expected values of EXP2, LOG2, SIN and POW are the correctly rounded
results: every element with ordinary operands is checked against an independent
computation in Python's `decimal` (tests/refimpl/highprec.py), bit for bit, in every float dtype.
(Special operands -- NaN, infinities, LOG2 and POW of non-positive numbers -- follow the
decisions and are held by tests/refimpl/test_refimpl_decisions.py.)"""
from __future__ import annotations
import json
import math
import numpy as np
import pytest
from tinyspec.conformance.corpus.cases import CASES_DIR, load_array
from highprec import correctly_rounded

OPS = ("EXP2", "LOG2", "SIN", "POW")


def _cases():
  out = []
  for op in OPS:
    for d in sorted((CASES_DIR / op).iterdir()):
      if (d / "case.json").is_file(): out.append(pytest.param(op, d, id=f"{op}/{d.name}"))
  return out


def _ordinary(op: str, xs: tuple) -> bool:
  if not all(math.isfinite(x) for x in xs): return False
  if op == "SIN" and xs[0] == 0: return False   # sin(±0) = ±0: a special value
  if op in ("LOG2", "POW") and xs[0] <= 0: return False
  return True


@pytest.mark.parametrize("op, case", _cases())
def test_expected_values_are_correctly_rounded(op, case):
  meta = json.loads((case / "case.json").read_text())
  dt = meta["outputs"]["out0"]["dtype"]
  ins = [load_array(case / meta["inputs"][k]["file"], meta["inputs"][k]["dtype"]) for k in sorted(meta["inputs"])]
  want = load_array(case / meta["outputs"]["out0"]["file"], dt)
  ins = np.broadcast_arrays(*[a.astype(np.float64) for a in ins])
  checked, bad = 0, []
  for idx in np.ndindex(want.shape):
    xs = tuple(float(a[idx]) for a in ins)
    if not _ordinary(op, xs): continue
    r = correctly_rounded(op, dt, *xs)
    if r is None: continue
    got = float(np.asarray(want[idx]).astype(np.float64))
    checked += 1
    if not (got == r and math.copysign(1, got) == math.copysign(1, r)): bad.append((idx, xs, got, r))
  assert not bad, f"{len(bad)} of {checked} differ from the correctly rounded value; first: {bad[:3]}"
  assert checked > 0 or want.size == 0
