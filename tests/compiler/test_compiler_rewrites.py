"""Every rewrite rule of the simplifier (compiler/analysis/symbolic.py RULES, the whole table) holds
in the dtype's own wrapping arithmetic: for every integer dtype (index included) and
bool, nodes matching the rule's pattern are built over edge-dense and narrowed operands
(tests/compiler/rewrite_cases.py); where the rule rewrites one, the reference evaluator gives the
node and its rewrite the same bits on every lane, and both lie in their derived min_max.
A rule that writes a constant its dtype cannot hold fails too (compiler.literals.const
refuses it). TINYSPEC_REWRITE_ROUNDS (default 1) repeats with more seeds.
"""
from __future__ import annotations
import os
import random
import numpy as np
import pytest
from tinyspec.props import props
from tinyspec.rewrite import Rule
from tinyspec.compiler.analysis.symbolic import RULES, simplify
from rewrite_cases import INT_DTYPES, ProbeKernel, instance, valid

ROUNDS = int(os.environ.get("TINYSPEC_REWRITE_ROUNDS", "1"))
PER_GRAPH = 24
RULE_NAMES = [r.name for r in RULES.rules]


def check_rule(k: int, dt: str, seed: int) -> tuple[int, int]:
  """Instances of rule k in dtype dt: (valid instances, rewritten ones); asserts every
  rewrite keeps every lane's bits and every value inside both intervals."""
  pat, fn = RULES.rules[k].pat, RULES.rules[k].fn
  rng = random.Random(f"{k}-{dt}-{seed}")
  kb = ProbeKernel(rng)
  pairs, tried = [], 0
  for _ in range(PER_GRAPH * 4):
    if len(pairs) >= PER_GRAPH: break
    x = instance(pat, dt, kb, {})
    if not valid(x): continue
    b: dict = {}
    if not pat.match(x, b): continue
    tried += 1
    y = fn(**b)
    if y is None or y is x: continue
    assert valid(y), f"{fn.__name__} made an invalid node from {x}: {y}"
    pairs.append((kb.output(x), kb.output(y), x, y))
  if not pairs: return tried, 0
  out = kb.evaluate()
  for before, after, x, y in pairs:
    want, got = out[before], out[after]
    assert np.array_equal(want, got), f"{fn.__name__} ({dt}): {x}\n  -> {y}\n  lanes {np.nonzero(want != got)[0][:8]}: {want[want != got][:8]} != {got[want != got][:8]}"
    for e, v in ((x, want), (y, got)):
      lo, hi = props(e).min_max
      vv = v.astype(object)
      assert vv.min() >= lo and vv.max() <= hi, f"{fn.__name__} ({dt}): values [{vv.min()}, {vv.max()}] outside min_max [{lo}, {hi}] of {e}"
  return tried, len(pairs)


@pytest.mark.parametrize("k", range(len(RULES.rules)), ids=RULE_NAMES)
def test_rule_keeps_every_value(k):
  fired, tried_int = 0, {}
  for dt in INT_DTYPES + ["bool"]:
    for seed in range(ROUNDS):
      tried, n = check_rule(k, dt, seed)
      fired += n
      if dt != "bool": tried_int[dt] = tried_int.get(dt, 0) + tried
  name = RULE_NAMES[k]
  assert fired > 0, f"{name} never rewrote an instance: the generator does not reach it"
  if name not in ("bool_and", "bool_or", "not_not"):   # bool-only rules: integer instances are invalid or declined
    assert all(tried_int[dt] > 0 for dt in INT_DTYPES), f"{name}: no valid instance for {[d for d in INT_DTYPES if not tried_int[d]]}"


def test_the_table_is_what_is_tested():
  """The parametrization above covers RULES itself: a rule added to the table is tested."""
  from tinyspec.compiler.analysis import symbolic
  assert [r.name for r in symbolic.RULES.rules] == RULE_NAMES and len(RULE_NAMES) == len(set(RULE_NAMES))


@pytest.mark.parametrize("dt", INT_DTYPES)
def test_simplify_keeps_every_value(dt):
  """The whole simplifier (every rule to a fixpoint) on random expressions of dt."""
  from rewrite_cases import alu
  rng = random.Random(f"simplify-{dt}")
  kb = ProbeKernel(rng)
  pairs = []
  for _ in range(40):
    x = alu(kb, dt)
    if not valid(x): continue
    y = simplify(x)
    pairs.append((kb.output(x), kb.output(y), x, y))
  out = kb.evaluate()
  for before, after, x, y in pairs:
    assert np.array_equal(out[before], out[after]), f"{x}\n  -> {y}"


# ------------------------------------------------------------------ the check can fail
def _old_div_div(x, a, c1, c2):
  """The rule before issue 12: the product need not be a literal of the dtype."""
  from tinyspec.uop import UOp
  from tinyspec.compiler.analysis.symbolic import wrap
  v = int(c1.arg["value"]) * int(c2.arg["value"])
  if int(c1.arg["value"]) <= 0 or int(c2.arg["value"]) <= 0: return None
  return UOp("IDIV", (a, c1.replace(arg={"value": wrap(v, props(x).dtype), "dtype": props(x).dtype})))


def _shift_ignoring_wrap(x, a, c1, c2):
  """a + c1 < c2 -> a < c2 - c1 without asking whether a + c1 wraps."""
  from tinyspec.uop import UOp
  from tinyspec.compiler.analysis.symbolic import fits, _c
  v = int(c2.arg["value"]) - int(c1.arg["value"])
  if not fits(v, v, props(a).dtype): return None
  return UOp("CMPLT", (a, _c(v, a)))


def _split_inexact(x, a, c):
  """floor((t*k + r)/c) reasoning on the linear form even where the sum wraps."""
  from tinyspec.compiler.analysis import symbolic as S
  real = S.exact_linear
  try:
    S.exact_linear = lambda u, limit=64: S.linear(u, limit) if S._is_intlike(u) else None
    return S.div_split(x, a, c)
  finally:
    S.exact_linear = real


@pytest.mark.parametrize("name,mutant", [("div_div", _old_div_div), ("lt_shift", _shift_ignoring_wrap), ("div_split", _split_inexact)])
def test_an_unsound_rule_is_caught(name, mutant, monkeypatch):
  """Planted unsound rules (each a bug of issue 12's kind) fail the property above."""
  k = RULE_NAMES.index(name)
  rules = list(RULES.rules)
  rules[k] = Rule(rules[k].name, rules[k].pat, mutant)
  monkeypatch.setattr(RULES, "rules", rules)
  with pytest.raises(AssertionError):
    for dt in ("int8", "uint8", "int16", "int32"):
      check_rule(k, dt, 0)
