"""The hostile families of the newest optimizations (conformance/fuzz/hostile.py: padded,
gather, contract, alias) as property tests on c and opencl (PoCL), in this process: an
example's compiled result is the reference's bit for bit (its data makes every sum exact
in any order), or the reference's own refusal; a refusal of the compiler's own (compile.*,
opt.*) is a documented limitation. `tinyspec fuzz --sanitize` runs the same families on c
under AddressSanitizer, UndefinedBehaviorSanitizer and ThreadSanitizer.
TINYSPEC_HOSTILE_EXAMPLES=N draws N per family and target (default 20)."""
from __future__ import annotations
import os
import pytest
from hypothesis import given, settings, seed as hseed, HealthCheck, Phase
from tinyspec.conformance.fuzz import hostile
from tinyspec.conformance.fuzz.sanitize import reference, _legal_prefix
from tinyspec.compiler.pipeline import lower
from tinyspec.compiler.check import compare_outputs
from targets import TARGETS

EXAMPLES = int(os.environ.get("TINYSPEC_HOSTILE_EXAMPLES", "20"))


def _compiled(ex, target: str):
  try:
    c = lower(ex.graph, target, None, keep_stages=False, search=_legal_prefix(ex.opts) if ex.opts else None)
    return "ok", c.run(ex.inputs)
  except Exception as e:
    rule = getattr(e, "rule", None)
    if isinstance(rule, str): return "refused", rule
    raise


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("family", ["padded", "gather", "contract", "alias"])
def test_the_family_agrees_with_the_reference(family, target):
  @hseed(21)
  @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink])
  @given(hostile.examples((family,)))
  def prop(ex):
    want, got = reference(ex), _compiled(ex, target)
    assert want[0] != "error", want
    if got[0] == "refused" and got[1].split(".")[0] in ("compile", "opt"): return
    assert want[0] == got[0] and (want[0] == "ok" or want[1] == got[1]), (want, got)
    if want[0] == "ok":
      bad = compare_outputs(got[1], want[1])
      assert not bad, (bad, ex.opts, ex.graph.dumps()[:4000])
  prop()
